"""UnrollLocalTiles: unroll the loops that index a GPU thread's local tile, so it lives in
registers.

Before: a leaf block under a ``threadIdx`` loop reads or writes a ``local`` buffer (a
thread's accumulator tile, from a write cache) at indices that depend on serial loops below
the thread loops; unless a sampled unroll budget happens to cover them, the CUDA compiler
keeps such a buffer in (slow, stack) local memory: a register can't be indexed at run time.
After: those loops are ``unroll`` loops (when their extents multiply to at most
``max_unrolled`` per block), so every index of the tile is a constant and the tile is kept
in registers. Loops that index only other buffers (the reduction between a thread's tiles)
stay as they are. Meaning is unchanged.
"""

from __future__ import annotations

from ...ir import (
    Block,
    BlockRealize,
    BufferLoad,
    BufferStore,
    For,
    ForKind,
    IntImm,
    Var,
    collect_vars,
    post_order_visit,
)
from ...schedule import BlockRV, LoopRV, Schedule
from .base import Postproc
from .rewrite_parallel_vectorize_unroll import leaves

MAX_UNROLLED = 1024
"""Largest number of iterations the unrolled loops of one block may multiply to."""


def local_index_vars(block: Block) -> set[int]:
    """Ids of the variables in the indices of the ``local`` buffers ``block`` accesses."""
    found: set[int] = set()

    def visit(node: object) -> None:
        if isinstance(node, BufferLoad | BufferStore) and node.buffer.scope == "local":
            for index in node.indices:
                found.update(id(v) for v in collect_vars(index))

    for part in (block.body, block.init):
        if part is not None:
            post_order_visit(part, visit)
    return found


def tile_loops(sch: Schedule, block: BlockRV) -> list[LoopRV]:
    """The serial loops below the block's thread loops that index its ``local`` buffers."""
    realize: BlockRealize = sch.get_realize(block)
    local = local_index_vars(realize.block)
    loop_vars: set[int] = set()
    for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True):
        if id(iv.var) in local:
            loop_vars.update(id(v) for v in collect_vars(value) if isinstance(v, Var))
    out: list[LoopRV] = []
    threaded = False
    for lp in sch.get_loops(block):
        node = sch.get(lp)
        assert isinstance(node, For)
        if node.kind is ForKind.THREAD_BINDING:
            threaded = threaded or str(node.thread).startswith("threadIdx")
        elif threaded and node.kind is ForKind.SERIAL and id(node.loop_var) in loop_vars:
            out.append(lp)
    return out


class UnrollLocalTiles(Postproc):
    """Unroll the loops indexing each thread's local tile (see the module docstring).

    Parameters
    ----------
    max_unrolled
        See :data:`MAX_UNROLLED`.
    """

    name = "unroll_local_tiles"

    def __init__(self, max_unrolled: int = MAX_UNROLLED) -> None:
        self.max_unrolled = max_unrolled

    def apply(self, sch: Schedule) -> bool:
        """Unroll what can be; always True."""
        body = sch.func.body
        if not isinstance(body, BlockRealize):
            return True
        for leaf in leaves(sch, sch.get_block(body.block.name)):
            loops = tile_loops(sch, leaf)
            total = 1
            for lp in loops:
                extent = getattr(sch.get(lp), "extent", None)
                total *= extent.value if isinstance(extent, IntImm) else self.max_unrolled + 1
            if loops and total <= self.max_unrolled:
                for lp in loops:
                    sch.unroll(lp)
        return True
