"""Lower block ``init`` statements into guarded statements of the block body.

Before: blocks may carry ``init`` (run before the first reduction step).
After:  no block has ``init``; a block whose reduce iterators are ``vk1..vkn`` has the body
``if vk1 == min1 and ... and vkn == minn: init`` followed by the old body. The condition is
written on the block's iterators, so it becomes a condition on their bound values once blocks
are lowered to loops. A block with an init but no reduce iterator runs its init unconditionally.
"""

from __future__ import annotations

from ..ir import Block, Expr, IfThenElse, IterKind, Mutator, PrimFunc, seq
from ..ir.transform import FunctionPass


def _init_condition(block: Block) -> Expr | None:
    cond: Expr | None = None
    for iv in block.iter_vars:
        if iv.kind is IterKind.REDUCE:
            term = iv.var.eq(iv.dom.min)
            cond = term if cond is None else cond & term
    return cond


class _InitLowerer(Mutator):
    def visit_Block(self, block: Block) -> Block:  # noqa: N802
        block = self.generic_visit(block)
        if block.init is None:
            return block
        cond = _init_condition(block)
        init = block.init if cond is None else IfThenElse(cond, block.init)
        return block.update(body=seq(init, block.body), init=None)


class LowerInitBlock(FunctionPass):
    """Move every block's ``init`` into its body under a "first reduction step" guard."""

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Lower the inits of ``func``'s blocks."""
        return func.update(body=_InitLowerer().visit(func.body))
