"""The lowering pipeline: from a (scheduled) PrimFunc with blocks to flat loops for codegen.

:func:`lower` runs the passes of :func:`get_pipeline` as one
:class:`~tilecraft.ir.transform.Sequential` named ``"lower"`` under the current
:class:`~tilecraft.ir.transform.PassContext`, so its instruments (timing, IR dumps,
verification) see every lowering pass.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import overload

from ..config import deep_recursion
from ..errors import LowerError
from ..ir import IRModule, PrimFunc
from ..ir.transform import FunctionPass, PassContext, PassHook, PrimFuncHooks, Sequential
from ..target import Target, as_target
from .bounds_check import InsertBoundsChecks
from .collect_storage_align import CollectStorageAlign
from .compact_buffer import CompactBufferAllocation
from .convert_blocks_to_loops import ConvertBlocksToLoops
from .expand_warp_tiles import ExpandWarpTiles
from .expose_shape_vars import ExposeShapeVars
from .flatten_buffer import FlattenBuffer
from .hoist_invariant_guards import HoistInvariantGuards
from .lower_init_block import LowerInitBlock
from .lower_thread_bindings import LowerThreadBindings
from .parallel_grain import ParallelGrain
from .plan_allocations import PlanAllocations
from .share_output_storage import ShareOutputStorage
from .simplify import Simplify
from .unroll_loops import UnrollLoops

LOWERED_ATTR = "tc.lowered"
"""Function attribute set on the output of :func:`lower`."""


def cpu_pipeline(*, emulate_gpu: bool = False, bounds_check: bool = False) -> list[FunctionPass]:
    """The passes that lower a function for the C emitter, in order.

    Parameters
    ----------
    emulate_gpu
        Lower thread-bound loops to serial loops (a GPU schedule run serially on the CPU);
        without it they are rejected with :class:`~tilecraft.errors.LowerError`.
    bounds_check
        Check every buffer access at run time: the checks go in before flattening, while
        buffers keep their logical shapes
        (:class:`~tilecraft.lower.bounds_check.InsertBoundsChecks`).
    """
    return [
        # a warp tile op (tensorized mma/WMMA) runs on the CPU by its serial meaning
        ExpandWarpTiles(),
        CollectStorageAlign(),
        LowerInitBlock(),
        PlanAllocations(shared_at_threads=True),
        ConvertBlocksToLoops(),
        LowerThreadBindings(emulate_gpu),
        # a guard reading outer loops only tests once per tile, not in the vector loop
        *([] if emulate_gpu else [HoistInvariantGuards()]),
        CompactBufferAllocation(),
        # a serial GPU emulation keeps every buffer the schedule declares
        *([] if emulate_gpu else [ShareOutputStorage()]),
        UnrollLoops(roll=emulate_gpu),
        ExposeShapeVars(),
        *([InsertBoundsChecks()] if bounds_check else []),
        FlattenBuffer(),
        Simplify(),
        # last: it weighs the loops as the emitter will see them
        ParallelGrain(),
    ]


def get_pipeline(
    target: Target | str | None = None, *, emulate_gpu: bool = False
) -> list[FunctionPass]:
    """The passes :func:`lower` runs, in order: :func:`cpu_pipeline`.

    Parameters
    ----------
    target
        The target (checked; default: the current target, else the CPU). Which pipeline a
        target's code goes through is its backend's decision:
        ``tilecraft.runtime.backend_of(target).pipeline(target)`` gives this list for the CPU
        and for the serial GPU emulation, and
        :func:`~tilecraft.lower.gpu_pipeline.get_gpu_pipeline` for CUDA.
    emulate_gpu
        Lower thread-bound loops to serial loops (GPU emulation on the CPU).
    """
    as_target(target)
    return cpu_pipeline(emulate_gpu=emulate_gpu)


@overload
def lower(
    func: PrimFunc,
    target: Target | str | None = None,
    *,
    emulate_gpu: bool = False,
    hooks: Sequence[PassHook] = (),
) -> PrimFunc: ...


@overload
def lower(
    func: IRModule,
    target: Target | str | None = None,
    *,
    emulate_gpu: bool = False,
    hooks: Sequence[PassHook] = (),
) -> IRModule: ...


@deep_recursion
def lower(
    func: PrimFunc | IRModule,
    target: Target | str | None = None,
    *,
    emulate_gpu: bool = False,
    hooks: Sequence[PassHook] = (),
) -> PrimFunc | IRModule:
    """Lower a PrimFunc (or every PrimFunc of a module) to flat loops ready for codegen.

    Parameters
    ----------
    func
        A PrimFunc with or without blocks, scheduled or not; or an IRModule.
    target
        The target (default: the current target, else the CPU).
    emulate_gpu
        Run thread-bound loops as serial loops; without it a CPU target rejects them with
        :class:`~tilecraft.errors.LowerError`.
    hooks
        ``hook(pass_name, before, after)`` callbacks run after each lowering pass, for each
        function (through a :class:`~tilecraft.ir.transform.PrimFuncHooks` instrument added
        to the current pass context). For IR dumps prefer
        ``with PassContext(instruments=[DumpIR(directory)]):``.

    Returns
    -------
    PrimFunc or IRModule
        Functions without blocks whose buffers are one-dimensional, with the symbolic shape
        variables appended to the parameters and the attribute ``tc.lowered`` set.
    """
    seq = Sequential(get_pipeline(target, emulate_gpu=emulate_gpu), name="lower")
    scope = (
        PassContext.current().extend([PrimFuncHooks(hooks)]) if hooks else contextlib.nullcontext()
    )
    with scope:
        if isinstance(func, PrimFunc):
            if func.attrs.get(LOWERED_ATTR):
                return func
            return seq(func).with_attr(LOWERED_ATTR, True)
        if isinstance(func, IRModule):
            return _lower_module(seq, func)
    raise LowerError(f"lower: expected a PrimFunc or IRModule, got {type(func).__name__}")


def _lower_module(seq: Sequential, mod: IRModule) -> IRModule:
    """Lower the PrimFuncs of ``mod`` not lowered yet, in one run of ``seq``."""
    todo = {n: f for n, f in mod.prim_funcs() if not f.attrs.get(LOWERED_ATTR)}
    if not todo:
        return mod
    low = seq(IRModule(todo))
    funcs = dict(mod.functions)
    for name in todo:
        out = low[name]
        assert isinstance(out, PrimFunc)
        funcs[name] = out.with_attr(LOWERED_ATTR, True)
    return IRModule(funcs, mod.attrs)
