"""RewriteReductionBlock: take the init of every reduction block out of its reduction loops.

Before: a leaf block with an ``init`` runs it under a test of its reduction loops (first
iteration), inside the innermost loops.
After: the init is its own block before the outermost loop that binds a reduction iterator
of the block (``decompose_reduction``), so the reduction loops hold only the update. A
block where that is not allowed keeps its init (meaning never changes), and so does a block
reduced across GPU threads (a reduction loop bound to ``threadIdx``), whose lowering
combines the threads' partials with the init.
"""

from __future__ import annotations

from ...ir import Block, BlockRealize, For
from ...schedule import BlockRV, Schedule
from .base import Postproc
from .rewrite_parallel_vectorize_unroll import leaves, reduce_vars


class RewriteReductionBlock(Postproc):
    """Decompose the init of every reduction leaf block (module docstring)."""

    name = "rewrite_reduction_block"

    def apply(self, sch: Schedule) -> bool:
        """Decompose what can be; always True."""
        body = sch.func.body
        if not isinstance(body, BlockRealize):
            return True
        for leaf in leaves(sch, sch.get_block(body.block.name)):
            node = sch.get(leaf)
            if not isinstance(node, Block) or node.init is None:
                continue
            reduce = reduce_vars(sch, leaf)
            if _across_threads(sch, leaf, reduce):
                continue  # the cross-thread lowering needs the init in the block
            for loop in sch.get_loops(leaf):
                if id(getattr(sch.get(loop), "loop_var", None)) in reduce:
                    sch.try_(sch.decompose_reduction, leaf, loop)
                    break
        return True


def _across_threads(sch: Schedule, block: BlockRV, reduce: set[int]) -> bool:
    """True when a loop binding a reduction iterator of ``block`` is thread-bound."""
    for loop in sch.get_loops(block):
        node = sch.get(loop)
        if isinstance(node, For) and node.thread is not None and id(node.loop_var) in reduce:
            return True
    return False
