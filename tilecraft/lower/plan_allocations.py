"""Turn blocks' ``alloc_buffers`` into ``Allocate`` statements placed where the buffer is used.

Before: intermediate buffers are listed in some block's ``alloc_buffers``.
After:  no block lists a buffer; each such buffer that is accessed has one ``Allocate`` at the
narrowest statement covering all its loads and stores (a contiguous range of a sequence when
the accesses sit in several of its statements). Unused buffers are dropped.

Two rules keep the placement correct when a buffer carries values across loop iterations:
a buffer written by a reduction block is placed above the outermost loop that drives one of
the block's reduce iterators (the accumulator lives across those iterations), and a
``shared``-scope buffer is placed above every ``threadIdx`` loop (all threads see one copy;
CUDA lowering turns this off: it relaxes shared buffers over thread loops when compacting).
An allocation is never hoisted out of the block that declared it. A buffer allocated inside a
block's body is local to that block: its regions leave the block's ``reads``/``writes``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import (
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Evaluate,
    Expr,
    For,
    IfThenElse,
    IterKind,
    LetStmt,
    Mutator,
    Node,
    PrimFunc,
    SeqStmt,
    Stmt,
    collect_vars,
    post_order_visit,
    seq,
)
from ..ir.transform import FunctionPass

# one step of a path from the function body down to a statement: (statement, child slot);
# slot -1 marks the statement that itself holds the access
_Step = tuple[Node, int]


@dataclass
class _Target:
    node: Stmt
    lo: int = -1  # for a SeqStmt: wrap children[lo..hi]; -1 wraps the whole node
    hi: int = -1


class _AccessCollector:
    """Record, for each planned buffer, the paths of all statements that access it."""

    def __init__(self, planned: dict[int, Buffer], shared_at_threads: bool = True) -> None:
        self.planned = planned
        self.shared_at_threads = shared_at_threads
        self.paths: dict[int, list[list[_Step]]] = {k: [] for k in planned}
        self.owner_path: dict[int, list[_Step]] = {}
        self.path: list[_Step] = []
        self.cuts: list[tuple[int, set[int]]] = []  # (path index of a reduce loop, written ids)

    def record(self, stmt: Stmt, buf: Buffer) -> None:
        key = id(buf)
        if key not in self.planned:
            return
        pos = [*self.path, (stmt, -1)]
        for cut, written in self.cuts:
            if key in written and cut < len(pos) - 1:
                pos = [*self.path[:cut], (self.path[cut][0], -1)]
        if self.shared_at_threads and buf.scope in ("shared", "shared.dyn"):
            for i, (node, _) in enumerate(pos[:-1]):
                if isinstance(node, For) and (node.thread or "").startswith("threadIdx"):
                    pos = [*pos[:i], (node, -1)]
                    break
        self.paths[key].append(pos)

    def exprs(self, stmt: Stmt, *values: Expr) -> None:
        def fn(n: Node) -> None:
            if isinstance(n, BufferLoad):
                self.record(stmt, n.buffer)

        for v in values:
            post_order_visit(v, fn)

    def child(self, node: Stmt, slot: int, body: Stmt) -> None:
        self.path.append((node, slot))
        self.stmt(body)
        self.path.pop()

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, SeqStmt):
            for i, c in enumerate(s.stmts):
                self.child(s, i, c)
        elif isinstance(s, For):
            self.exprs(s, s.min, s.extent)
            self.child(s, 0, s.body)
        elif isinstance(s, IfThenElse):
            self.exprs(s, s.condition)
            self.child(s, 0, s.then_case)
            if s.else_case is not None:
                self.child(s, 1, s.else_case)
        elif isinstance(s, LetStmt):
            self.exprs(s, s.value)
            self.child(s, 0, s.body)
        elif isinstance(s, Allocate):
            self.child(s, 0, s.body)
        elif isinstance(s, BufferStore):
            self.exprs(s, s.value, *s.indices)
            self.record(s, s.buffer)
        elif isinstance(s, Evaluate):
            self.exprs(s, s.value)
        elif isinstance(s, BlockRealize):
            self.realize(s)

    def realize(self, s: BlockRealize) -> None:
        self.exprs(s, *s.iter_values, s.predicate)
        block = s.block
        self.path.append((s, 0))
        pushed = self._push_cut(s)
        for buf in block.alloc_buffers:
            self.owner_path[id(buf)] = [*self.path, (block, 1)]
        if block.init is not None:
            self.child(block, 0, block.init)
        self.child(block, 1, block.body)
        if pushed:
            self.cuts.pop()
        self.path.pop()

    def _push_cut(self, s: BlockRealize) -> bool:
        reduce_vars: set[int] = set()
        for iv, value in zip(s.block.iter_vars, s.iter_values, strict=True):
            if iv.kind is IterKind.REDUCE:
                reduce_vars.update(id(v) for v in collect_vars(value))
        if not reduce_vars:
            return False
        for i, (node, _) in enumerate(self.path):
            if isinstance(node, For) and id(node.loop_var) in reduce_vars:
                self.cuts.append((i, _written_buffers(s.block)))
                return True
        return False


def _written_buffers(block: Block) -> set[int]:
    written = {id(r.buffer) for r in block.writes}

    def fn(n: Node) -> None:
        if isinstance(n, BufferStore):
            written.add(id(n.buffer))

    post_order_visit(block, fn)
    return written


def _placement(paths: list[list[_Step]], owner: list[_Step]) -> _Target:
    first = paths[0]
    p = 0
    while all(p < len(q) and q[p][0] is first[p][0] and q[p][1] == first[p][1] for q in paths):
        p += 1
    prefix = first[:p]
    if not any(n is owner[-1][0] and k == 1 for n, k in (first if p == len(first) else prefix)):
        # never hoist above the declaring block: fall back to its whole body
        block = owner[-1][0]
        assert isinstance(block, Block)
        return _Target(block.body)
    if p == len(first):  # every access is in one statement
        node = first[-1][0]
        assert isinstance(node, Stmt)
        return _Target(node)
    node = first[p][0]
    slots = [q[p][1] for q in paths]
    if isinstance(node, SeqStmt) and min(slots) >= 0:
        return _Target(node, min(slots), max(slots))
    if isinstance(node, Block):  # accesses in both init and body: wrap the realize
        node = first[p - 1][0]
    assert isinstance(node, Stmt)
    return _Target(node)


@dataclass
class _Span:
    lo: int
    hi: int
    buf: Buffer


def _make_laminar(spans: list[_Span]) -> None:
    """Widen crossing spans to their union until any two are nested or disjoint."""
    changed = True
    while changed:
        changed = False
        for a in spans:
            for b in spans:
                if a.lo < b.lo <= a.hi < b.hi:
                    a.hi = b.hi
                    b.lo = a.lo
                    changed = True


def _wrap_children(children: list[Stmt], spans: list[_Span]) -> list[Stmt]:
    out: list[Stmt] = []
    i = 0
    while i < len(children):
        starting = [r for r in spans if r.lo == i]
        if not starting:
            out.append(children[i])
            i += 1
            continue
        hi = max(r.hi for r in starting)
        tops = [r for r in starting if r.hi == hi]
        inner = [
            _Span(r.lo - i, r.hi - i, r.buf)
            for r in spans
            if i <= r.lo <= r.hi <= hi and (r.lo, r.hi) != (i, hi)
        ]
        body = seq(*_wrap_children(children[i : hi + 1], inner))
        for r in reversed(tops):
            body = Allocate(r.buf, body)
        out.append(body)
        i = hi + 1
    return out


class _Placer(Mutator):
    def __init__(self, wraps: dict[int, list[tuple[_Target, Buffer]]]) -> None:
        super().__init__()
        self.wraps = wraps
        self.placed: list[int] = []  # ids of the buffers wrapped in an Allocate so far

    def visit(self, node: object) -> object:
        todo = self.wraps.get(id(node))
        new = super().visit(node)
        if not todo:
            return new
        self.placed.extend(id(b) for _, b in todo)
        spans = [_Span(t.lo, t.hi, b) for t, b in todo if t.lo >= 0]
        if spans and isinstance(new, SeqStmt):
            _make_laminar(spans)
            new = seq(*_wrap_children(list(new.stmts), spans))
        for t, buf in reversed(todo):
            if t.lo < 0:
                new = Allocate(buf, new)
        return new

    def visit_Block(self, block: Block) -> Block:  # noqa: N802
        mark = len(self.placed)
        new: Block = self.generic_visit(block)
        if new.alloc_buffers:
            new = new.update(alloc_buffers=())
        inside = set(self.placed[mark:])
        if inside:  # allocated in the block's body: local to it, no longer part of its signature
            new = new.update(
                reads=tuple(r for r in new.reads if id(r.buffer) not in inside),
                writes=tuple(r for r in new.writes if id(r.buffer) not in inside),
            )
        return new


class PlanAllocations(FunctionPass):
    """Move block-allocated buffers to ``Allocate`` nodes at their narrowest covering scope.

    Parameters
    ----------
    shared_at_threads
        Place a ``shared`` buffer above every ``threadIdx`` loop (the serial meaning: all
        threads see one copy). False (CUDA lowering, whose compaction relaxes a shared buffer
        over the thread loops around it) places it where its accesses meet, like the others.
    """

    def __init__(self, shared_at_threads: bool = True) -> None:
        self.shared_at_threads = shared_at_threads

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Plan the intermediate allocations of ``func``."""
        planned: dict[int, Buffer] = {}

        def fn(n: Node) -> None:
            if isinstance(n, Block):
                for b in n.alloc_buffers:
                    planned[id(b)] = b

        post_order_visit(func.body, fn)
        if not planned:
            return func
        collector = _AccessCollector(planned, self.shared_at_threads)
        collector.stmt(func.body)
        wraps: dict[int, list[tuple[_Target, Buffer]]] = {}
        for key, buf in planned.items():
            paths = collector.paths[key]
            if not paths:
                continue
            target = _placement(paths, collector.owner_path[key])
            wraps.setdefault(id(target.node), []).append((target, buf))
        return func.update(body=_Placer(wraps).visit(func.body))
