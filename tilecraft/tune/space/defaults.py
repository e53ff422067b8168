"""The default search rules of each target."""

from __future__ import annotations

from ...runtime.backend import backend_of
from ...target import Target
from .add_rfactor import AddRFactor
from .auto_bind import AutoBind
from .auto_inline import AutoInline
from .cross_thread_reduction import CrossThreadReduction
from .gpu_tiling import MultiLevelTilingGPU
from .multi_level_tiling import CPU_STRUCTURE, MultiLevelTiling
from .parallel_vectorize_unroll import ParallelVectorizeUnroll
from .random_compute_location import RandomComputeLocation
from .rule import SearchRule

GPU_UNROLL_STEPS = (0, 16, 64, 512, 1024)
"""Unroll step budgets a GPU sample may draw."""


def cpu_search_rules() -> list[SearchRule]:
    """Auto-inline, rfactor, ``"SSRSRS"`` tiling with write cache and packing,
    parallel-vectorize-unroll and random compute location, in that order."""
    return [
        AutoInline(),
        AddRFactor(),
        MultiLevelTiling(CPU_STRUCTURE),
        ParallelVectorizeUnroll(),
        RandomComputeLocation(),
    ]


def gpu_search_rules() -> list[SearchRule]:
    """Auto-inline, cross-thread reduction, ``"SSSRRSRS"`` tiling with thread binding, shared
    read caches and a local write cache, a sampled unroll budget, and auto-bind (on the root,
    for every block still unbound), in that order."""
    return [
        AutoInline(),
        CrossThreadReduction(),
        MultiLevelTilingGPU(),
        ParallelVectorizeUnroll(jobs_per_core=(), unroll_steps=GPU_UNROLL_STEPS, max_vectorize=0),
        AutoBind(),
    ]


def default_search_rules(target: Target) -> list[SearchRule]:
    """The search rules of ``target``: :func:`gpu_search_rules` for a GPU target, else
    :func:`cpu_search_rules`."""
    if backend_of(target).needs_gpu_schedule:
        return gpu_search_rules()
    return cpu_search_rules()
