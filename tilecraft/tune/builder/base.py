"""The builder interface: scheduled modules in, loadable artifacts (or errors) out."""

from __future__ import annotations

import base64
import enum
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from ...errors import TuneError
from ...ir import IRModule
from ...target import Target


class ArtifactKind(enum.Enum):
    """What a build produced: a C shared library or a CUDA cubin."""

    C = "c"
    CUDA = "cuda"


@dataclass(frozen=True)
class BuildArtifact:
    """A built candidate, loadable by a runner.

    Attributes
    ----------
    kind
        C shared library or CUDA cubin.
    target
        The target string it was built for.
    name
        The function to run.
    source
        The generated C or CUDA source.
    functions_json
        C: the scheduled and lowered function, serialised together (``tc.ir.to_json`` of
        the pair, so shared variables stay shared); CUDA: the scheduled module.
    symbol
        The exported C symbol (C only).
    lib_path
        The shared library on the building machine (C).
    lib_bytes
        The library or cubin itself, for runners on other machines (Ray) and for CUDA.
    """

    kind: ArtifactKind
    target: str
    name: str
    source: str
    functions_json: str
    symbol: str = ""
    lib_path: str | None = None
    lib_bytes: bytes | None = None

    def as_message(self) -> dict[str, Any]:
        """A JSON-ready dict (see :meth:`from_message`)."""
        blob = None if self.lib_bytes is None else base64.b64encode(self.lib_bytes).decode()
        return {
            "kind": self.kind.value,
            "target": self.target,
            "name": self.name,
            "source": self.source,
            "functions_json": self.functions_json,
            "symbol": self.symbol,
            "lib_path": self.lib_path,
            "lib_bytes": blob,
        }

    @staticmethod
    def from_message(data: Mapping[str, Any]) -> BuildArtifact:
        """Rebuild an artifact from :meth:`as_message` output.

        Raises
        ------
        TuneError
            When ``data`` is not a well-formed artifact.
        """
        try:
            blob = data["lib_bytes"]
            return BuildArtifact(
                kind=ArtifactKind(data["kind"]),
                target=str(data["target"]),
                name=str(data["name"]),
                source=str(data["source"]),
                functions_json=str(data["functions_json"]),
                symbol=str(data["symbol"]),
                lib_path=None if data["lib_path"] is None else str(data["lib_path"]),
                lib_bytes=None if blob is None else base64.b64decode(blob),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise TuneError(f"malformed build artifact: {e}") from None


@dataclass(frozen=True)
class BuilderInput:
    """One candidate to build: a module holding one scheduled PrimFunc, and the target."""

    mod: IRModule
    target: Target


@dataclass(frozen=True)
class BuilderResult:
    """The artifact of a build, or why it failed.

    Attributes
    ----------
    artifact
        The built candidate (None on failure).
    error
        What failed (None on success).
    build_secs
        Wall time of the build, in seconds.
    """

    artifact: BuildArtifact | None
    error: str | None = None
    build_secs: float = 0.0


class Builder(ABC):
    """Builds batches of candidates; a failure is a result, never an exception."""

    @abstractmethod
    def build(self, inputs: Sequence[BuilderInput]) -> list[BuilderResult]:
        """Build every input; results in the same order."""

    def close(self) -> None:
        """Release worker processes (the builder may be used again; they restart)."""
        return None  # nothing to release by default

    def __enter__(self) -> Builder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
