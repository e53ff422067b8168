"""The default search rules of each target."""

from __future__ import annotations

from ...errors import TuneError
from ...runtime.backend import backend_of
from ...target import Target
from .add_rfactor import AddRFactor
from .auto_inline import AutoInline
from .multi_level_tiling import CPU_STRUCTURE, MultiLevelTiling
from .parallel_vectorize_unroll import ParallelVectorizeUnroll
from .random_compute_location import RandomComputeLocation
from .rule import SearchRule


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


def default_search_rules(target: Target) -> list[SearchRule]:
    """The search rules of ``target`` (TuneError for a GPU target: none yet)."""
    if backend_of(target).needs_gpu_schedule:
        raise TuneError(
            f"no default design space (search rules) for {target} yet; pass space= (a schedule "
            "function or "
            "a rule applied with tunable=True)"
        )
    return cpu_search_rules()
