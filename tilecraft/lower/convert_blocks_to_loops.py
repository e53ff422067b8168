"""Replace blocks by their bodies, with iterators substituted by their bound values.

Before: the body may hold ``BlockRealize``/``Block`` nodes (inits already lowered by
:class:`~tilecraft.lower.LowerInitBlock`; allocations ideally planned by
:class:`~tilecraft.lower.PlanAllocations`).
After:  no block remains. Each realize becomes its block's body with every iterator replaced by
its binding; a predicate other than ``True`` becomes an ``IfThenElse``; buffers still listed in
``alloc_buffers`` become ``Allocate`` nodes around the body (function-top placement when
allocation planning did not run).
"""

from __future__ import annotations

from ..errors import LowerError
from ..ir import (
    Allocate,
    BlockRealize,
    IfThenElse,
    IntImm,
    Mutator,
    PrimFunc,
    Stmt,
    substitute,
)
from ..ir.transform import FunctionPass


def _is_true(expr: object) -> bool:
    return isinstance(expr, IntImm) and expr.dtype.is_bool and expr.value == 1


class _BlockRemover(Mutator):
    def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:  # noqa: N802
        block = realize.block
        if block.init is not None:
            raise LowerError(
                f"ConvertBlocksToLoops: block {block.name!r} still has an init; run "
                "LowerInitBlock first"
            )
        body: Stmt = self.visit(block.body)
        pairs = zip(block.iter_vars, realize.iter_values, strict=True)
        vmap = {iv.var: value for iv, value in pairs}
        body = substitute(body, vmap)
        for buf in reversed(block.alloc_buffers):
            body = Allocate(buf, body)
        if not _is_true(realize.predicate):
            # the predicate lives in the enclosing scope: outer blocks substitute it later
            body = IfThenElse(realize.predicate, body)
        return body

    def visit_Block(self, block: object) -> Stmt:  # noqa: N802
        raise LowerError("ConvertBlocksToLoops: found a Block outside a BlockRealize")


class ConvertBlocksToLoops(FunctionPass):
    """Drop blocks, keeping their bodies with iterators bound to their values."""

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Remove every block of ``func``."""
        return func.update(body=_BlockRemover().visit(func.body))
