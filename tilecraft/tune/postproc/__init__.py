"""Postprocessors: finish sampled candidates (loop kinds from sampled annotations) and drop
those that cannot run (dynamic loops, GPU code beyond the device's limits)."""

from ...runtime.backend import backend_of
from ...target import Target, as_target
from . import keys as keys
from .base import Postproc as Postproc
from .base import apply_postprocs as apply_postprocs
from .checks import DisallowDynamicLoop as DisallowDynamicLoop
from .checks import VerifyGPUCode as VerifyGPUCode
from .rewrite_parallel_vectorize_unroll import (
    RewriteParallelVectorizeUnroll as RewriteParallelVectorizeUnroll,
)


def default_postprocs(target: Target | str | None = None) -> list[Postproc]:
    """The postprocessors of ``target``, in order: rewrite the sampled parallel / vectorize /
    unroll annotations, drop dynamic loops and, for GPUs, code the GPU lowering refuses."""
    tgt = as_target(target)
    out: list[Postproc] = [RewriteParallelVectorizeUnroll(), DisallowDynamicLoop()]
    if backend_of(tgt).needs_gpu_schedule:
        out.append(VerifyGPUCode(tgt))
    return out
