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

Thread-bound loops (a GPU schedule lowered for CUDA keeps them) follow the storage scope of
the buffer (:mod:`tilecraft.ir.thread_scope`): a loop bound to a thread index that shares the
buffer (``threadIdx`` for a ``shared`` buffer, every index for a ``global`` one) ranges over its
whole domain whether it lies inside or outside the allocation, so a shared tile covers what
the whole thread block touches; a loop bound to an index that does not share it (``threadIdx``
for a ``local`` buffer, ``blockIdx`` for a ``shared`` one) is a fixed value per thread (block),
so the box may be offset by it, and every such loop bound to one index counts as one value.
``vthread`` loops run one after another inside a thread: inside the allocation they range like
serial loops (a register tile holds every virtual thread's part).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..arith import Analyzer, eval_region, union_region
from ..errors import TilecraftError
from ..ir import (
    Allocate,
    Buffer,
    BufferLoad,
    BufferStore,
    Expr,
    For,
    ForKind,
    IntImm,
    LetStmt,
    Mutator,
    Node,
    PrimFunc,
    Range,
    Stmt,
    Var,
    collect_vars,
    relaxed_loop,
    substitute,
    thread_relaxes,
    uses_var,
)
from ..ir.transform import FunctionPass
from ..ir.visitor import iter_children

SMALL_BOX = 1 << 16
"""Largest constant extent a symbolic dimension is shrunk to without proof that it fits: the
box covers every access either way, and this size cannot overflow an index."""


class _AccessRegions:
    """Collect, for one buffer, each access's indices with the inner loops around it.

    ``relaxed`` are the domains of enclosing loops (outside the allocation) that range too;
    ``canon`` maps the variable of a thread loop that does not share the buffer to one
    variable per thread index (``fixed`` collects those thread loops' extents).
    """

    def __init__(self, buf: Buffer, relaxed: dict[Var, Range], fix_threads: bool = True) -> None:
        self.buf = buf
        self.relaxed = relaxed
        self.fix_threads = fix_threads
        self.loops: list[For] = []
        self.inner_lets: set[int] = set()
        self.accesses: list[tuple[tuple[Expr, ...], dict[Var, Range]]] = []
        self.canon: dict[Var, Expr] = {}
        self.fixed: dict[str, list[Expr]] = {}
        self.canon_vars: dict[str, Var] = {}

    def _record(self, indices: tuple[Expr, ...]) -> None:
        dom = dict(self.relaxed)
        dom.update({lp.loop_var: Range(lp.min, lp.extent) for lp in self.loops})
        if self.canon:
            indices = tuple(substitute(i, self.canon) for i in indices)
        self.accesses.append((indices, dom))

    def _fixed_thread(self, loop: For) -> bool:
        """A hardware-thread loop whose threads each own a copy: a fixed value per copy."""
        tag = loop.thread or ""
        if loop.kind is not ForKind.THREAD_BINDING or tag.startswith("vthread"):
            return False
        if not self.fix_threads and tag.startswith("threadIdx"):
            return False
        return (
            not thread_relaxes(self.buf.scope, tag)
            and isinstance(loop.min, IntImm)
            and loop.min.value == 0
        )

    def expr(self, node: Node) -> None:
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, BufferLoad) and n.buffer is self.buf:
                self._record(n.indices)
            if isinstance(n, (BufferLoad, Expr)):
                stack.extend(_expr_children(n))

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, For) and self._fixed_thread(s):
            tag = s.thread or ""
            canon = self.canon_vars.setdefault(tag, Var(tag.replace(".", "_"), s.loop_var.dtype))
            self.fixed.setdefault(tag, []).append(s.extent)
            self.canon[s.loop_var] = canon
            self.stmt(s.body)
            del self.canon[s.loop_var]
            return
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


def compact_region(
    alloc: Allocate, outer: Analyzer, enclosing: Sequence[For] = (), keep_pitch: bool = False
) -> tuple[list[Range], dict[str, Var]] | None:
    """The constant-extent box ``alloc``'s buffer is accessed in, or None if not compactable.

    ``enclosing`` are the loops around the allocation. With ``keep_pitch``, a dimension other
    than the first whose box starts at 0 everywhere keeps its extent (see
    :class:`CompactBufferAllocation`). Returns the box and the variables standing for the
    fixed thread indices its minimums may use (by thread tag).

    A thread loop that does not share the buffer is first taken as a fixed value per thread
    (the box moves with the thread); if a box ranging over such ``threadIdx`` loops is smaller
    (an access under a loop with a smaller extent than the block's), that one is used.
    """
    fixed = _box(alloc, outer, enclosing, keep_pitch, fix_threads=True)
    if fixed is not None and not fixed[1]:
        return fixed  # no thread-dependent offset: ranging over the threads gives no less
    ranging = _box(alloc, outer, enclosing, keep_pitch, fix_threads=False)
    if fixed is None or (ranging is not None and _size(ranging[0]) < _size(fixed[0])):
        return ranging
    return fixed


def _size(box: list[Range]) -> float:
    total = 1.0
    for r in box:
        total *= r.extent.value if isinstance(r.extent, IntImm) else float("inf")
    return total


def _box(
    alloc: Allocate, outer: Analyzer, enclosing: Sequence[For], keep_pitch: bool, fix_threads: bool
) -> tuple[list[Range], dict[str, Var]] | None:
    buf = alloc.buffer
    relaxed = {
        lp.loop_var: Range(lp.min, lp.extent) for lp in enclosing if relaxed_loop(buf.scope, lp)
    }
    col = _AccessRegions(buf, relaxed, fix_threads)
    col.stmt(alloc.body)
    if not col.accesses:
        return None
    if col.fixed and not _bind_fixed(col, outer):
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
    for d, (r, extent) in enumerate(zip(box, buf.shape, strict=True)):
        pitch = keep_pitch and d > 0 and isinstance(r.min, IntImm) and r.min.value == 0
        shrinks = (
            not pitch
            and isinstance(r.extent, IntImm)
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
    if all(r.extent is e for r, e in zip(out, buf.shape, strict=True)):
        return None
    used = {id(v) for r in out for v in collect_vars(r.min)}
    return out, {t: v for t, v in col.canon_vars.items() if id(v) in used}


def _bind_fixed(col: _AccessRegions, ana: Analyzer) -> bool:
    """Bind each fixed thread index's variable to the range its loops share (constant)."""
    for tag, extents in col.fixed.items():
        if not all(isinstance(e, IntImm) for e in extents):
            return False
        hi = max(e.value for e in extents)  # type: ignore[attr-defined]
        var = col.canon_vars[tag]
        ana.bind(var, Range(IntImm(var.dtype, 0), IntImm(var.dtype, hi)))
    return True


class _Rebase(Mutator):
    """Rewrite accesses of one buffer to a new buffer with offset indices.

    A minimum that uses a fixed thread index's variable (``canon``, by tag) uses, at each
    access, the variable of the enclosing loop bound to that index.
    """

    def __init__(
        self,
        old: Buffer,
        new: Buffer,
        mins: tuple[Expr, ...],
        ana: Analyzer,
        canon: dict[str, Var] | None = None,
    ) -> None:
        super().__init__()
        self.old, self.new, self.mins, self.ana = old, new, mins, ana
        self.canon = canon or {}
        self.threads: dict[str, list[Var]] = {}
        self.missing = False

    def visit_For(self, loop: For) -> Stmt:  # noqa: N802
        tag = loop.thread or ""
        if tag not in self.canon or loop.kind is not ForKind.THREAD_BINDING:
            return self.generic_visit(loop)  # type: ignore[no-any-return]
        self.threads.setdefault(tag, []).append(loop.loop_var)
        new = self.generic_visit(loop)
        self.threads[tag].pop()
        return new  # type: ignore[no-any-return]

    def _min(self, lo: Expr) -> Expr:
        if not self.canon:
            return lo
        vmap: dict[Var, Expr] = {}
        for tag, var in self.canon.items():
            if not uses_var(lo, var):
                continue
            if not self.threads.get(tag):
                self.missing = True  # checked by the caller: the access has no such loop
                return lo
            vmap[var] = self.threads[tag][-1]
        return substitute(lo, vmap) if vmap else lo

    def _index(self, indices: tuple[Expr, ...]) -> tuple[Expr, ...]:
        out = []
        for i, lo in zip(indices, self.mins, strict=True):
            i = self.visit(i)
            if isinstance(lo, IntImm) and lo.value == 0:
                out.append(i)
            else:
                out.append(self.ana.simplify(i - self._min(lo)))
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
    def __init__(self, keep_shared_pitch: bool = False) -> None:
        super().__init__()
        self.keep_shared_pitch = keep_shared_pitch
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
        pitch = self.keep_shared_pitch and alloc.buffer.scope.startswith("shared")
        found = compact_region(alloc, self.ana, self.loops, pitch)
        body = self.visit(alloc.body)
        if found is None:
            return alloc.update(body=body)
        box, canon = found
        old = alloc.buffer
        new = old.update(shape=tuple(r.extent for r in box))
        mins = tuple(r.min for r in box)
        rebase = _Rebase(old, new, mins, self.ana, canon)
        new_body = rebase.visit(body)
        if rebase.missing:  # an access outside every loop of a thread index the box uses
            return alloc.update(body=body)
        return Allocate(new, new_body)


class CompactBufferAllocation(FunctionPass):
    """Shrink allocated buffers to the constant-size box they are accessed in.

    Parameters
    ----------
    keep_shared_pitch
        For shared buffers (CUDA lowering), a dimension other than the first whose box starts
        at 0 in every thread block keeps its declared extent: only the dimensions whose box
        moves with the loops and blocks (a cached tensor's tile) shrink, and a tile declared
        padded by hand (``(32, 33)`` against bank conflicts) keeps its row pitch.
    """

    def __init__(self, keep_shared_pitch: bool = False) -> None:
        self.keep_shared_pitch = keep_shared_pitch

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Compact the ``Allocate``d buffers of ``func``."""
        return func.update(body=_Compactor(self.keep_shared_pitch).visit(func.body))
