"""``Transpose``: a layout change whose output's contiguous axis is strided in its input.

``B[..., j, ..., i] = A[..., i, ..., j]``-like blocks (``topi.transpose``, a permutation that
moves the innermost axis, with elementwise producers inlined): written naively, either the
reads or the writes are strided. Each thread block moves a ``tile x tile`` tile through
shared memory: it reads rows of ``A`` (consecutive threads on consecutive elements of ``A``'s
innermost axis), then writes rows of ``B`` (consecutive threads on ``B``'s innermost axis),
reading the tile's columns from shared memory. The shared tile's rows are padded by one
element (``storage_align``) so a column read touches ``tile`` different banks. Any rank, any
extents (a guard on the edge tiles), symbolic extents included.

Declines functions with more than one block left after inlining, a reduction, and blocks
whose output's innermost index is also innermost in every input (no transpose: ``Fallback``
writes them coalesced already).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir import BufferLoad, PrimFunc, Var
from ...schedule import BlockRV, ExprRV, Schedule
from ...target import Target
from ..base import Decline
from ..common import block_node, loads_of, open_schedule
from ._rows import inline_spatial, is_reduction_block
from .config import GPUArchRule, require_arch


@dataclass(frozen=True)
class TransposeConfig:
    """The numbers of :class:`Transpose`.

    Attributes
    ----------
    tile
        Edge of the square tile a thread block moves (a warp's width: one warp reads one
        tile row).
    rows
        Tile rows moved at once: ``tile * rows`` threads per block.
    rows_choices
        The candidates sampled for ``rows`` when the rule is tunable.
    """

    tile: int = 32
    rows: int = 8
    rows_choices: tuple[int, ...] = (4, 8, 16)

    @classmethod
    def for_target(cls, target: Target) -> TransposeConfig:
        """A warp-wide tile: 32 x 32 with 256 threads on every architecture."""
        return cls(tile=require_arch(target).warp_size, rows=8)


def _transposed_read(sch: Schedule, block: BlockRV) -> tuple[int, Var, Var] | str:
    """(read index, output's innermost iterator, input's innermost iterator), or why not."""
    node = block_node(sch, block)
    store = node.body
    indices = getattr(store, "indices", ())
    if not indices or not isinstance(indices[-1], Var):
        return f'block "{node.name}": its output\'s innermost index is not one iterator'
    out_inner = indices[-1]
    for load in loads_of(node.body):
        if not isinstance(load, BufferLoad) or len(load.indices) < 2:
            continue
        inner = load.indices[-1]
        if not isinstance(inner, Var) or inner is out_inner:
            continue
        if any(i is out_inner for i in load.indices[:-1]):
            at = next(n for n, r in enumerate(node.reads) if r.buffer is load.buffer)
            return at, out_inner, inner
    return f'block "{node.name}": its output\'s innermost axis is innermost in its inputs too'


def _schedule(sch: Schedule, block: BlockRV, cfg: TransposeConfig, tunable: bool,
              read: int, out_inner: Var, in_inner: Var) -> None:  # fmt: skip
    """Tile, stage the tile through padded shared memory, bind (module docstring)."""
    realize = sch.get_realize(block)
    by_var = {id(v.var): value for v, value in zip(realize.block.iter_vars, realize.iter_values,
                                                    strict=True)}  # fmt: skip
    loops = sch.get_loops(block)
    li = next(lp for lp in loops if by_var[id(in_inner)] is lp.var)
    lj = next(lp for lp in loops if by_var[id(out_inner)] is lp.var)
    others = [lp for lp in loops if lp.var is not li.var and lp.var is not lj.var]
    io, ii = sch.split(li, [None, cfg.tile])
    jo, ji = sch.split(lj, [None, cfg.tile])
    sch.reorder(*others, io, jo, ii, ji)
    bx = sch.fuse(*others, io, jo)
    sch.bind(bx, "blockIdx.x")
    shared = sch.cache_read(block, read, "shared")
    sch.compute_at(shared, bx)
    ndim = len(block_node(sch, shared).writes[0].buffer.shape)
    sch.storage_align(shared, 0, ndim - 2, cfg.tile, 1)
    n = len(cfg.rows_choices)
    rows: int | ExprRV = (
        sch.sample_categorical(list(cfg.rows_choices), [1.0 / n] * n) if tunable else cfg.rows
    )
    for stage in (shared, block):
        below = sch.get_loops(stage)[1:]
        fused = below[0] if len(below) == 1 else sch.fuse(*below)
        _, ty, tx = sch.split(fused, [None, rows, cfg.tile])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")


class Transpose(GPUArchRule):
    """Transposes through padded shared-memory tiles (module docstring)."""

    Config = TransposeConfig

    def schedule(
        self, func: PrimFunc, target: Target, cfg: TransposeConfig, tunable: bool
    ) -> Schedule | Decline:
        """Schedule ``func`` or decline (see the module docstring)."""
        # Step 1. One spatial block after inlining, reading some input transposed.
        got = open_schedule(func)
        if isinstance(got, str):
            return Decline(got)
        sch, infos = got
        if any(is_reduction_block(b) or b.is_opaque() for b in infos):
            return Decline("a reduction or opaque block: not a layout change")
        blocks = inline_spatial(sch, infos)
        if len(blocks) != 1:
            return Decline(f"{len(blocks)} blocks left after inlining; a transpose is one")
        found = _transposed_read(sch, blocks[0].block_rv)
        if isinstance(found, str):
            return Decline(found)
        # Step 2. The tiled schedule through shared memory.
        done = sch.try_(_schedule, sch, blocks[0].block_rv, cfg, tunable, *found)
        if not done:
            return Decline(f"the tiled schedule failed: {done.error.short if done.error else ''}")
        return sch
