"""AddRFactor: split a long reduction with little spatial work into parallel partial sums."""

from __future__ import annotations

from ...ir import IterKind
from ...schedule import BlockRV, Schedule
from ...target import Target
from .rule import SearchRule, block_of, extent_product, is_reduction, is_root, simple_loops

JOBS_PER_CORE = 16
"""A block with fewer spatial iterations than this many per core is a candidate."""


class AddRFactor(SearchRule):
    """Fork the space for a reduction whose spatial extent is small (below ``cores x
    jobs_per_core``) and whose reduction is longer than it (a row sum, a dot product, a
    GEMV's few outputs): besides the unchanged block, two sketches fuse its reduction loops,
    split them by ``sample_perfect_tile`` and ``rfactor`` the outer or the inner part, so the
    partial sums are spatial loops the other rules can parallelize and vectorize.

    Parameters
    ----------
    jobs_per_core
        See :data:`JOBS_PER_CORE`.
    max_innermost_factor
        Largest inner part of the split.
    """

    name = "add_rfactor"

    def __init__(self, jobs_per_core: int = JOBS_PER_CORE, max_innermost_factor: int = 64) -> None:
        self.jobs_per_core = jobs_per_core
        self.max_innermost_factor = max_innermost_factor

    def applies(self, sch: Schedule, block: BlockRV, target: Target) -> bool:
        """A simply nested reduction, spatial extent small, reduction extent larger."""
        if is_root(sch, block) or not is_reduction(block_of(sch, block)):
            return False
        loops = simple_loops(sch, block)
        if loops is None:
            return False
        ivs = block_of(sch, block).iter_vars
        kinds = [iv.kind for iv in ivs]
        if kinds != sorted(kinds, key=lambda k: k is IterKind.REDUCE):
            return False  # reduction loops not innermost
        pairs = list(zip(loops, kinds, strict=True))
        spatial = extent_product(sch, [lp for lp, k in pairs if k is IterKind.SPATIAL])
        reduce = extent_product(sch, [lp for lp, k in pairs if k is IterKind.REDUCE])
        limit = max(target.num_cores, 1) * self.jobs_per_core
        return spatial < limit and reduce > spatial and reduce > 1

    def apply(self, sch: Schedule, block: BlockRV, target: Target) -> list[Schedule]:
        """``[sch]`` and, when it applies, the two rfactored sketches."""
        if not self.applies(sch, block, target):
            return [sch]
        out = [sch]
        for part in (0, 1):
            fork = sch.copy()
            if fork.try_(self._rfactor, fork, fork.get_block(block.name), part):
                out.append(fork)
        return out

    def _rfactor(self, sch: Schedule, block: BlockRV, part: int) -> None:
        loops = sch.get_loops(block)
        kinds = [iv.kind for iv in block_of(sch, block).iter_vars]
        reduce = [lp for lp, k in zip(loops, kinds, strict=True) if k is IterKind.REDUCE]
        fused = sch.fuse(*reduce) if len(reduce) > 1 else reduce[0]
        factors = sch.sample_perfect_tile(fused, 2, self.max_innermost_factor)
        parts = sch.split(fused, factors)
        sch.rfactor(parts[part], 0)
