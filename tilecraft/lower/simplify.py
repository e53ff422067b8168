"""Simplify every expression of a function with :class:`tilecraft.arith.Analyzer`.

Before: any statement tree.
After:  the same tree, each maximal expression (loop bounds, indices, stored values,
conditions) replaced by its simplified form; loop variables are bound to their
ranges so index arithmetic can use them. Meaning is unchanged.
"""

from __future__ import annotations

from ..arith import Analyzer
from ..ir import Buffer, Expr, For, IntImm, Mutator, PrimFunc, Range
from ..ir.transform import FunctionPass


class _Simplifier(Mutator):
    def __init__(self) -> None:
        super().__init__()
        self.ana = Analyzer()
        self.bound: dict[int, tuple[object, object]] = {}

    def visit(self, node: object) -> object:
        if isinstance(node, Expr):
            return self.ana.simplify(node)
        return super().visit(node)

    def visit_Buffer(self, buf: Buffer) -> Buffer:  # noqa: N802
        # buffers keep their identity: loads inside simplified expressions still refer to them
        return buf

    def visit_For(self, loop: For) -> For:  # noqa: N802
        lo, ext = self.visit(loop.min), self.visit(loop.extent)
        self._bind(loop, lo, ext)
        return loop.update(min=lo, extent=ext, body=self.visit(loop.body))

    def _bind(self, loop: For, lo: object, ext: object) -> None:
        bind = getattr(self.ana, "bind", None)
        key = id(loop.loop_var)
        if bind is None or not isinstance(lo, Expr) or not isinstance(ext, Expr):
            return
        if key in self.bound:
            old_lo, old_ext = self.bound[key]
            same = (
                isinstance(old_lo, IntImm) and isinstance(lo, IntImm)
                and isinstance(old_ext, IntImm) and isinstance(ext, IntImm)
                and (old_lo.value, old_ext.value) == (lo.value, ext.value)
            )  # fmt: skip
            if not same:  # a reused loop variable with another range: start a fresh analyzer
                self.ana = Analyzer()
                self.bound = {}
            else:
                return
        self.bound[key] = (lo, ext)
        bind(loop.loop_var, Range(lo, ext))


class Simplify(FunctionPass):
    """Simplify the expressions of ``func``."""

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Return ``func`` with simplified expressions."""
        return func.update(body=_Simplifier().visit(func.body))
