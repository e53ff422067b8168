"""The backend interface: what every target kind does to turn functions into loaded code.

A :class:`Backend` runs four steps, each its own method so callers can stop or step in between
(the graph executor adds its entry points to the emitted C before compiling; the tuner's
builder compiles in one process and its runner loads in another):

``lower`` (the backend's :meth:`~Backend.pipeline` over each function) -> :class:`Lowered`;
``emit`` (code generation, text only) -> :class:`Source`;
``compile`` (the compile cache) -> :class:`Artifact`, JSON-serialisable;
``load`` (no lowering, no emitting) -> a callable library.
"""

from __future__ import annotations

import base64
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ...errors import BuildError
from ...ir import IRModule, PrimFunc
from ...ir.transform import FunctionPass
from ...lower.gpu_split_host_device import GPUProgram
from ...target import Target
from ..arguments import ArgumentTypeError


@dataclass(frozen=True)
class Lowered:
    """Functions lowered by a backend.

    Attributes
    ----------
    originals
        Function name -> the function as given (arguments are checked against it).
    functions
        Function name -> the lowered function (its parameters are the compiled ABI).
    programs
        GPU backends: function name -> the lowered program (kernels and host steps).
    """

    originals: dict[str, PrimFunc]
    functions: dict[str, PrimFunc]
    programs: dict[str, GPUProgram] = field(default_factory=dict)


@dataclass(frozen=True)
class Source:
    """Emitted source: its text, what it was emitted from, and the emitter's own record."""

    text: str
    lowered: Lowered
    symbols: dict[str, str]
    code: Any = field(default=None, compare=False)


@dataclass(frozen=True)
class Artifact:
    """A compiled unit, enough to load it again anywhere (a runner process, another node).

    Attributes
    ----------
    kind
        The backend that made it (``"c"``, ``"cuda"``, ``"emulated"``; see :func:`backend_of`).
    target
        The target string it was built for.
    source
        The compiled source text.
    symbols
        Function name -> exported symbol (C) or the function's name (CUDA).
    program
        The functions as given and as lowered (``tc.ir`` JSON; GPU programs with their
        kernels and host steps), so loading lowers nothing.
    lib_path
        The compiled file (shared library or cubin) on the machine that compiled it.
    lib_bytes
        The compiled file itself, for loaders on other machines (None: read ``lib_path``).
    meta
        What else the backend's loader needs (JSON values), e.g. the emulator's fault sites.
    """

    kind: str
    target: str
    source: str
    symbols: dict[str, str]
    program: str
    lib_path: str | None = None
    lib_bytes: bytes | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        """The functions the artifact holds."""
        return list(self.symbols)

    @property
    def name(self) -> str:
        """The one function of a single-function artifact (a tuning candidate).

        Raises
        ------
        BuildError
            When the artifact holds several functions.
        """
        if len(self.symbols) != 1:
            raise BuildError(f"the artifact holds {len(self.symbols)} functions, not one")
        return next(iter(self.symbols))

    @property
    def symbol(self) -> str:
        """The exported symbol of :attr:`name`."""
        return self.symbols[self.name]

    def as_message(self) -> dict[str, Any]:
        """A JSON-ready dict (see :meth:`from_message`)."""
        blob = None if self.lib_bytes is None else base64.b64encode(self.lib_bytes).decode()
        return {
            "kind": self.kind,
            "target": self.target,
            "source": self.source,
            "symbols": dict(self.symbols),
            "program": self.program,
            "lib_path": self.lib_path,
            "lib_bytes": blob,
            "meta": self.meta,
        }

    @staticmethod
    def from_message(data: Mapping[str, Any]) -> Artifact:
        """Rebuild an artifact from :meth:`as_message` output.

        Raises
        ------
        BuildError
            When ``data`` is not a well-formed artifact.
        """
        try:
            blob, path, symbols = data["lib_bytes"], data["lib_path"], data["symbols"]
            if not isinstance(symbols, dict) or not isinstance(data["meta"], dict):
                raise TypeError("symbols and meta must be objects")
            return Artifact(
                kind=str(data["kind"]),
                target=str(data["target"]),
                source=str(data["source"]),
                symbols={str(k): str(v) for k, v in symbols.items()},
                program=str(data["program"]),
                lib_path=None if path is None else str(path),
                lib_bytes=None if blob is None else base64.b64decode(blob),
                meta=dict(data["meta"]),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise BuildError(f"malformed build artifact: {e}") from None


def originals_of(func_or_module: PrimFunc | IRModule) -> dict[str, PrimFunc]:
    """Function name -> PrimFunc of what ``build`` was given.

    Raises
    ------
    BuildError
        For a module without PrimFuncs.
    ArgumentTypeError
        For anything but a PrimFunc or an IRModule.
    """
    if isinstance(func_or_module, PrimFunc):
        return {func_or_module.name: func_or_module}
    if isinstance(func_or_module, IRModule):
        originals = dict(func_or_module.prim_funcs())
        if not originals:
            raise BuildError("build: the module has no PrimFunc to compile")
        return originals
    kind = type(func_or_module).__name__
    raise ArgumentTypeError(f"build: expected a PrimFunc or IRModule, got {kind}")


class Backend(ABC):
    """Lowering, emission, compilation and loading for one target kind.

    Class attributes say what callers may rely on: ``kind`` names the artifacts it makes;
    ``hosts_graph_entries`` is True when the compiled unit is a host C library the graph
    executor can add its native entry points to; ``runner`` names the runner that measures
    its artifacts (``"local"``: a CPU process, ``"cuda"``: a GPU process); ``needs_gpu_schedule``
    is True when a function must bind its loops to GPU threads to run (no CPU rules apply).
    """

    kind: ClassVar[str]
    hosts_graph_entries: ClassVar[bool] = True
    runner: ClassVar[str] = "local"
    needs_gpu_schedule: ClassVar[bool] = False

    @abstractmethod
    def pipeline(self, target: Target) -> list[FunctionPass]:
        """The lowering passes, in order (a literal list per backend)."""

    @abstractmethod
    def lower(self, func_or_module: PrimFunc | IRModule, target: Target) -> Lowered:
        """Lower every PrimFunc (functions already lowered are kept as they are)."""

    @abstractmethod
    def emit(self, lowered: Lowered, target: Target) -> Source:
        """Emit one translation unit for ``lowered`` (code generation only)."""

    @abstractmethod
    def compile(
        self, source: Source, target: Target, *, arch_flags: tuple[str, ...] | None = None
    ) -> Artifact:
        """Compile ``source`` through the compile cache."""

    @abstractmethod
    def load(self, artifact: Artifact) -> Any:
        """The callable library of ``artifact`` (pure loading)."""

    def build(
        self,
        func_or_module: PrimFunc | IRModule,
        target: Target,
        *,
        arch_flags: tuple[str, ...] | None = None,
    ) -> Any:
        """``load(compile(emit(lower(...))))``.

        Raises
        ------
        BuildError
            For a module without PrimFuncs (and whatever a step raises).
        """
        originals_of(func_or_module)
        source = self.emit(self.lower(func_or_module, target), target)
        return self.load(self.compile(source, target, arch_flags=arch_flags))

    def check_artifact(self, artifact: Artifact) -> None:
        """Refuse an artifact another backend made.

        Raises
        ------
        BuildError
            When ``artifact.kind`` is not this backend's.
        """
        if artifact.kind != self.kind:
            raise BuildError(
                f"{type(self).__name__} loads {self.kind!r} artifacts, got {artifact.kind!r}"
            )
