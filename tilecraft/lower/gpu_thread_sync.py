"""Insert ``__syncthreads()`` where threads of a block communicate through shared memory.

Before: lowered GPU code (flat buffers, thread-bound loops, shared-scope allocations).
After:  a :class:`~.gpu_nodes.ThreadSync` stands before every statement that touches a shared
buffer location another thread of the block touched since the last barrier, when one of the
two accesses is a write (read-after-write, write-after-read, write-after-write); and at the end
of a loop body when such a dependence is carried from one iteration into the next. Accesses of
one thread to its own locations (the same index, injective in the thread indices) need no
barrier, and no barrier is added anywhere else. Barriers are never placed under a branch whose
condition depends on the thread index (every thread must reach them); a dependence that would
need one there raises :class:`~tilecraft.errors.LowerError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import LowerError
from ..ir import (
    Add,
    Allocate,
    Buffer,
    BufferLoad,
    BufferStore,
    Cast,
    Evaluate,
    Expr,
    FloorDiv,
    FloorMod,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    LetStmt,
    Max,
    Min,
    Mul,
    Node,
    PrimFunc,
    SeqStmt,
    Stmt,
    Sub,
    Var,
    collect_vars,
    post_order_visit,
    seq,
    structural_equal,
)
from ..ir.transform import FunctionPass
from .gpu_nodes import ThreadSync, WarpShuffle

_SHARED = ("shared", "shared.dyn")
_MAX_ENUM = 4096


@dataclass(frozen=True)
class _Access:
    buffer: Buffer
    index: Expr
    write: bool
    threads: tuple[For, ...]  # enclosing threadIdx loops


@dataclass
class _Summary:
    head: list[_Access] = field(default_factory=list)  # before the first barrier
    tail: list[_Access] = field(default_factory=list)  # after the last barrier
    barrier: bool = False


def _eval(e: Expr, env: dict[int, np.ndarray]) -> np.ndarray | None:
    """Vectorized integer evaluation of index expressions (None: not supported)."""
    if isinstance(e, IntImm):
        return np.asarray(e.value, dtype=np.int64)
    if isinstance(e, Var):
        return env.get(id(e), np.asarray(0, dtype=np.int64))
    if isinstance(e, Cast):
        return _eval(e.value, env)
    ops: dict[type, Any] = {
        Add: np.add,
        Sub: np.subtract,
        Mul: np.multiply,
        FloorDiv: np.floor_divide,
        FloorMod: np.mod,
        Min: np.minimum,
        Max: np.maximum,
    }
    fn = ops.get(type(e))
    if fn is None:
        return None
    a, b = _eval(e.a, env), _eval(e.b, env)  # type: ignore[attr-defined]
    if a is None or b is None:
        return None
    if fn in (np.floor_divide, np.mod) and np.any(b == 0):
        return None
    return fn(a, b)  # type: ignore[no-any-return]


def _thread_private(a: _Access, b: _Access) -> bool:
    """True when ``a`` and ``b`` touch, in every thread, a location no other thread touches."""
    if not structural_equal(a.index, b.index):
        return False
    loops = [lp for lp in a.threads if not (isinstance(lp.extent, IntImm) and lp.extent.value == 1)]
    if any(not isinstance(lp.extent, IntImm) for lp in loops):
        return False
    exts = [lp.extent.value for lp in loops]  # type: ignore[attr-defined]
    if int(np.prod(exts, dtype=np.int64)) > _MAX_ENUM:
        return False
    grids = np.meshgrid(*[np.arange(n, dtype=np.int64) for n in exts], indexing="ij")
    env = {id(lp.loop_var): g.ravel() for lp, g in zip(loops, grids, strict=True)}
    values = _eval(a.index, env)
    if values is None:
        return False
    values = np.broadcast_to(values, (int(np.prod(exts, dtype=np.int64)),))
    return len(np.unique(values)) == values.size


def _conflict(earlier: list[_Access], later: list[_Access]) -> bool:
    for a in earlier:
        for b in later:
            if a.buffer is b.buffer and (a.write or b.write) and not _thread_private(a, b):
                return True
    return False


class _Planner:
    def __init__(self, func_name: str) -> None:
        self.func_name = func_name
        self.threads: list[For] = []
        self.thread_vars: set[int] = set()

    def accesses(self, s: Stmt) -> list[_Access]:
        found: list[_Access] = []
        ctx = tuple(self.threads)

        def fn(n: Node) -> None:
            if isinstance(n, BufferLoad) and n.buffer.scope in _SHARED:
                found.append(_Access(n.buffer, n.indices[0], False, ctx))

        for value in _exprs(s):
            post_order_visit(value, fn)
        if isinstance(s, BufferStore) and s.buffer.scope in _SHARED:
            found.append(_Access(s.buffer, s.indices[0], True, ctx))
        elif isinstance(s, WarpShuffle) and s.buffer.scope in _SHARED:
            found.append(_Access(s.buffer, s.index, True, ctx))
        return found

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
            if _conflict(pending, cs.head):
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
        if is_thread and (s.thread or "").startswith("threadIdx"):
            self.threads.append(s)
            self.thread_vars.add(id(s.loop_var))
        try:
            body, summ = self.plan(s.body)
        finally:
            if is_thread and self.threads and self.threads[-1] is s:
                self.threads.pop()
        if is_thread:
            return s.update(body=body), summ
        single = isinstance(s.extent, IntImm) and s.extent.value <= 1
        if not single and _conflict(summ.tail, summ.head):
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
