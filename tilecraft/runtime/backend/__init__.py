"""One backend object per target kind: the only place a target kind is decided.

:func:`backend_of` maps a target and an emulation mode to its backend:

* a CPU target -> :class:`CPUBackend` (``emulate=True``/``"serial"``: thread-bound loops run
  as serial loops; ``"racecheck"`` is refused: there is no GPU lowering to check);
* a CUDA target -> :class:`CUDABackend`; with ``emulate=True`` or ``"racecheck"``
  :class:`EmulatedCUDABackend` (the GPU-lowered program on the CPU); with ``"serial"``
  :class:`CPUBackend` with serial thread loops.

``tc.build``, the graph executor, ``tc.compile`` and the tuner's builder and runner all go
through it. Each backend lowers (its literal :meth:`~Backend.pipeline`), emits (code generation
only), compiles (one verified compile cache) and loads (an :class:`Artifact`, which carries
its lowered program, so loading lowers and emits nothing).
"""

from __future__ import annotations

from ...codegen.c import CSource
from ...codegen.cuda import CUDASource
from ...config import deep_recursion
from ...errors import BuildError, CodegenError
from ...ir import IRModule, PrimFunc
from ...target import Target, as_target
from ..arguments import ArgumentTypeError
from ..cuda import CUDAModule
from ..emulate import EmulateArg, EmulateMode, emulate_mode
from .base import Artifact as Artifact
from .base import Backend as Backend
from .base import Lowered as Lowered
from .base import Source as Source
from .base import originals_of as originals_of
from .cpu import CPUBackend as CPUBackend
from .cuda import CUDABackend as CUDABackend
from .emulated import EmulatedCUDABackend as EmulatedCUDABackend

_BACKENDS: dict[str, type[Backend]] = {
    CPUBackend.kind: CPUBackend,
    CUDABackend.kind: CUDABackend,
    EmulatedCUDABackend.kind: EmulatedCUDABackend,
}


def backend_of(
    target: Target | str | None = None,
    emulate: EmulateArg = False,
    *,
    bounds_check: bool = False,
) -> Backend:
    """The backend that builds for ``target`` under ``emulate`` (see the module docstring).

    Parameters
    ----------
    target
        A :class:`~tilecraft.target.Target` or its string (default: the current target, else
        the CPU).
    emulate
        ``False``, ``True``, ``"serial"`` or ``"racecheck"`` (see :func:`tilecraft.build`).
    bounds_check
        Check every buffer access at run time (CPU and emulated builds only).

    Raises
    ------
    BuildError
        For ``"racecheck"`` on a CPU target, and ``bounds_check`` for kernels that run on
        the GPU.
    """
    tgt = as_target(target)
    mode = emulate_mode(emulate)
    if not isinstance(bounds_check, bool):
        raise ArgumentTypeError("build: bounds_check must be True or False")
    if tgt.is_gpu and mode.truthful:
        return EmulatedCUDABackend(mode, bounds_check=bounds_check)
    if mode is EmulateMode.RACECHECK:
        raise BuildError(
            f"build: emulate='racecheck' runs the GPU-lowered program and needs a CUDA target, "
            f"got {tgt}; pass target=tc.Target('cuda')"
        )
    if tgt.is_gpu and mode is EmulateMode.OFF:
        if bounds_check:
            raise BuildError(
                f"build: bounds_check=True is not available for {tgt} builds that run on the "
                "GPU; check the schedule with tc.build(..., emulate=True, bounds_check=True)"
            )
        return CUDABackend()
    return CPUBackend(emulate_gpu=mode is not EmulateMode.OFF, bounds_check=bounds_check)


def backend_for_artifact(artifact: Artifact) -> Backend:
    """A backend that loads ``artifact`` (by the artifact's kind).

    Raises
    ------
    BuildError
        For an unknown kind.
    """
    cls = _BACKENDS.get(artifact.kind)
    if cls is None:
        raise BuildError(
            f"unknown artifact kind {artifact.kind!r}; expected one of {list(_BACKENDS)}"
        )
    if cls is EmulatedCUDABackend:
        mode = EmulateMode.RACECHECK if artifact.meta.get("racecheck") else EmulateMode.THREADS
        return EmulatedCUDABackend(mode, bounds_check=bool(artifact.meta.get("bounds_check")))
    return cls()


def load_artifact(artifact: Artifact) -> object:
    """The callable library of ``artifact`` (its backend's pure loader)."""
    return backend_for_artifact(artifact).load(artifact)


def emulation_target(target: Target | str | None = None) -> Target:
    """The CUDA target a GPU schedule is emulated for: ``target`` itself when it is one,
    else the default CUDA target."""
    tgt = as_target(target)
    return tgt if tgt.is_gpu else Target("cuda")


def _cuda_target(target: Target | str | None) -> Target:
    tgt = as_target(target) if target is not None else (Target.current() or Target("cuda"))
    if not tgt.is_gpu:
        raise CodegenError(f"CUDA codegen: target {tgt} is not a CUDA target")
    return tgt


@deep_recursion
def build_c_source(
    func_or_module: PrimFunc | IRModule,
    target: Target | str | None = None,
    *,
    emulate_gpu: bool = False,
    bounds_check: bool = False,
) -> CSource:
    """Lower (where needed, by the CPU backend) and emit C for a PrimFunc or a module's.

    Parameters
    ----------
    func_or_module
        The function(s) to emit; functions that still have blocks are lowered first.
    target
        A CPU target (default: the current target, else the CPU).
    emulate_gpu
        Lower thread-bound loops to serial loops (GPU emulation).
    bounds_check
        Check every buffer access at run time: an out-of-range one is skipped and recorded
        in the exported ``tc_bounds_error`` (see :mod:`tilecraft.runtime.bounds`).

    Returns
    -------
    CSource
        The C text and the lowered functions, by name (the ABI of each is its params).
    """
    tgt = as_target(target)
    if tgt.is_gpu and not emulate_gpu:
        raise CodegenError(
            f"C codegen: target {tgt} is a GPU; pass emulate_gpu=True (tc.build(..., "
            "emulate=True)) or generate CUDA"
        )
    backend = CPUBackend(emulate_gpu=emulate_gpu, bounds_check=bounds_check)
    code = backend.emit(backend.lower(func_or_module, tgt), tgt).code
    assert isinstance(code, CSource)
    return code


def c_source(
    func_or_module: PrimFunc | IRModule,
    target: Target | str | None = None,
    *,
    emulate_gpu: bool = False,
    bounds_check: bool = False,
) -> str:
    """C text for a PrimFunc or every PrimFunc of a module (see :func:`build_c_source`)."""
    return build_c_source(
        func_or_module, target, emulate_gpu=emulate_gpu, bounds_check=bounds_check
    ).text


@deep_recursion
def build_cuda_source(
    func_or_module: PrimFunc | IRModule, target: Target | str | None = None
) -> CUDASource:
    """Lower (by the CUDA backend) and emit CUDA for a PrimFunc or a module's PrimFuncs.

    ``target``: a CUDA target (default: the current target, else ``cuda -arch=sm_90``).
    """
    tgt = _cuda_target(target)
    backend = CUDABackend()
    code = backend.emit(backend.lower(func_or_module, tgt), tgt).code
    assert isinstance(code, CUDASource)
    return code


def cuda_source(func_or_module: PrimFunc | IRModule, target: Target | str | None = None) -> str:
    """CUDA text for a PrimFunc or every PrimFunc of a module (no GPU needed)."""
    return build_cuda_source(func_or_module, target).text


def build_cuda(
    func_or_module: PrimFunc | IRModule, target: Target | str | None = None
) -> CUDAModule:
    """Lower, emit and compile GPU function(s) for a CUDA target (no GPU needed to build).

    Raises
    ------
    LowerError, CodegenError, BuildError
        When lowering, emission or compilation fails.
    """
    tgt = _cuda_target(target)
    lib = CUDABackend().build(func_or_module, tgt)
    assert isinstance(lib, CUDAModule)
    return lib
