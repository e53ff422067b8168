"""Guard every buffer access with a run-time bounds check (``tc.build(..., bounds_check=True)``).

Before: blocks are gone (:class:`~tilecraft.lower.ConvertBlocksToLoops`), buffers still have
their logical (multi-dimensional) shapes, not yet flattened.
After:  every store ``B[i, j] = v`` becomes ::

    if 0 <= i < n0 and 0 <= j < n1:
        B[i, j] = v
    else:
        OutOfBounds(site, (i, j), (n0, n1))      # report, store nothing

and every load ``B[i, j]`` becomes ``select(in range, B[i, j], OutOfBounds(...))``, which
reports and yields 0 without reading. Index expressions are bound once (``let``) so they are
evaluated exactly once, as before. The function's attribute ``tc.bounds_sites`` lists one
description per site (``"store B"``); the code generator turns :class:`OutOfBounds` into a call
recording the first violation (function, site, index values, extents) in the compiled library,
where the runtime reads it after the call and raises
:class:`~tilecraft.runtime.BoundsCheckError`. A bounds-checked kernel never touches memory
outside its buffers, so the process survives. Accesses that the simplifier proves in range
lose their check again in :class:`~tilecraft.lower.Simplify`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import IRError
from ..ir import (
    GE,
    LT,
    And,
    Buffer,
    BufferLoad,
    BufferStore,
    DataType,
    Evaluate,
    Expr,
    IfThenElse,
    IntImm,
    LetStmt,
    Mutator,
    PrimFunc,
    Select,
    Stmt,
    Var,
    as_expr,
    cast,
    register_node,
)
from ..ir.transform import FunctionPass

BOUNDS_SITES_ATTR = "tc.bounds_sites"
"""Function attribute: per site number, what the site accesses (``"load A"``, ``"store B"``)."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class OutOfBounds(Expr):
    """Report that access ``site`` used ``indices`` outside ``extents``; the value is 0.

    Lowering-only (produced by :class:`InsertBoundsChecks`, consumed by the C emitter).
    """

    dtype: DataType
    site: int
    indices: tuple[Expr, ...]
    extents: tuple[Expr, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "indices", tuple(self.indices))
        object.__setattr__(self, "extents", tuple(self.extents))
        if len(self.indices) != len(self.extents):
            raise IRError("OutOfBounds: one extent per index")
        if self.site < 0:
            raise IRError(f"OutOfBounds: site must be >= 0, got {self.site}")

    def script(self) -> str:
        """A one-line rendering (the script printer does not know lowering-only nodes)."""
        return f"T.out_of_bounds({self.site})"

    __hash__ = object.__hash__


register_node(OutOfBounds, tag="lower.OutOfBounds")


def _in_range(indices: tuple[Expr, ...], shape: tuple[Expr, ...]) -> Expr | None:
    """``0 <= i < n`` for every dimension (None for a rank-0 buffer: always in range)."""
    cond: Expr | None = None
    for idx, ext in zip(indices, shape, strict=True):
        e = cast(ext, idx.dtype) if ext.dtype != idx.dtype else ext
        term = And(GE(idx, as_expr(0, idx.dtype)), LT(idx, e))
        cond = term if cond is None else And(cond, term)
    return cond


class _Checker(Mutator):
    def __init__(self) -> None:
        super().__init__()
        self.sites: list[str] = []
        self.counter = 0

    def visit_Buffer(self, buf: Buffer) -> Buffer:  # noqa: N802
        return buf  # shapes are not accesses

    def _site(self, kind: str, buf: Buffer) -> int:
        self.sites.append(f"{kind} {buf.name}")
        return len(self.sites) - 1

    def _bind(self, indices: tuple[Expr, ...]) -> tuple[list[tuple[Var, Expr]], tuple[Expr, ...]]:
        """Name non-trivial indices so the check and the access evaluate them once."""
        lets: list[tuple[Var, Expr]] = []
        out: list[Expr] = []
        for idx in indices:
            if isinstance(idx, (Var, IntImm)):
                out.append(idx)
                continue
            self.counter += 1
            v = Var(f"idx{self.counter}", idx.dtype)
            lets.append((v, idx))
            out.append(v)
        return lets, tuple(out)

    def visit_BufferStore(self, s: BufferStore) -> Stmt:  # noqa: N802
        s = self.generic_visit(s)
        lets, indices = self._bind(s.indices)
        cond = _in_range(indices, s.buffer.shape)
        if cond is None:
            return s
        fail = OutOfBounds(as_expr(0).dtype, self._site("store", s.buffer), indices,
                           s.buffer.shape)  # fmt: skip
        out: Stmt = IfThenElse(cond, s.update(indices=indices), Evaluate(fail))
        for v, value in reversed(lets):
            out = LetStmt(v, value, out)
        return out

    def visit_BufferLoad(self, e: BufferLoad) -> Expr:  # noqa: N802
        e = self.generic_visit(e)
        cond = _in_range(e.indices, e.buffer.shape)
        if cond is None:
            return e
        # loads sit inside expressions: no let; Select evaluates the chosen branch only
        fail = OutOfBounds(e.dtype, self._site("load", e.buffer), e.indices, e.buffer.shape)
        return Select(cond, e, fail)


class InsertBoundsChecks(FunctionPass):
    """Guard every load and store of ``func`` with a bounds check (see the module docstring)."""

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Return ``func`` with checked accesses and the ``tc.bounds_sites`` attribute."""
        checker = _Checker()
        body = checker.visit(func.body)
        return func.update(body=body).with_attr(BOUNDS_SITES_ATTR, tuple(checker.sites))
