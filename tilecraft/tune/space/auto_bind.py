"""AutoBind: give every GPU block that no other rule bound a sampled number of threads."""

from __future__ import annotations

from collections.abc import Sequence

from ...ir import For, IntImm
from ...schedule import Schedule
from ...schedule.handles import BlockRV
from ...target import Target
from ..postproc.rewrite_parallel_vectorize_unroll import leaves
from ..postproc.rewrite_unbound_block import unbound_spatial_loops
from .rule import SearchRule, is_root

THREAD_CHOICES = (32, 64, 128, 256, 512, 1024)
"""Threads per block a sample may draw (those above the target's limit are left out)."""


class AutoBind(SearchRule):
    """On the root block (visited last, once the other rules placed their blocks): every leaf
    block with no thread-bound loop around it (an elementwise kernel, an epilogue, a
    reduction no other rule took) gets its outer run of spatial loops fused and split by a
    sampled number of threads (``sample_categorical``; :class:`MutateThreadBinding` changes
    it), the outer part bound to ``blockIdx.x``, the inner to ``threadIdx.x``. Extents
    smaller than the sample use that many threads.

    Parameters
    ----------
    thread_choices
        Threads per block a sample may draw.
    """

    name = "auto_bind"

    def __init__(self, thread_choices: Sequence[int] = THREAD_CHOICES) -> None:
        self.thread_choices = list(thread_choices)

    def apply(self, sch: Schedule, block: BlockRV, target: Target) -> list[Schedule]:
        """``[sch]`` with the unbound blocks bound (blocks other than the root: unchanged)."""
        if not is_root(sch, block):
            return [sch]
        limit = target.gpu.max_threads_per_block if target.gpu is not None else 1024
        choices = [t for t in self.thread_choices if t <= limit] or [limit]
        for leaf in leaves(sch, block):
            sch.try_(self._bind, sch, leaf, choices)
        return [sch]

    @staticmethod
    def _bind(sch: Schedule, block: BlockRV, choices: list[int]) -> None:
        run = unbound_spatial_loops(sch, block)
        if not run:
            return
        fused = run[0] if len(run) == 1 else sch.fuse(*run)
        node = sch.get(fused)
        extent = (
            node.extent.value if isinstance(node, For) and isinstance(node.extent, IntImm) else 1
        )
        fits = [t for t in choices if t < extent] + [min(extent, max(choices))]
        fits = sorted(set(fits))
        threads = sch.sample_categorical(fits, [1 / len(fits)] * len(fits))
        outer, inner = sch.split(fused, [None, threads])
        sch.bind(outer, "blockIdx.x")
        sch.bind(inner, "threadIdx.x")
