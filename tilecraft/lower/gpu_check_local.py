"""Reject ``local`` buffers that threads of a block read from each other.

Before: blocks lowered to loops, thread loops kept (CUDA lowering), buffers not compacted.
After:  unchanged; a :class:`~tilecraft.errors.LowerError` is raised when a thread reads an
element of a ``local`` buffer that other threads of the block write and it does not.

A ``local`` buffer is per-thread storage on a GPU (registers): each thread has its own copy,
so a thread reading an element another thread wrote reads its own, never-written copy. The
schedule's serial meaning (every thread loop a plain loop, one buffer for all) computes the
right result, so the emulator in serial mode and the numerical tests agree with numpy while
the CUDA code is silently wrong. Such a buffer is rejected rather than promoted to ``shared``:
promoting would change the memory the schedule asked for (its size counts against the shared
memory limit and occupancy, and it needs barriers), and would hide a scheduling mistake from
the rule or tuner that made it; the error says to use the ``shared`` scope or to compute the
stage under the thread loops that read it. Only proven cases are rejected (the element sets
of two accesses, evaluated over the block's threads by :mod:`._thread_access`).
"""

from __future__ import annotations

from ..errors import LowerError
from ..ir import (
    Allocate,
    Buffer,
    BufferLoad,
    BufferStore,
    For,
    ForKind,
    Node,
    PrimFunc,
    Stmt,
    post_order_visit,
)
from ..ir.transform import FunctionPass
from ..ir.visitor import iter_children
from ._thread_access import Footprint, launch_extents, reads_foreign


class _Collector:
    """Walk a function; for each ``local`` allocation in a kernel, its accesses."""

    def __init__(self) -> None:
        self.loops: list[For] = []
        self.launch: dict[str, int] | None = None
        self.open: dict[int, tuple[Allocate, int]] = {}  # buffer -> (allocation, its depth)
        self.found: list[tuple[Allocate, int, list[tuple[bool, Footprint]]]] = []
        self.accesses: dict[int, list[tuple[bool, Footprint]]] = {}

    def access(self, buf: Buffer, indices: tuple, write: bool) -> None:  # type: ignore[type-arg]
        if id(buf) in self.open:
            self.accesses[id(buf)].append((write, Footprint(indices, tuple(self.loops))))

    def exprs(self, node: Node) -> None:
        def fn(n: Node) -> None:
            if isinstance(n, BufferLoad):
                self.access(n.buffer, n.indices, False)

        post_order_visit(node, fn)

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, For):
            root = s.kind is ForKind.THREAD_BINDING and self.launch is None
            if root:
                self.launch = launch_extents(_loops_under(s))
            self.loops.append(s)
            self.stmt(s.body)
            self.loops.pop()
            if root:
                self.launch = None
            return
        if isinstance(s, Allocate) and s.buffer.scope == "local" and self.launch is not None:
            self.open[id(s.buffer)] = (s, len(self.loops))
            self.accesses[id(s.buffer)] = []
            self.stmt(s.body)
            del self.open[id(s.buffer)]
            self.found.append((s, len(self.loops), self.accesses.pop(id(s.buffer))))
            self.check(s, len(self.loops), self.found[-1][2])
            return
        if isinstance(s, BufferStore):
            self.exprs(s.value)
            for i in s.indices:
                self.exprs(i)
            self.access(s.buffer, s.indices, True)
            return
        for child in iter_children(s):
            if isinstance(child, Stmt):
                self.stmt(child)
            elif isinstance(child, Node):
                self.exprs(child)

    def check(self, alloc: Allocate, depth: int, accesses: list[tuple[bool, Footprint]]) -> None:
        launch = self.launch
        assert launch is not None
        writes = [fp for w, fp in accesses if w]
        reads = [fp for w, fp in accesses if not w]
        if reads_foreign(writes, reads, depth, launch):
            shown = ", ".join(_show(fp) for fp in reads[:2])
            raise LowerError(
                f"GPU lowering: threads read elements of local buffer {alloc.buffer.name!r} "
                f"that only other threads write (reads at {shown}); a local buffer is "
                "private to each thread on a GPU, so the reading thread would see its own, "
                "unwritten copy. Use the 'shared' scope for a stage the threads of a block "
                "exchange, or compute the local stage under the thread loops that read it "
                "(compute_at below them)"
            )


def _show(fp: Footprint) -> str:
    return "[" + ", ".join(i.script() for i in fp.indices) + "]"


def _loops_under(s: Stmt) -> list[For]:
    found: list[For] = []

    def fn(n: Node) -> None:
        if isinstance(n, For):
            found.append(n)

    post_order_visit(s, fn)
    return found


class CheckLocalPrivate(FunctionPass):
    """Raise when threads read each other's ``local`` elements (see the module docstring)."""

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Check ``func``; it is returned unchanged."""
        _Collector().stmt(func.body)
        return func
