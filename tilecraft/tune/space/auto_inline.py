"""AutoInline: fold elementwise intermediate blocks into the blocks that use them."""

from __future__ import annotations

from ...schedule import BlockRV, Schedule
from ...target import Target
from .rule import SearchRule, block_of, is_root, is_spatial, writes_output


class AutoInline(SearchRule):
    """Inline a spatial block that writes an intermediate into its consumers
    (``compute_inline``); else, an output block with one spatial producer, into that producer
    (``reverse_compute_inline``). A reduction is never inlined: it is tiled or placed by the
    other rules. Nothing is sampled: inlining an elementwise step is always cheaper than
    storing and reloading it.
    """

    name = "auto_inline"

    def apply(self, sch: Schedule, block: BlockRV, target: Target) -> list[Schedule]:
        """``[sch]`` with ``block`` inlined when it can be."""
        del target
        if is_root(sch, block) or not is_spatial(block_of(sch, block)):
            return [sch]
        if not writes_output(sch, block) and sch.try_(sch.compute_inline, block):
            return [sch]
        producers = sch.get_producers(block)
        if len(producers) == 1 and is_spatial(block_of(sch, producers[0])):
            sch.try_(sch.reverse_compute_inline, block)
        return [sch]
