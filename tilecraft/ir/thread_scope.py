"""Which thread indices share a storage scope: the rule behind region relaxation.

A buffer of scope ``global`` is one copy for the whole grid, ``shared`` one copy per thread
block, ``local`` one copy per thread. A loop bound to a thread index that *shares* the copy
(every thread of a block sees the same ``shared`` buffer) iterates, on a GPU, in parallel over
that one buffer: the region a statement under the loop touches is the union over all the loop's
values. ``compute_at`` (what a producer must compute) and buffer compaction (how big the buffer
must be) therefore relax the buffer's region over such loops, and keep the others fixed:

========================  =====================================================
scope                     thread loops relaxed
========================  =====================================================
``global``                all (``blockIdx``, ``threadIdx``, ``vthread``)
``shared``/``shared.dyn`` ``threadIdx`` and ``vthread``
``warp``                  ``threadIdx.x`` (the lanes of one warp)
``local`` and others      none (private to the thread)
========================  =====================================================
"""

from __future__ import annotations

from .stmt import For, ForKind


def thread_relaxes(scope: str, thread: str) -> bool:
    """True when the threads iterating ``thread`` share one copy of a ``scope`` buffer.

    Parameters
    ----------
    scope
        A storage scope (``"global"``, ``"shared"``, ``"local"``, ...).
    thread
        A thread tag (``"blockIdx.x"``, ``"threadIdx.y"``, ``"vthread"``, ...).
    """
    if scope == "global":
        return True
    if scope.startswith("shared"):
        return thread.startswith(("threadIdx", "vthread"))
    if scope == "warp":
        return thread == "threadIdx.x"
    return False


def relaxed_loop(scope: str, loop: For) -> bool:
    """True when ``loop`` is bound to a thread index that shares a ``scope`` buffer."""
    return (
        loop.kind is ForKind.THREAD_BINDING
        and loop.thread is not None
        and thread_relaxes(scope, loop.thread)
    )
