"""The builder interface: scheduled modules in, loadable artifacts (or errors) out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType

from ...ir import IRModule
from ...runtime.backend import Artifact
from ...target import Target

BuildArtifact = Artifact
"""A built candidate, loadable by a runner: the runtime's backend
:class:`~tilecraft.runtime.backend.Artifact` (its one function is :attr:`Artifact.name`)."""


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
