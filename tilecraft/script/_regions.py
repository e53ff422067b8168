"""Read/write regions a block's body implies (package-private; used when ``T.reads`` is omitted).

The inferred regions cover every access of the block's ``init`` and body, in the block's own
scope (its iterators and the variables around it):

- ``BufferLoad`` gives a read and ``BufferStore`` a write, of the element accessed. A buffer
  the block allocates (``T.alloc_buffer``, ``T.allocate`` inside it) is local and not listed;
  accesses inside nested blocks are described by those blocks' own regions (so a root block,
  which only holds blocks, accesses nothing itself).
- Variables bound inside the body (loops, lets) are relaxed over their ranges: ``A[vi, k]``
  under ``for k in range(16)`` reads ``A[vi, 0:16]``. Relaxation is exact for sums, constant
  multiples, floordiv/floormod by positive constants and min/max; an index it cannot bound
  (or one that itself loads from a buffer) covers the buffer's whole axis.
- Per buffer and axis the accesses are joined: one expression (however often) stays as written,
  ``vi`` and ``vi + 1`` become ``vi:vi + 2``; indices of different shapes cover the whole axis.
- Reads are listed in order of first access, except that buffers the block also writes come
  last (``C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]`` reads A, B, then C, the order
  ``te.create_prim_func`` uses); writes in order of first store.

Everything keeps its own stack, so expressions of any depth are handled.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import IRError
from ..ir import (
    Add,
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    DataType,
    Expr,
    FloorDiv,
    FloorMod,
    For,
    IntImm,
    LetStmt,
    Max,
    Min,
    Mul,
    Node,
    Range,
    Stmt,
    Sub,
    Var,
    structural_equal,
)
from ..ir.visitor import iter_children, node_fields

Regions = tuple[tuple[BufferRegion, ...], tuple[BufferRegion, ...]]


@dataclass(frozen=True, slots=True)
class _Bound:
    """``base + off`` (``base`` None for the constant ``off``)."""

    base: Expr | None
    off: int


_Interval = tuple[_Bound, _Bound]  # inclusive [lo, hi]


def _split(e: Expr) -> _Bound:
    if isinstance(e, IntImm):
        return _Bound(None, e.value)
    if isinstance(e, Add) and isinstance(e.b, IntImm):
        return _Bound(e.a, e.b.value)
    if isinstance(e, Sub) and isinstance(e.b, IntImm):
        return _Bound(e.a, -e.b.value)
    return _Bound(e, 0)


def _expr(b: _Bound, dt: DataType) -> Expr:
    if b.base is None:
        return IntImm(dt, b.off)
    if b.off == 0:
        return b.base
    return Add(b.base, IntImm(dt, b.off)) if b.off > 0 else Sub(b.base, IntImm(dt, -b.off))


def _same(a: Expr | None, b: Expr | None) -> bool:
    if a is None or b is None:
        return a is b
    return a is b or structural_equal(a, b)


def _subtree(e: Node) -> Iterator[Node]:
    stack = [e]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(iter_children(n))


class _Relax:
    """Intervals of index expressions with the body's own variables relaxed."""

    def __init__(self) -> None:
        self.env: dict[int, _Interval | None] = {}  # body variable -> its range (None: unknown)

    def interval(self, root: Expr) -> _Interval | None:
        """``[lo, hi]`` of ``root`` over the body's variables; None when unbounded."""
        return self.analyze(root)[0]

    def analyze(self, root: Expr) -> tuple[_Interval | None, bool]:
        """The interval of ``root`` and whether it uses the body's variables at all."""
        order: list[Expr] = []
        seen: set[int] = set()
        stack: list[tuple[Expr, bool]] = [(root, False)]
        while stack:  # post-order, each shared subtree once
            e, expanded = stack.pop()
            if expanded:
                order.append(e)
            elif id(e) not in seen:
                seen.add(id(e))
                stack.append((e, True))
                stack.extend((k, False) for k in iter_children(e) if isinstance(k, Expr))
        inner: dict[int, bool] = {}
        done: dict[int, _Interval | None] = {}
        for e in order:
            kids = [k for k in iter_children(e) if isinstance(k, Expr)]
            if isinstance(e, Var):
                inner[id(e)] = id(e) in self.env
            else:
                inner[id(e)] = any(inner[id(k)] for k in kids)
            if not inner[id(e)]:
                b = _split(e)
                done[id(e)] = (b, b)
                continue
            try:
                done[id(e)] = self.combine(e, [done[id(k)] for k in kids])
            except IRError:  # a constant left its dtype's range: no bound
                done[id(e)] = None
        return done[id(root)], inner[id(root)]

    def combine(self, e: Expr, kids: list[_Interval | None]) -> _Interval | None:
        """Interval of ``e`` from its children's; None when it cannot be bounded."""
        if isinstance(e, Var):
            return self.env[id(e)]
        if all(k is not None and k[0] == k[1] for k in kids):  # the body's variables are lets
            b = _split(_rebuild(e, [_expr(k[0], e.dtype) for k in kids if k is not None]))
            return b, b
        if len(kids) != 2 or kids[0] is None or kids[1] is None:
            return None
        (alo, ahi), (blo, bhi) = kids[0], kids[1]
        dt = e.dtype
        if isinstance(e, Add):
            return _add(alo, blo), _add(ahi, bhi)
        if isinstance(e, Sub):
            return _sub(alo, bhi, dt), _sub(ahi, blo, dt)
        if isinstance(e, Mul):
            if blo.base is None and bhi.base is None and blo.off == bhi.off:
                return _scale(alo, ahi, blo.off, dt)
            if alo.base is None and ahi.base is None and alo.off == ahi.off:
                return _scale(blo, bhi, alo.off, dt)
            return None
        if isinstance(e, (FloorDiv, FloorMod)):
            if not (blo.base is None and bhi.base is None and blo.off == bhi.off > 0):
                return None
            return _floor(e, alo, ahi, blo.off, dt)
        if isinstance(e, (Min, Max)):
            ctor = Min if isinstance(e, Min) else Max
            return _pick(ctor, alo, blo, dt), _pick(ctor, ahi, bhi, dt)
        return None


def _rebuild(e: Expr, kids: list[Expr]) -> Expr:
    """``e`` with its expression children replaced, in order, by ``kids``."""
    new = iter(kids)
    changes: dict[str, object] = {}
    for name in node_fields(type(e)):
        value = getattr(e, name)
        if isinstance(value, Expr):
            changes[name] = next(new)
        elif isinstance(value, tuple) and any(isinstance(v, Expr) for v in value):
            changes[name] = tuple(next(new) if isinstance(v, Expr) else v for v in value)
    return e.update(**changes)


def _add(a: _Bound, b: _Bound) -> _Bound:
    if a.base is None or b.base is None:
        return _Bound(a.base if b.base is None else b.base, a.off + b.off)
    return _Bound(Add(a.base, b.base), a.off + b.off)


def _sub(a: _Bound, b: _Bound, dt: DataType) -> _Bound:
    if b.base is None:
        return _Bound(a.base, a.off - b.off)
    base = Sub(a.base if a.base is not None else IntImm(dt, 0), b.base)
    return _Bound(base, a.off - b.off)


def _scale(lo: _Bound, hi: _Bound, c: int, dt: DataType) -> _Interval:
    def mul(b: _Bound) -> _Bound:
        if b.base is None or c == 0:
            return _Bound(None, b.off * c)
        return _Bound(Mul(b.base, IntImm(dt, c)), b.off * c)

    return (mul(lo), mul(hi)) if c >= 0 else (mul(hi), mul(lo))


def _floor(e: FloorDiv | FloorMod, lo: _Bound, hi: _Bound, c: int, dt: DataType) -> _Interval:
    if isinstance(e, FloorMod):
        if lo.base is None and hi.base is None and lo.off // c == hi.off // c:
            return _Bound(None, lo.off % c), _Bound(None, hi.off % c)
        return _Bound(None, 0), _Bound(None, c - 1)

    def div(b: _Bound) -> _Bound:
        if b.base is None:
            return _Bound(None, b.off // c)
        return _Bound(FloorDiv(_expr(b, dt), IntImm(dt, c)), 0)

    return div(lo), div(hi)


def _pick(ctor: type[Min] | type[Max], a: _Bound, b: _Bound, dt: DataType) -> _Bound:
    if a.base is None and b.base is None:
        return _Bound(None, min(a.off, b.off) if ctor is Min else max(a.off, b.off))
    if _same(a.base, b.base):
        return _Bound(a.base, min(a.off, b.off) if ctor is Min else max(a.off, b.off))
    return _Bound(ctor(_expr(a, dt), _expr(b, dt)), 0)


# index as it stands in the block's scope (body variables substituted), its interval (None:
# whole axis)
_Access = tuple[Expr, _Interval | None]


class _Collector:
    """Walk a block's init and body in execution order, recording accesses."""

    def __init__(self, block: Block) -> None:
        self.rx = _Relax()
        self.local = {id(b) for b in block.alloc_buffers}
        self.reads: dict[int, tuple[Buffer, list[list[_Access]]]] = {}
        self.writes: dict[int, tuple[Buffer, list[list[_Access]]]] = {}

    def record(self, table: dict[int, tuple[Buffer, list[list[_Access]]]], buf: Buffer,
               indices: tuple[Expr, ...]) -> None:  # fmt: skip
        if id(buf) in self.local:
            return
        entry = table.setdefault(id(buf), (buf, [[] for _ in buf.shape]))
        for dim, idx in zip(entry[1], indices, strict=False):
            if any(isinstance(n, BufferLoad) for n in _subtree(idx)):
                dim.append((idx, None))
                continue
            iv, inner = self.rx.analyze(idx)
            if inner and iv is not None and iv[0] == iv[1]:  # lets only: the substituted form
                idx = _expr(iv[0], idx.dtype)
            dim.append((idx, iv))

    def loads(self, e: Node) -> None:
        """Record the loads under ``e``, innermost first (the order te uses)."""
        order: list[BufferLoad] = []
        stack: list[tuple[Node, bool]] = [(e, False)]
        while stack:
            n, expanded = stack.pop()
            if expanded:
                order.append(n)  # type: ignore[arg-type]
                continue
            if isinstance(n, BufferLoad):
                stack.append((n, True))
            stack.extend(
                (k, False) for k in reversed(list(iter_children(n))) if isinstance(k, Expr)
            )
        for load in order:
            self.record(self.reads, load.buffer, load.indices)

    def walk(self, block: Block) -> None:
        todo: list[Stmt | tuple[int, _Interval | None, bool]] = [block.body]
        if block.init is not None:
            todo.append(block.init)
        while todo:
            s = todo.pop()
            if isinstance(s, tuple):  # leaving the scope of a body variable
                key, old, had = s
                if had:
                    self.rx.env[key] = old
                else:
                    del self.rx.env[key]
                continue
            todo.extend(reversed(self.step(s)))

    def bind(self, var: Var, rng: _Interval | None) -> tuple[int, _Interval | None, bool]:
        key = id(var)
        undo = (key, self.rx.env.get(key), key in self.rx.env)
        self.rx.env[key] = rng
        return undo

    def step(self, s: Stmt) -> list[Stmt | tuple[int, _Interval | None, bool]]:
        """Record the accesses ``s`` makes itself; return what to walk next, in order."""
        if isinstance(s, BufferStore):
            self.loads(s.value)
            for i in s.indices:
                self.loads(i)
            self.record(self.writes, s.buffer, s.indices)
            return []
        if isinstance(s, BlockRealize):  # its block describes its own accesses
            for v in (*s.iter_values, s.predicate):
                self.loads(v)
            return []
        if isinstance(s, Block):
            return []
        if isinstance(s, For):
            self.loads(s.min)
            self.loads(s.extent)
            return [s.body, self.bind(s.loop_var, self.loop_range(s))]
        if isinstance(s, LetStmt):
            self.loads(s.value)
            return [s.body, self.bind(s.var, self.rx.interval(s.value))]
        if isinstance(s, Allocate):
            self.local.add(id(s.buffer))
            return [s.body]
        kids = list(iter_children(s))
        for k in kids:
            if isinstance(k, Expr):
                self.loads(k)
        return [k for k in kids if isinstance(k, Stmt)]

    def loop_range(self, s: For) -> _Interval | None:
        lo, ext = self.rx.interval(s.min), self.rx.interval(s.extent)
        if lo is None or ext is None:
            return None
        try:
            return lo[0], _add(lo[1], _add(ext[1], _Bound(None, -1)))
        except IRError:
            return None


def _join(buf: Buffer, dim: int, accesses: list[_Access]) -> Range:
    """One range covering every access of axis ``dim``."""
    whole = Range(IntImm(buf.shape[dim].dtype, 0), buf.shape[dim])
    first, _ = accesses[0]
    ivs = [iv for _, iv in accesses]
    if all(_same(e, first) for e, _ in accesses) and ivs[0] is not None:
        lo, hi = ivs[0]
        if lo == hi:
            return Range(first, IntImm(first.dtype, 1))
    if any(iv is None for iv in ivs):
        return whole
    known = [iv for iv in ivs if iv is not None]
    dt = first.dtype
    base = known[0][0].base
    if all(_same(lo.base, base) and _same(hi.base, base) for lo, hi in known):
        low = min(lo.off for lo, _ in known)
        high = max(hi.off for _, hi in known)
        return Range(_expr(_Bound(base, low), dt), IntImm(dt, high - low + 1))
    if len(known) != 1:
        return whole
    lo, hi = known[0]
    if lo.base is None:
        return Range(IntImm(dt, lo.off), _expr(_Bound(hi.base, hi.off - lo.off + 1), dt))
    return Range(_expr(lo, dt), _expr(_Bound(Sub(_expr(hi, dt), _expr(lo, dt)), 1), dt))


def _regions(table: dict[int, tuple[Buffer, list[list[_Access]]]]) -> list[BufferRegion]:
    out = []
    for buf, dims in table.values():
        ranges = []
        for d, accesses in enumerate(dims):
            try:
                ranges.append(_join(buf, d, accesses))
            except IRError:  # an end point left its dtype's range
                ranges.append(Range(IntImm(buf.shape[d].dtype, 0), buf.shape[d]))
        out.append(BufferRegion(buf, tuple(ranges)))
    return out


def infer_regions(block: Block) -> Regions:
    """The (reads, writes) that ``block``'s init and body imply (see the module docstring)."""
    col = _Collector(block)
    col.walk(block)
    written = set(col.writes)
    order = [k for k in col.reads if k not in written] + [k for k in col.reads if k in written]
    reads = _regions({k: col.reads[k] for k in order})
    return tuple(reads), tuple(_regions(col.writes))
