"""``tilecraft.build``: lower, generate C, compile (cached) and load a PrimFunc or IRModule."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..codegen import build_c_source
from ..errors import BuildError
from ..ir import IRModule, PrimFunc
from ..target import Target, as_target
from .compiler import compile_shared
from .cuda import build_cuda
from .module import Module

BuilderPredicate = Callable[[Any, Target, bool], bool]
Builder = Callable[..., Any]
_BUILDERS: list[tuple[BuilderPredicate, Builder]] = []


def register_builder(predicate: BuilderPredicate, builder: Builder) -> None:
    """Let a higher layer build what it defines (e.g. modules holding graph functions).

    ``build`` asks each registered ``predicate(func_or_module, target, emulate)`` in turn and
    hands the first match to ``builder(func_or_module, target, emulate=emulate)``. This keeps
    the runtime free of imports from layers above it.
    """
    _BUILDERS.append((predicate, builder))


def build(
    func_or_module: PrimFunc | IRModule,
    target: Target | str | None = "cpu",
    *,
    emulate: bool = False,
) -> Any:
    """Compile a PrimFunc (exposed as its own name) or the PrimFuncs of a module.

    Parameters
    ----------
    func_or_module
        Scheduled or unscheduled functions; they are lowered here.
    target
        ``"cpu"`` (default) or a :class:`~tilecraft.target.Target`.
    emulate
        For a CUDA target: run the GPU schedule on the CPU (thread-bound loops become serial).
        Without it a CUDA target compiles with NVRTC (or nvcc) and runs on the GPU.

    Returns
    -------
    Module
        ``lib[name](*args)`` runs a function; ``lib.source`` is the generated C.

    Raises
    ------
    BuildError
        When the target is unsupported or the C compiler fails (command and stderr attached).
    """
    tgt = as_target(target)
    for predicate, builder in _BUILDERS:
        if predicate(func_or_module, tgt, emulate):
            return builder(func_or_module, tgt, emulate=emulate)
    if tgt.is_gpu and not emulate:
        return build_cuda(func_or_module, tgt)
    if isinstance(func_or_module, PrimFunc):
        originals = {func_or_module.name: func_or_module}
    elif isinstance(func_or_module, IRModule):
        originals = dict(func_or_module.prim_funcs())
        if not originals:
            raise BuildError("build: the module has no PrimFunc to compile")
    else:
        kind = type(func_or_module).__name__
        raise TypeError(f"build: expected a PrimFunc or IRModule, got {kind}")
    csrc = build_c_source(func_or_module, tgt, emulate_gpu=emulate)
    path = compile_shared(csrc.text)
    functions = {name: (originals[name], csrc.functions[name]) for name in csrc.functions}
    return Module(path, csrc.text, functions, csrc.symbols)
