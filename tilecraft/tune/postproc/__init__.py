"""Postprocessors: finish sampled candidates (write caches and packing, loop kinds from sampled
annotations, thread
bindings of unbound GPU blocks) and drop those that cannot run (dynamic loops, GPU code beyond
the device's limits)."""

from ...runtime.backend import backend_of
from ...target import Target, as_target
from . import keys as keys
from .base import Postproc as Postproc
from .base import apply_postprocs as apply_postprocs
from .checks import DisallowDynamicLoop as DisallowDynamicLoop
from .checks import DisallowRecomputedReduction as DisallowRecomputedReduction
from .checks import VerifyGPUCode as VerifyGPUCode
from .rewrite_cooperative_fetch import RewriteCooperativeFetch as RewriteCooperativeFetch
from .rewrite_parallel_vectorize_unroll import (
    RewriteParallelVectorizeUnroll as RewriteParallelVectorizeUnroll,
)
from .rewrite_reduction_block import RewriteReductionBlock as RewriteReductionBlock
from .rewrite_tiling_cache import RewriteTilingCache as RewriteTilingCache
from .rewrite_unbound_block import RewriteUnboundBlock as RewriteUnboundBlock
from .unroll_local_tiles import UnrollLocalTiles as UnrollLocalTiles


def default_postprocs(target: Target | str | None = None) -> list[Postproc]:
    """The postprocessors of ``target``, in order: drop dynamic loops, apply the sampled write
    caches and packing of tiled blocks, rewrite the sampled parallel / vectorize / unroll
    annotations, take reduction inits out of their loops, for CPUs drop reductions recomputed
    under a loop they do not depend on; for GPUs spread shared-memory copies over the
    threads, bind unbound blocks, unroll the loops indexing a thread's local tile (kept in
    registers) and drop code the GPU lowering refuses (threads, shared memory and registers
    beyond the target's limits)."""
    tgt = as_target(target)
    out: list[Postproc] = [
        DisallowDynamicLoop(),
        RewriteTilingCache(),
        RewriteParallelVectorizeUnroll(),
        RewriteReductionBlock(),
    ]
    if backend_of(tgt).needs_gpu_schedule:
        out += [
            RewriteCooperativeFetch(),
            RewriteUnboundBlock(tgt),
            UnrollLocalTiles(),
            VerifyGPUCode(tgt),
        ]
    else:  # GPU threads share a reduction across loops it does not index
        out.append(DisallowRecomputedReduction())
    return out
