"""Shape the thread loops of a GPU kernel after buffer compaction.

Before: blocks lowered to loops and buffers compacted (:class:`CompactBufferAllocation` with
thread loops kept); a ``shared`` allocation may sit where its accesses meet (inside
``threadIdx`` loops, so that it was compacted to one iteration's tile); loops may be bound to
``vthread``.
After:  :class:`HoistSharedAllocations` moves every ``shared``/``shared.dyn`` allocation above
the outermost ``threadIdx``/``vthread`` loop around it: on a GPU a shared buffer is one copy
per thread block whatever the statement that declares it, and the emulator and the barrier
pass see that copy where it lives. :class:`LowerVirtualThreads` turns each ``vthread`` loop
into an unrolled serial loop: the virtual threads of a thread run one after another in it
(their register tiles were sized for all of them by compaction).
"""

from __future__ import annotations

from ..ir import Allocate, For, ForKind, Mutator, PrimFunc, Stmt
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
    def visit_For(self, loop: For) -> For:  # noqa: N802
        loop = self.generic_visit(loop)
        if loop.kind is ForKind.THREAD_BINDING and (loop.thread or "").startswith("vthread"):
            return loop.update(kind=ForKind.UNROLLED, thread=None)
        return loop


class LowerVirtualThreads(FunctionPass):
    """Run ``vthread`` loops as unrolled loops inside each thread (see the module doc)."""

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Return ``func`` without ``vthread`` loops."""
        return func.update(body=_VirtualThreads().visit(func.body))
