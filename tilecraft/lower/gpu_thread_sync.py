"""Insert ``__syncthreads()`` where threads of a block communicate through shared memory.

Before: lowered GPU code (flat buffers, thread-bound loops, shared-scope allocations).
After:  a :class:`~.gpu_nodes.ThreadSync` stands before every statement that touches a shared
buffer location another thread of the block touched since the last barrier, when one of the
two accesses is a write (read-after-write, write-after-read, write-after-write); and at the end
of a loop body when such a dependence is carried from one iteration into the next (the
write-after-read of a shared tile reused by every iteration of a ``k`` loop). Whether two
accesses touch one element from two threads is decided by evaluating them over every thread
of the block and every iteration of the loops between them (:mod:`._thread_access`); a thread
is the block's whole thread index, so a statement no ``threadIdx.y`` loop encloses is run by
every ``threadIdx.y`` value. Where that cannot be decided a barrier is added; nowhere else.
Barriers are never placed under a branch whose condition depends on the thread index (every
thread must reach them); a dependence that would need one there raises
:class:`~tilecraft.errors.LowerError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import LowerError
from ..ir import (
    Allocate,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Evaluate,
    Expr,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    LetStmt,
    Node,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
    collect_vars,
    post_order_visit,
    seq,
)
from ..ir.transform import FunctionPass
from ._thread_access import Footprint, crosses_threads, launch_extents
from .gpu_nodes import ThreadSync, WarpShuffle
from .gpu_vectorize import VECTOR_ATTR

_SHARED = ("shared", "shared.dyn")


@dataclass(frozen=True, eq=False)
class _Access:
    buffer: Buffer
    write: bool
    where: Footprint  # the flat index and every loop around it in the kernel


@dataclass
class _Summary:
    head: list[_Access] = field(default_factory=list)  # before the first barrier
    tail: list[_Access] = field(default_factory=list)  # after the last barrier
    barrier: bool = False


class _Planner:
    def __init__(self, func_name: str) -> None:
        self.func_name = func_name
        self.loops: list[For] = []  # every loop around the statement, in the kernel
        self.thread_vars: set[int] = set()
        self.launch: dict[str, int] | None = None  # the block's extents, in a kernel
        # keyed by the accesses themselves (compared by identity), never by id(): the dict
        # keeps them alive, so a later access cannot reuse a freed one's id and its answer
        self.memo: dict[tuple[_Access, _Access, int], bool] = {}

    def accesses(self, s: Stmt) -> list[_Access]:
        found: list[_Access] = []
        ctx = tuple(self.loops)
        tile = _wmma_store_tile(s, ctx)
        if tile is not None:  # the warp writes a whole tile; its addresses are not reads
            return [tile]

        def fn(n: Node) -> None:
            if isinstance(n, BufferLoad) and n.buffer.scope in _SHARED:
                found.append(_Access(n.buffer, False, Footprint(n.indices, ctx)))

        for value in _exprs(s):
            post_order_visit(value, fn)
        if isinstance(s, BufferStore) and s.buffer.scope in _SHARED:
            found.append(_Access(s.buffer, True, Footprint(s.indices, ctx)))
        elif isinstance(s, WarpShuffle) and s.buffer.scope in _SHARED:
            found.append(_Access(s.buffer, True, Footprint((s.index,), ctx)))
        return found

    def conflict(self, earlier: list[_Access], later: list[_Access]) -> bool:
        """Some pair (one a write) touches an element from two threads of the block; the
        loops around the current point take one value for both accesses."""
        depth = len(self.loops)
        for a in earlier:
            for b in later:
                if a.buffer is b.buffer and (a.write or b.write) and self._crosses(a, b, depth):
                    return True
        return False

    def _crosses(self, a: _Access, b: _Access, depth: int) -> bool:
        key = (a, b, depth)
        hit = self.memo.get(key)
        if hit is None:
            got = (
                None
                if self.launch is None
                else crosses_threads(a.where, b.where, depth, self.launch)
            )
            hit = self.memo[key] = got is not False  # undecided: a barrier is the safe side
        return hit

    def plan(self, s: Stmt) -> tuple[Stmt, _Summary]:
        if isinstance(s, SeqStmt):
            return self.sequence(list(s.stmts))
        if isinstance(s, ThreadSync):
            return s, _Summary(barrier=True)
        if isinstance(s, For):
            return self.loop(s)
        if isinstance(s, IfThenElse):
            return self.branch(s)
        if isinstance(s, Allocate):
            body, summ = self.plan(s.body)
            return s.update(body=body), summ
        if isinstance(s, LetStmt):
            body, summ = self.plan(s.body)
            value = self.accesses(Evaluate(s.value))  # read before the body runs
            tail = summ.tail if summ.barrier else value + summ.tail
            return s.update(body=body), _Summary(value + summ.head, tail, summ.barrier)
        if isinstance(s, (BufferStore, WarpShuffle, Evaluate)):
            acc = self.accesses(s)
            return s, _Summary(acc, list(acc))
        raise LowerError(f"InsertThreadSync {self.func_name}: unexpected {type(s).__name__}")

    def sequence(self, stmts: list[Stmt]) -> tuple[Stmt, _Summary]:
        out: list[Stmt] = []
        summ = _Summary()
        pending: list[_Access] = []
        for c in stmts:
            new, cs = self.plan(c)
            if self.conflict(pending, cs.head):
                out.append(ThreadSync())
                summ.barrier = True
                pending = []
            if not summ.barrier:
                summ.head.extend(cs.head)
            if cs.barrier:
                summ.barrier = True
                pending = list(cs.tail)
            else:
                pending.extend(cs.tail)
            out.append(new)
        summ.tail = pending
        return seq(*out), summ

    def loop(self, s: For) -> tuple[Stmt, _Summary]:
        is_thread = s.kind is ForKind.THREAD_BINDING
        root = is_thread and not self.loops  # the kernel: its block's extents
        if root:
            self.launch = launch_extents(_loops_under(s))
        if is_thread and (s.thread or "").startswith("threadIdx"):
            self.thread_vars.add(id(s.loop_var))
        self.loops.append(s)
        try:
            body, summ = self.plan(s.body)
        finally:
            self.loops.pop()
            if root:
                self.launch = None
        if is_thread:
            return s.update(body=body), summ
        single = isinstance(s.extent, IntImm) and s.extent.value <= 1
        # the lanes of a vector loop run at once in one thread: no barrier between them
        lanes = s.kind is ForKind.VECTORIZED or VECTOR_ATTR in s.annotations
        if not single and not lanes and self.conflict(summ.tail, summ.head):
            body = seq(body, ThreadSync())
            return s.update(body=body), _Summary(summ.head, [], True)
        return s.update(body=body), summ

    def branch(self, s: IfThenElse) -> tuple[Stmt, _Summary]:
        then, ts = self.plan(s.then_case)
        other, es = self.plan(s.else_case) if s.else_case is not None else (None, _Summary())
        divergent = any(id(v) in self.thread_vars for v in collect_vars(s.condition))
        if divergent and (ts.barrier or es.barrier):
            raise LowerError(
                f"InsertThreadSync {self.func_name}: threads communicate through shared memory "
                "inside a branch that depends on the thread index, where no barrier may stand; "
                "move the shared accesses out of the condition"
            )
        new = s.update(then_case=then, else_case=other)
        cond = self.accesses(Evaluate(s.condition))  # the condition is read before either branch
        if ts.barrier and es.barrier:
            return new, _Summary(cond + ts.head + es.head, ts.tail + es.tail, True)
        everything = cond + ts.head + ts.tail + es.head + es.tail
        return new, _Summary(everything, list(everything), False)


def _loops_under(s: Stmt) -> list[For]:
    found: list[For] = []

    def fn(n: Node) -> None:
        if isinstance(n, For):
            found.append(n)

    post_order_visit(s, fn)
    return found


def _wmma_store_tile(s: Stmt, ctx: tuple[For, ...]) -> _Access | None:
    """The write of a ``wmma_store_sync`` to shared memory: the 16 x 16 tile from its first
    element, rows as far apart as its first and second rows' first elements (every lane of
    the warp writes part of it)."""
    call = s.value if isinstance(s, Evaluate) else None
    if not isinstance(call, Call) or call.op != "wmma_store_sync":
        return None
    first, _, second = call.args[:3]
    if not (isinstance(first, BufferLoad) and isinstance(second, BufferLoad)):
        return None
    if first.buffer.scope not in _SHARED or len(first.indices) != 1:
        return None
    base = first.indices[0]
    dt = base.dtype
    r, c = Var("wmma_row", dt), Var("wmma_col", dt)
    rows = tuple(For(v, IntImm(dt, 0), IntImm(dt, 16), ForKind.SERIAL, Evaluate(IntImm(dt, 0)))
                 for v in (r, c))  # fmt: skip
    index = base + r * (second.indices[0] - base) + c
    return _Access(first.buffer, True, Footprint((index,), (*ctx, *rows)))


def _exprs(s: Stmt) -> list[Expr]:
    if isinstance(s, BufferStore):
        return [s.value, *s.indices]
    if isinstance(s, WarpShuffle):
        return [s.value, s.index, s.lane]
    if isinstance(s, Evaluate):
        return [s.value]
    return []


class InsertThreadSync(FunctionPass):
    """Insert the barriers shared-memory communication needs (see the module docstring)."""

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Return ``func`` with ``ThreadSync`` statements where needed."""
        body, _ = _Planner(func.name).plan(func.body)
        return func.update(body=body)
