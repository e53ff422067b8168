"""Shrink each allocated buffer to the box its accesses cover under the allocation.

Before: blocks are gone (:class:`~tilecraft.lower.ConvertBlocksToLoops`); intermediate buffers
are ``Allocate`` nodes placed by :class:`~tilecraft.lower.PlanAllocations`, with their full
(logical) shapes, not yet flattened.
After:  an allocated buffer whose accesses, with the loops inside its ``Allocate`` ranging over
their domains, cover a box with constant extents smaller than its shape in some dimensions
gets those extents, and every access ``B[i, j]`` becomes ``B[i - lo_i, j - lo_j]`` (``lo`` may
depend on loops outside the allocation; 0 in the dimensions that keep their extent). A
scheduled ``cache_write(..., "local")`` of a register tile thus becomes a small fixed-size
array instead of a copy of the whole output. Meaning is unchanged: each iteration of the
enclosing loops gets a fresh allocation and only touches its box.
"""

from __future__ import annotations

from ..arith import Analyzer, eval_region, union_region
from ..errors import TilecraftError
from ..ir import (
    Allocate,
    Buffer,
    BufferLoad,
    BufferStore,
    Expr,
    For,
    IntImm,
    LetStmt,
    Mutator,
    Node,
    PrimFunc,
    Range,
    Stmt,
    Var,
    collect_vars,
)
from ..ir.transform import FunctionPass
from ..ir.visitor import iter_children

SMALL_BOX = 1 << 16
"""Largest constant extent a symbolic dimension is shrunk to without proof that it fits: the
box covers every access either way, and this size cannot overflow an index."""


class _AccessRegions:
    """Collect, for one buffer, each access's indices with the inner loops around it."""

    def __init__(self, buf: Buffer) -> None:
        self.buf = buf
        self.loops: list[For] = []
        self.inner_lets: set[int] = set()
        self.accesses: list[tuple[tuple[Expr, ...], dict[Var, Range]]] = []

    def _record(self, indices: tuple[Expr, ...]) -> None:
        dom = {loop.loop_var: Range(loop.min, loop.extent) for loop in self.loops}
        self.accesses.append((indices, dom))

    def expr(self, node: Node) -> None:
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, BufferLoad) and n.buffer is self.buf:
                self._record(n.indices)
            if isinstance(n, (BufferLoad, Expr)):
                stack.extend(_expr_children(n))

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, For):
            self.expr(s.min)
            self.expr(s.extent)
            self.loops.append(s)
            self.stmt(s.body)
            self.loops.pop()
            return
        if isinstance(s, BufferStore):
            if s.buffer is self.buf:
                self._record(s.indices)
            self.expr(s.value)
            for i in s.indices:
                self.expr(i)
            return
        if isinstance(s, LetStmt):
            self.inner_lets.add(id(s.var))
            self.expr(s.value)
            self.stmt(s.body)
            return
        for child in iter_children(s):
            if isinstance(child, Stmt):
                self.stmt(child)
            elif isinstance(child, Expr):
                self.expr(child)


def _expr_children(e: Node) -> list[Node]:
    return [c for c in iter_children(e) if isinstance(c, Expr)]


def compact_region(alloc: Allocate, outer: Analyzer) -> list[Range] | None:
    """The constant-extent box ``alloc``'s buffer is accessed in, or None if not compactable."""
    buf = alloc.buffer
    col = _AccessRegions(buf)
    col.stmt(alloc.body)
    if not col.accesses:
        return None
    regions: list[list[Range]] = []
    try:
        for indices, dom in col.accesses:
            if len(indices) != buf.ndim:
                return None
            regions.append(eval_region(indices, dom, outer))
        box = union_region(regions, outer)
    except TilecraftError:
        return None
    inner = {id(v) for _, dom in col.accesses for v in dom} | col.inner_lets
    out: list[Range] = []
    for r, extent in zip(box, buf.shape, strict=True):
        shrinks = (
            isinstance(r.extent, IntImm)
            and r.extent.value >= 1
            # a symbolic extent shrinks to a box provably inside it, or to a small one: the
            # bound of an index such as ``x % n`` with ``n`` unknown is the whole int32 range,
            # while a register tile guarded by ``i * 8 + ii < n`` covers 8 rows whatever ``n``
            and (
                r.extent.value < extent.value
                if isinstance(extent, IntImm)
                else r.extent.value <= SMALL_BOX or outer.can_prove(r.extent <= extent)
            )
            and not any(id(v) in inner for v in collect_vars(r.min))
        )
        # a dimension that does not shrink keeps its full extent (the accesses are in it)
        out.append(r if shrinks else Range(IntImm(extent.dtype, 0), extent))
    return None if all(r.extent is e for r, e in zip(out, buf.shape, strict=True)) else out


class _Rebase(Mutator):
    """Rewrite accesses of one buffer to a new buffer with offset indices."""

    def __init__(self, old: Buffer, new: Buffer, mins: tuple[Expr, ...], ana: Analyzer) -> None:
        super().__init__()
        self.old, self.new, self.mins, self.ana = old, new, mins, ana

    def _index(self, indices: tuple[Expr, ...]) -> tuple[Expr, ...]:
        out = []
        for i, lo in zip(indices, self.mins, strict=True):
            i = self.visit(i)
            out.append(i if isinstance(lo, IntImm) and lo.value == 0 else self.ana.simplify(i - lo))
        return tuple(out)

    def visit_Buffer(self, buf: Buffer) -> Buffer:  # noqa: N802
        return self.new if buf is self.old else buf

    def visit_BufferLoad(self, load: BufferLoad) -> BufferLoad:  # noqa: N802
        if load.buffer is not self.old:
            return self.generic_visit(load)  # type: ignore[no-any-return]
        return BufferLoad(self.new, self._index(load.indices))

    def visit_BufferStore(self, store: BufferStore) -> BufferStore:  # noqa: N802
        if store.buffer is not self.old:
            return self.generic_visit(store)  # type: ignore[no-any-return]
        return BufferStore(self.new, self.visit(store.value), self._index(store.indices))


class _Compactor(Mutator):
    def __init__(self) -> None:
        super().__init__()
        self.ana = Analyzer()
        self.loops: list[For] = []
        self.bound: dict[int, For] = {}

    def visit_Buffer(self, buf: Buffer) -> Buffer:  # noqa: N802
        return buf

    def visit_For(self, loop: For) -> Stmt:  # noqa: N802
        seen = self.bound.get(id(loop.loop_var))
        if seen is not None and seen is not loop:
            # a loop variable reused with another range: restart from the enclosing loops
            self.ana, self.bound = Analyzer(), {}
            for outer in self.loops:
                self._bind(outer)
        self._bind(loop)
        self.loops.append(loop)
        new = self.generic_visit(loop)
        self.loops.pop()
        return new  # type: ignore[no-any-return]

    def _bind(self, loop: For) -> None:
        self.bound[id(loop.loop_var)] = loop
        self.ana.bind(loop.loop_var, Range(loop.min, loop.extent))

    def visit_Allocate(self, alloc: Allocate) -> Stmt:  # noqa: N802
        box = compact_region(alloc, self.ana)
        body = self.visit(alloc.body)
        if box is None:
            return alloc.update(body=body)
        old = alloc.buffer
        new = old.update(shape=tuple(r.extent for r in box))
        mins = tuple(r.min for r in box)
        return Allocate(new, _Rebase(old, new, mins, self.ana).visit(body))


class CompactBufferAllocation(FunctionPass):
    """Shrink allocated buffers to the constant-size box they are accessed in."""

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Compact the ``Allocate``d buffers of ``func``."""
        return func.update(body=_Compactor().visit(func.body))
