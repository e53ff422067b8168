"""Shape the thread loops of a GPU kernel after buffer compaction.

Before: blocks lowered to loops and buffers compacted (:class:`CompactBufferAllocation` with
thread loops kept); a ``shared`` allocation may sit where its accesses meet (inside
``threadIdx`` loops, so that it was compacted to one iteration's tile); loops may be bound to
``vthread``.
After:  :class:`HoistSharedAllocations` moves every ``shared``/``shared.dyn`` allocation above
the outermost ``threadIdx``/``vthread`` loop around it: on a GPU a shared buffer is one copy
per thread block whatever the statement that declares it, and the emulator and the barrier
pass see that copy where it lives. :class:`LowerVirtualThreads` injects each ``vthread``
loop: the ``local`` buffers allocated under it get one copy per virtual thread (a new leading
dimension indexed by the virtual thread), and the loop is pushed down into the statements,
through sequences, loops, allocations and uniform conditions, to the innermost statements
that depend on it, where it stays as an unrolled loop: the virtual threads' iterations
interleave there. A statement that does not depend on it and does not read what it writes
(the cooperative fetch of a shared stage, which compaction relaxed over the virtual threads;
a barrier) runs once for all of them.
"""

from __future__ import annotations

from ..ir import (
    Allocate,
    Buffer,
    BufferLoad,
    BufferStore,
    Expr,
    For,
    ForKind,
    IfThenElse,
    Mutator,
    Node,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
    post_order_visit,
    seq,
    uses_var,
)
from ..ir.transform import FunctionPass

_SHARED = ("shared", "shared.dyn")


def _is_thread(loop: For) -> bool:
    return loop.kind is ForKind.THREAD_BINDING and (loop.thread or "").startswith(
        ("threadIdx", "vthread")
    )


class _Hoister(Mutator):
    def __init__(self) -> None:
        super().__init__()
        self.depth = 0  # enclosing threadIdx/vthread loops
        self.hoisted: list[Allocate] = []

    def visit_For(self, loop: For) -> Stmt:  # noqa: N802
        if not _is_thread(loop):
            return self.generic_visit(loop)  # type: ignore[no-any-return]
        self.depth += 1
        mark = len(self.hoisted)
        new: Stmt = self.generic_visit(loop)
        self.depth -= 1
        if self.depth:
            return new
        for alloc in reversed(self.hoisted[mark:]):
            new = Allocate(alloc.buffer, new)
        del self.hoisted[mark:]
        return new

    def visit_Allocate(self, alloc: Allocate) -> Stmt:  # noqa: N802
        body: Stmt = self.visit(alloc.body)
        if self.depth and alloc.buffer.scope in _SHARED:
            self.hoisted.append(alloc)
            return body
        return alloc.update(body=body)


class HoistSharedAllocations(FunctionPass):
    """Move shared allocations above the thread loops around them (see the module doc)."""

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Return ``func`` with its shared allocations outside its thread loops."""
        return func.update(body=_Hoister().visit(func.body))


class _VirtualThreads(Mutator):
    def visit_For(self, loop: For) -> Stmt:  # noqa: N802
        loop = self.generic_visit(loop)
        if loop.kind is ForKind.THREAD_BINDING and (loop.thread or "").startswith("vthread"):
            body = _PerVirtualThread(loop.loop_var, loop.extent).visit(loop.body)
            return _Injector(loop.update(kind=ForKind.UNROLLED, thread=None)).push(body)
        return loop


class _PerVirtualThread(Mutator):
    """Give each ``local`` buffer allocated under a vthread loop one copy per virtual thread."""

    def __init__(self, var: Var, extent: Expr) -> None:
        super().__init__()
        self.var = var
        self.extent = extent
        self.expanded: dict[int, Buffer] = {}

    def visit_Allocate(self, alloc: Allocate) -> Stmt:  # noqa: N802
        buf = alloc.buffer
        if buf.scope == "local":
            self.expanded[id(buf)] = Buffer(buf.name, (self.extent, *buf.shape), buf.dtype,
                                            buf.scope)  # fmt: skip
            new = self.expanded[id(buf)]
            return alloc.update(buffer=new, body=self.visit(alloc.body))
        return self.generic_visit(alloc)  # type: ignore[no-any-return]

    def visit_BufferLoad(self, load: BufferLoad) -> Expr:  # noqa: N802
        load = self.generic_visit(load)
        new = self.expanded.get(id(load.buffer))
        return load if new is None else BufferLoad(new, (self.var, *load.indices))

    def visit_BufferStore(self, store: BufferStore) -> Stmt:  # noqa: N802
        store = self.generic_visit(store)
        new = self.expanded.get(id(store.buffer))
        if new is None:
            return store
        return BufferStore(new, store.value, (self.var, *store.indices))


class _Injector:
    """Push one (unrolled) virtual-thread loop down to the statements depending on it."""

    def __init__(self, loop: For) -> None:
        self.loop = loop
        self.var = loop.loop_var

    def push(self, s: Stmt) -> Stmt:
        if not uses_var(s, self.var) and _idempotent(s):
            return s  # the same for every virtual thread: once for all
        if isinstance(s, SeqStmt):
            return seq(*(self.push(c) for c in s.stmts))
        if (
            isinstance(s, For)
            and not uses_var(s.min, self.var)
            and not uses_var(s.extent, self.var)
        ):
            return s.update(body=self.push(s.body))
        if isinstance(s, Allocate) and not any(uses_var(d, self.var) for d in s.buffer.shape):
            return s.update(body=self.push(s.body))
        if isinstance(s, IfThenElse) and not uses_var(s.condition, self.var):
            other = None if s.else_case is None else self.push(s.else_case)
            return s.update(then_case=self.push(s.then_case), else_case=other)
        return self.loop.update(body=s)


def _idempotent(s: Stmt) -> bool:
    """True when running ``s`` twice in a row has the effect of running it once: it reads no
    buffer it writes (a copy, a fill, a barrier)."""
    written: set[int] = set()
    read: set[int] = set()

    def fn(n: Node) -> None:
        if isinstance(n, BufferStore):
            written.add(id(n.buffer))
        elif isinstance(n, BufferLoad):
            read.add(id(n.buffer))

    post_order_visit(s, fn)
    return not written & read


class LowerVirtualThreads(FunctionPass):
    """Run ``vthread`` loops as unrolled loops inside each thread (see the module doc)."""

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Return ``func`` without ``vthread`` loops."""
        return func.update(body=_VirtualThreads().visit(func.body))
