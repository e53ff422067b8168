"""Move the parts of a loop body's guard that do not depend on the loop above the loop.

Before: blocks lowered to loops; a block predicate is an ``IfThenElse`` around the block's
body, inside its innermost loop, even where the condition reads outer loops only (a
``Schedule.guard`` on a tile's key block, a split guard of an outer loop).
After:  for every non-thread-bound loop whose whole body is an ``if`` without ``else``, the
conjuncts of the condition that neither use the loop variable nor read memory guard the loop
instead; applied from the inside out, such a conjunct rises to the outermost loop it does not
depend on::

    for d in range(64):                          if c * 32 <= q * 16 + 15:
        for r in range(8):                           for d in range(64):
            for k in T.vectorized(32):      ->           for r in range(8):
                if c * 32 <= q * 16 + 15:                    for k in T.vectorized(32):
                    S[r, k] += ...                               S[r, k] += ...

Meaning is unchanged (the condition is pure and has the same value at every iteration), and
the C compiler sees a vectorized loop with no branch in it.
"""

from __future__ import annotations

from ..ir import (
    And,
    BufferLoad,
    Expr,
    For,
    ForKind,
    IfThenElse,
    Mutator,
    PrimFunc,
    Stmt,
    uses_var,
    walk,
)
from ..ir.transform import FunctionPass


def _conjuncts(e: Expr) -> list[Expr]:
    """``a and b and c`` as ``[a, b, c]``."""
    if isinstance(e, And):
        return [*_conjuncts(e.a), *_conjuncts(e.b)]
    return [e]


def _all(parts: list[Expr]) -> Expr:
    out = parts[0]
    for p in parts[1:]:
        out = And(out, p)
    return out


def _reads_memory(e: Expr) -> bool:
    return any(isinstance(n, BufferLoad) for n in walk(e))


class _Hoister(Mutator):
    def visit_For(self, loop: For) -> Stmt:  # noqa: N802
        new = self.generic_visit(loop)
        assert isinstance(new, For)
        body = new.body
        if (
            new.kind is ForKind.THREAD_BINDING
            or not isinstance(body, IfThenElse)
            or body.else_case is not None
        ):
            return new
        parts = _conjuncts(body.condition)
        out = [p for p in parts if not uses_var(p, new.loop_var) and not _reads_memory(p)]
        if not out:
            return new
        stay = [p for p in parts if all(p is not q for q in out)]
        inner = body.then_case if not stay else body.update(condition=_all(stay))
        return IfThenElse(_all(out), new.update(body=inner))


class HoistInvariantGuards(FunctionPass):
    """Guard a loop with the conjuncts of its body's guard that do not vary in it (module
    docstring)."""

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Return ``func`` with loop-invariant guards hoisted."""
        return func.update(body=_Hoister().visit(func.body))
