"""Build PrimFuncs: a PrimFunc or a module of PrimFuncs through its target's backend.

:func:`~tilecraft.runtime.backend.backend_of` picks the backend (the only place a target kind
is decided); the backend lowers, emits, compiles (cached) and loads. A module holding graph
functions is built by ``tc.build`` (:func:`tilecraft.driver.build`), which has the graph
layer lower them and the runtime's executor (:mod:`tilecraft.runtime.executor`) run them;
here it is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol, overload

from ..config import deep_recursion
from ..errors import BuildError
from ..ir import IRModule, PrimFunc, verify
from ..target import Target, as_target
from .arguments import ArgumentTypeError
from .backend import backend_of
from .cuda import CUDAModule
from .emulate import EmulateArg, EmulatedModule, emulate_mode
from .module import Module, TimingResult


class Library(Protocol):
    """What :func:`build` returns for a module: named callables and the generated source.

    :class:`Module` (CPU), :class:`~tilecraft.runtime.CUDAModule` and the graph executor's
    :class:`~tilecraft.runtime.executor.Executable` (``tc.build`` of a module holding graph
    functions) all provide it.
    """

    @property
    def source(self) -> str:
        """The generated source text."""
        ...

    def __getitem__(self, name: str) -> Callable[..., Any]:
        """The function ``name``; call it with the arguments in parameter order."""
        ...

    def __contains__(self, name: object) -> bool:
        """True when the library has a function ``name``."""
        ...

    def time_evaluator(
        self, name: str, number: int = 10, repeat: int = 5, min_repeat_ms: float = 0
    ) -> Callable[..., TimingResult]:
        """``evaluator(*args) -> TimingResult``: seconds per call of function ``name``."""
        ...


@overload
def build(
    func_or_module: PrimFunc,
    target: Literal["cpu"] = "cpu",
    *,
    emulate: EmulateArg = False,
    bounds_check: bool = False,
) -> Module: ...


@overload
def build(
    func_or_module: PrimFunc,
    target: Target | str | None = "cpu",
    *,
    emulate: EmulateArg = False,
    bounds_check: bool = False,
) -> Module | CUDAModule | EmulatedModule: ...


@overload
def build(
    func_or_module: IRModule,
    target: Target | str | None = "cpu",
    *,
    emulate: EmulateArg = False,
    bounds_check: bool = False,
) -> Library: ...


@deep_recursion
def build(
    func_or_module: PrimFunc | IRModule,
    target: Target | str | None = "cpu",
    *,
    emulate: EmulateArg = False,
    bounds_check: bool = False,
) -> Module | CUDAModule | EmulatedModule | Library:
    """Compile a PrimFunc (exposed as its own name) or the PrimFuncs of a module.

    Parameters
    ----------
    func_or_module
        Scheduled or unscheduled functions; they are lowered here.
    target
        ``"cpu"`` (default) or a :class:`~tilecraft.target.Target`.
    emulate
        For a CUDA target, run the GPU schedule on the CPU instead of the GPU (no GPU needed):
        ``True`` runs the GPU-lowered program (the kernels and launches the CUDA backend would
        run) with real thread semantics — per-thread local storage, threads of a block
        advancing phase by phase between barriers, emulated warp shuffles;
        ``"racecheck"`` also raises :class:`~tilecraft.errors.RaceCheckError` on a
        shared-memory race within a barrier phase, a read of uninitialized shared or local
        memory, or an out-of-bounds access; ``"serial"`` runs thread-bound loops as serial
        loops (quick; proves only the schedule's serial meaning). ``False``: a CUDA target
        compiles with NVRTC (or nvcc) and runs on the GPU. On a CPU target ``True`` means
        ``"serial"`` (see :mod:`tilecraft.runtime.emulate`).
    bounds_check
        Check every buffer access at run time (CPU and emulated builds): an
        out-of-range access is skipped and the call raises
        :class:`~tilecraft.runtime.BoundsCheckError` naming the function, the buffer, the
        index values and the extents, instead of reading or writing past an array. Slow; for
        debugging. Not available for CUDA builds that run on the GPU: check the schedule
        with ``emulate=True``.

    Returns
    -------
    Module, CUDAModule or Library
        ``lib[name](*args)`` runs a function (outputs are arguments too, written in place);
        ``lib.source`` is the generated C (or CUDA).

    Raises
    ------
    IRError
        When a PrimFunc fails :func:`tilecraft.ir.verify` (checked before anything is lowered).
    BuildError
        When the target is unsupported or the C compiler fails (command and stderr attached),
        and for a module holding graph functions (build it with ``tc.build``).
    """
    tgt = as_target(target)
    emulate_mode(emulate)
    if not isinstance(bounds_check, bool):
        raise ArgumentTypeError("build: bounds_check must be True or False")
    if isinstance(func_or_module, IRModule):
        _refuse_graph_functions(func_or_module)
    if isinstance(func_or_module, PrimFunc | IRModule):
        verify(func_or_module)  # malformed IR stops here, not as a C error or a bad write
    backend = backend_of(tgt, emulate, bounds_check=bounds_check)
    return backend.build(func_or_module, tgt)  # type: ignore[no-any-return]


def _refuse_graph_functions(mod: IRModule) -> None:
    """Raise when ``mod`` holds functions other than PrimFuncs (graph functions)."""
    others = [n for n, f in mod.items() if not isinstance(f, PrimFunc)]
    if others:
        raise BuildError(
            f"runtime.build: the module holds graph functions ({', '.join(others)}), which "
            "the runtime builds only through the graph layer; call tc.build (or "
            "tc.graph.build_graph_module)"
        )
