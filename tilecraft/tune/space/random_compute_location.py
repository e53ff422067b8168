"""RandomComputeLocation: place a block that no other rule scheduled at a sampled loop."""

from __future__ import annotations

from ...ir import BlockRealize
from ...schedule import BlockRV, Schedule
from ...target import Target
from ..postproc.keys import TILING
from .rule import SearchRule, block_of, is_root, writes_output


class RandomComputeLocation(SearchRule):
    """Move a block under one of its consumers' loops, keep it at the root, or inline it:
    ``sample_compute_location`` draws the place (:class:`MutateComputeLocation` moves it),
    ``compute_at`` puts it there. Applies to a block directly under the root that writes an
    intermediate, is not tiled, and has consumers (a softmax's row max and row sum computed
    per row of the normalisation, a padding computed per tile of a conv).
    """

    name = "random_compute_location"

    def applies(self, sch: Schedule, block: BlockRV) -> bool:
        """An untiled intermediate block at the root's level with consumers."""
        if is_root(sch, block) or writes_output(sch, block):
            return False
        if TILING in block_of(sch, block).annotations:
            return False
        body = sch.func.body
        assert isinstance(body, BlockRealize)
        parents = sch.get_child_blocks(sch.get_block(body.block.name))
        if all(p.name != block.name for p in parents):
            return False
        return bool(sch.get_consumers(block))

    def apply(self, sch: Schedule, block: BlockRV, target: Target) -> list[Schedule]:
        """``[sch]`` with the block placed at a sampled location."""
        del target
        if not self.applies(sch, block):
            return [sch]

        def place() -> None:
            loop = sch.sample_compute_location(block)
            sch.compute_at(block, loop)

        sch.try_(place)
        return [sch]
