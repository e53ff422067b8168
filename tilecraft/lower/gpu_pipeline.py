"""The GPU lowering pipeline: a scheduled PrimFunc to kernels ready for CUDA codegen.

Order: cross-thread reductions are rewritten while blocks still say which iterators reduce;
then the common pipeline (:func:`tilecraft.lower.get_pipeline`, which keeps thread bindings
for CUDA targets) with :class:`CompactThreadDims` before flattening; then vector-access
decisions and barrier insertion on flat code; then the host/device split and the resource
check.
"""

from __future__ import annotations

from ..ir import PrimFunc
from ..ir.transform import FunctionPass, Sequential
from ..target import Target, as_target
from .collect_storage_align import CollectStorageAlign
from .convert_blocks_to_loops import ConvertBlocksToLoops
from .flatten_buffer import FlattenBuffer
from .gpu_compact_thread_dims import CompactThreadDims
from .gpu_cross_thread_reduction import LowerCrossThreadReduction
from .gpu_split_host_device import GPUProgram, split_host_device
from .gpu_thread_sync import InsertThreadSync
from .gpu_vectorize import VectorizeGPULoops
from .gpu_verify import verify_program
from .lower_warp_fragments import CompactTensorCoreBuffers, LowerWarpFragments
from .pipeline import LOWERED_ATTR, get_pipeline
from .software_pipeline import InjectSoftwarePipeline


def gpu_passes_before(target: Target) -> list[FunctionPass]:
    """GPU passes that run on block-level IR, before the common pipeline.

    Alignment requests are collected first: the cross-thread reduction rewrite replaces blocks.
    """
    return [CollectStorageAlign(), LowerCrossThreadReduction(target)]


def gpu_passes_after(target: Target) -> list[FunctionPass]:
    """GPU passes that run on flat code, after the common pipeline."""
    return [VectorizeGPULoops(), InsertThreadSync()]


def get_gpu_pipeline(target: Target | str | None = None) -> list[FunctionPass]:
    """The passes :func:`lower_gpu_function` runs for the CUDA ``target``, in order."""
    tgt = as_target(target) if target is not None else (Target.current() or Target("cuda"))
    passes = get_pipeline(tgt)
    at = next((i for i, p in enumerate(passes) if isinstance(p, FlattenBuffer)), len(passes))
    passes[at:at] = [CompactThreadDims()]
    # warp fragments get per-lane storage while buffers keep their shapes (tensor cores)
    at = next(i for i, p in enumerate(passes) if isinstance(p, ConvertBlocksToLoops)) + 1
    async_copy = tgt.is_gpu and tgt.compute_capability >= 80
    passes[at:at] = [
        LowerWarpFragments(),
        CompactTensorCoreBuffers(),
        InjectSoftwarePipeline(async_copy),
    ]
    return [*gpu_passes_before(tgt), *passes, *gpu_passes_after(tgt)]


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
