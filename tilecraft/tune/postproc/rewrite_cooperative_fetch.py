"""RewriteCooperativeFetch: spread each shared-memory copy over the threads of its GPU block.

Before: a block annotated :data:`~.keys.COOPERATIVE_FETCH` (a ``shared`` read cache placed
under the thread loops of its consumer) copies its whole tile in every thread: its own loops
(those below the loops it shares with its consumer) run serially.
After: those loops are fused and split by ``[None, threads, vector]`` (``[None, threads]``
for vector 1), the ``threads`` part bound to the ``threadIdx.x`` extent of the enclosing
kernel and the ``vector`` part vectorized: each thread copies every ``threads``-th vector.
The vector is the widest power of two up to the annotation that divides the tile's rows,
the source's rows and the tile's elements per thread, so every vector load is contiguous and
unguarded. The annotation is gone. Meaning is unchanged: the copy writes the same elements.
"""

from __future__ import annotations

from ...ir import Block, BufferLoad, BufferStore, For, IntImm, post_order_visit
from ...schedule import BlockRV, LoopRV, Schedule
from .base import Postproc
from .keys import COOPERATIVE_FETCH


def _fetch_blocks(sch: Schedule) -> list[BlockRV]:
    """The blocks annotated for a cooperative fetch."""
    names: list[str] = []

    def visit(node: object) -> None:
        if isinstance(node, Block) and COOPERATIVE_FETCH in node.annotations:
            names.append(node.name)

    post_order_visit(sch.func.body, visit)
    return [sch.get_block(n) for n in names]


def _own_loops(sch: Schedule, block: BlockRV) -> tuple[list[LoopRV], int | None]:
    """The loops of ``block`` below those shared with its consumers, and the ``threadIdx.x``
    extent of the loops around it (None when none is bound)."""
    shared: set[int] = set()
    for consumer in sch.get_consumers(block):
        shared |= {id(sch.get(lp)) for lp in sch.get_loops(consumer)}
    own: list[LoopRV] = []
    threads = None
    for lp in sch.get_loops(block):
        node = sch.get(lp)
        assert isinstance(node, For)
        if node.thread == "threadIdx.x" and isinstance(node.extent, IntImm):
            threads = node.extent.value
        if id(node) not in shared:
            own.append(lp)
    return own, threads


def fetch_vector(
    sch: Schedule, block: BlockRV, loops: list[LoopRV], threads: int, widest: int
) -> int:
    """The widest vector up to ``widest`` that the copy's rows, its source's rows and its
    elements per thread allow (1 for a copy that is not a plain load)."""
    node = sch.get(block)
    store = getattr(node, "body", None)
    if not isinstance(store, BufferStore) or not isinstance(store.value, BufferLoad):
        return 1
    extents = [getattr(sch.get(lp), "extent", None) for lp in loops]
    if not extents or not all(isinstance(e, IntImm) for e in extents):
        return 1
    total = 1
    for e in extents:
        total *= e.value  # type: ignore[union-attr]
    inner = extents[-1].value  # type: ignore[union-attr]
    row = store.value.buffer.shape[-1] if store.value.buffer.shape else None
    if not isinstance(row, IntImm):
        return 1
    lanes = 1
    while lanes * 2 <= widest:
        lanes *= 2
    while lanes > 1 and (inner % lanes or row.value % lanes or total % (threads * lanes)):
        lanes //= 2
    return lanes


class RewriteCooperativeFetch(Postproc):
    """Spread annotated shared-memory copies over the block's threads (module docstring)."""

    name = "rewrite_cooperative_fetch"

    def apply(self, sch: Schedule) -> bool:
        """Rewrite every annotated copy; False when one has no thread loop around it."""
        for block in _fetch_blocks(sch):
            widest = sch.get(block).annotations[COOPERATIVE_FETCH]  # type: ignore[union-attr]
            widest = widest.value if isinstance(widest, IntImm) else widest
            sch.unannotate(block, COOPERATIVE_FETCH)
            loops, threads = _own_loops(sch, block)
            if threads is None or not isinstance(widest, int):
                return False
            if not loops:
                continue
            lanes = fetch_vector(sch, block, loops, threads, widest)
            fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
            if lanes > 1:
                _, tx, vec = sch.split(fused, [None, threads, lanes])
                sch.vectorize(vec)
            else:
                _, tx = sch.split(fused, [None, threads])
            sch.bind(tx, "threadIdx.x")
        return True
