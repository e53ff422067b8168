"""The GPU lowering pipeline: a scheduled PrimFunc to kernels ready for CUDA codegen.

Order (:func:`get_gpu_pipeline`, one literal list): cross-thread reductions are rewritten while
blocks still say which iterators reduce; blocks become loops with the thread bindings kept;
buffers are compacted per thread block, flattened with :class:`CompactThreadDims` before;
then vector-access decisions and barrier insertion on flat code; then (:func:`lower_gpu`) the
host/device split and the resource check.
"""

from __future__ import annotations

from ..ir import PrimFunc
from ..ir.transform import FunctionPass, Sequential
from ..target import Target, as_target
from .collect_storage_align import CollectStorageAlign
from .compact_buffer import CompactBufferAllocation
from .convert_blocks_to_loops import ConvertBlocksToLoops
from .expose_shape_vars import ExposeShapeVars
from .flatten_buffer import FlattenBuffer
from .gpu_check_local import CheckLocalPrivate
from .gpu_compact_thread_dims import CompactThreadDims
from .gpu_cross_thread_reduction import LowerCrossThreadReduction
from .gpu_split_host_device import GPUProgram, split_host_device
from .gpu_thread_loops import HoistSharedAllocations, LowerVirtualThreads
from .gpu_thread_sync import InsertThreadSync
from .gpu_vectorize import VectorizeGPULoops
from .gpu_verify import verify_program
from .lower_init_block import LowerInitBlock
from .lower_warp_fragments import CompactTensorCoreBuffers, LowerWarpFragments
from .pipeline import LOWERED_ATTR
from .plan_allocations import PlanAllocations
from .simplify import Simplify
from .software_pipeline import InjectSoftwarePipeline
from .unroll_loops import UnrollLoops


def get_gpu_pipeline(target: Target | str | None = None) -> list[FunctionPass]:
    """The passes :func:`lower_gpu_function` runs for the CUDA ``target``, in order.

    Alignment requests are collected first (the cross-thread reduction rewrite replaces
    blocks); buffers are compacted with their thread loops still bound (a shared buffer's box
    covers its thread block, a local one's one thread; see :class:`CompactBufferAllocation`),
    then shared allocations move above the thread loops and ``vthread`` loops are injected
    (pushed down to the statements depending on them); warp fragments get per-lane storage
    while buffers keep their shapes.
    """
    tgt = as_target(target) if target is not None else (Target.current() or Target("cuda"))
    return [
        CollectStorageAlign(),
        LowerCrossThreadReduction(tgt),
        LowerInitBlock(),
        PlanAllocations(shared_at_threads=False),
        ConvertBlocksToLoops(),
        LowerWarpFragments(),
        CompactTensorCoreBuffers(),
        InjectSoftwarePipeline(tgt.compute_capability >= 80),
        CheckLocalPrivate(),
        CompactBufferAllocation(keep_shared_pitch=True),
        HoistSharedAllocations(),
        LowerVirtualThreads(),
        UnrollLoops(roll=False),
        ExposeShapeVars(),
        CompactThreadDims(),
        FlattenBuffer(),
        Simplify(),
        VectorizeGPULoops(),
        InsertThreadSync(),
    ]


def lower_gpu_function(func: PrimFunc, target: Target | str | None = None) -> PrimFunc:
    """Lower ``func`` for a CUDA target to flat code with barriers (no host/device split).

    The passes of :func:`get_gpu_pipeline` run as one Sequential named ``"lower_gpu"`` under
    the current pass context.
    """
    if func.attrs.get(LOWERED_ATTR):
        return func
    seq = Sequential(get_gpu_pipeline(target), name="lower_gpu")
    return seq(func).with_attr(LOWERED_ATTR, True)


def lower_gpu(func: PrimFunc, target: Target | str | None = None) -> GPUProgram:
    """Lower, split and verify ``func`` for a CUDA target.

    Raises
    ------
    LowerError
        When the schedule cannot run on a GPU or a kernel exceeds the target's limits.
    """
    tgt = as_target(target) if target is not None else (Target.current() or Target("cuda"))
    program = split_host_device(lower_gpu_function(func, tgt))
    verify_program(program, tgt)
    return program
