"""The row schedule shared by ``Reduction``, ``GeneralReduction`` and ``RMSNorm``.

A *row computation* is a chain of blocks — reductions and the elementwise stages around them —
whose last block (the *anchor*) can be cut into independent *rows*: the anchor's iterators that
index the reductions' outputs (or, for a reduction anchor, its spatial iterators) are the row
iterators, the others (its reduce iterators, or the broadcast axis of a normalisation) are the
*columns*. The schedule:

1. inline every intermediate block without reduction (``compute_inline``, else
   ``reverse_compute_inline``);
2. put the anchor's row loops first (``reorder``) and compute every earlier block under the
   innermost row loop (``compute_at``, before any thread binding so no region is relaxed over
   ``blockIdx``); a move that would compute some element twice (a row loop binding none of
   the block's iterators alone: group norm's per-group statistics under a per-channel row) is
   undone and the block gets a kernel of its own;
3. map rows and columns to threads in one of two layouts:

   * **threads across the row** (the reduced axes are innermost in memory, and the row is at
     least a warp long or symbolic): one thread block per row; every stage walks the row with
     ``threads`` threads, consecutive threads reading consecutive elements, and each reduction
     ends with a cross-thread combine (warp shuffles, then shared memory) that leaves the row
     statistic in every thread's registers;
   * **one thread per row** (the reduced axis is not innermost — ``sum(x, axis=1)`` of an
     NCHW tensor, softmax over channels — or the row is shorter than a warp): rows are
     spread over threads and blocks, consecutive threads taking consecutive rows (adjacent in
     memory along the innermost spatial axis, so every load is coalesced), each thread
     walking its row serially with its statistics in registers. No shared memory at all, so
     no reduced-axis length can overflow it;

4. the intermediate statistics live in registers (``set_scope(..., "local")``).

Symbolic row counts and row lengths work in both layouts (a guard on the last split).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from ...errors import ScheduleError
from ...ir import BufferLoad, IterKind, Var, collect_vars, walk
from ...schedule import BlockRV, ExprRV, LoopRV, Schedule
from ...schedule.analysis import BlockInfo, detect_reduction, normalize_prim_func
from ...target import Target
from ..common import (
    attempt,
    block_node,
    bound_alone,
    loop_extent,
    loops_below,
    writes_param,
)
from ..common import product as _product
from .config import require_arch

_C = TypeVar("_C", bound="RowConfig")


@dataclass(frozen=True)
class RowConfig:
    """The numbers of the row schedule.

    Attributes
    ----------
    warp_size
        Threads per warp: rows shorter than this take one thread per row.
    max_row_threads
        Threads walking one row (threads across the row); fewer for a short constant row.
    row_threads_choices
        The candidates sampled for ``max_row_threads`` when the rule is tunable.
    threads_per_block
        Threads of a block in the one-thread-per-row layout and in flat kernels.
    """

    warp_size: int = 32
    max_row_threads: int = 256
    row_threads_choices: tuple[int, ...] = (64, 128, 256, 512)
    threads_per_block: int = 256

    @classmethod
    def for_target(cls: type[_C], target: Target) -> _C:
        """The defaults within the limits of ``target``'s architecture (``gpu_arch``)."""
        arch = require_arch(target)
        cap = arch.max_threads_per_block
        return cls(
            warp_size=arch.warp_size,
            max_row_threads=min(256, cap),
            row_threads_choices=tuple(t for t in (64, 128, 256, 512) if t <= cap),
            threads_per_block=min(256, cap),
        )

    def sample_row_threads(self, sch: Schedule) -> ExprRV:
        """A sampling instruction over :attr:`row_threads_choices` (the tunable knob)."""
        n = len(self.row_threads_choices)
        return sch.sample_categorical(list(self.row_threads_choices), [1.0 / n] * n)


Factor = int | ExprRV


def pow2_at_least(n: int) -> int:
    """The smallest power of two that is at least ``n``."""
    p = 1
    while p < n:
        p *= 2
    return p


def is_reduction_block(info: BlockInfo) -> bool:
    """Whether the block has reduce iterators."""
    return any(it.kind is IterKind.REDUCE for it in info.iters)


def inline_spatial(sch: Schedule, infos: Sequence[BlockInfo]) -> list[BlockInfo]:
    """Step 1: inline every intermediate block without reduction; the blocks left, analysed."""
    progress = True
    while progress:
        progress = False
        for b in normalize_prim_func(sch) or []:
            if is_reduction_block(b) or writes_param(sch, b.block_rv) or not b.iters:
                continue
            if attempt(sch, sch.compute_inline, b.block_rv) or attempt(
                sch, sch.reverse_compute_inline, b.block_rv
            ):
                progress = True
                break
    return normalize_prim_func(sch) or list(infos)


def row_vars(sch: Schedule, anchor: BlockInfo, others: Sequence[BlockInfo]) -> set[int]:
    """Ids of the anchor's row iterators (module docstring)."""
    if is_reduction_block(anchor):
        return {id(it.var) for it in anchor.iters if it.kind is IterKind.SPATIAL}
    written = {id(w.buffer) for b in others for w in b.writes}
    body = block_node(sch, anchor.block_rv).body
    rows: set[int] = set()
    for load in walk(body):
        if isinstance(load, BufferLoad) and id(load.buffer) in written:
            rows |= {id(v) for i in load.indices for v in collect_vars(i)}
    return rows


def _innermost_is_column(anchor: BlockInfo, rows: set[int]) -> bool:
    """Whether the anchor's innermost non-unit spatial iterator is a column (or has none)."""
    spatial = [it for it in anchor.iters if it.kind is IterKind.SPATIAL and not it.is_unit]
    if is_reduction_block(anchor):
        info = detect_reduction(anchor)
        return info is not None and info.reduce_innermost
    if len(spatial) == len([it for it in spatial if id(it.var) in rows]):
        return True  # no column: one element per row
    return id(spatial[-1].var) not in rows if spatial else True


def _reductions_innermost(blocks: Sequence[BlockInfo]) -> bool:
    for b in blocks:
        if is_reduction_block(b):
            info = detect_reduction(b)
            if info is None or not info.reduce_innermost:
                return False
    return True


@dataclass
class RowPlan:
    """The outcome of step 2: the anchor's row loops and the blocks computed under them."""

    sch: Schedule
    row: LoopRV | None
    inside: list[BlockRV]
    outside: list[BlockInfo]
    across: bool
    column: int | None
    whole: bool


def _move_under(sch: Schedule, blocks: Sequence[BlockInfo], prefix: Sequence[LoopRV],
                across: bool) -> tuple[list[BlockRV], list[BlockInfo]]:  # fmt: skip
    """Compute each earlier block under ``prefix[-1]`` (consumers first), or leave it."""
    inside: list[BlockRV] = []
    outside: list[BlockInfo] = []

    def move(block: BlockRV) -> None:
        sch.compute_at(block, prefix[-1])
        if not all(loop_extent(sch, lp) == 1 or bound_alone(sch, block, lp) for lp in prefix):
            raise ScheduleError("compute_at", f'block "{block.name}" would be computed twice')

    for b in reversed(blocks[:-1]):
        if across and not is_reduction_block(b):
            outside.append(b)  # a spatial stage under a row of threads would race on it
        elif attempt(sch, move, b.block_rv):
            inside.append(b.block_rv)
        else:
            outside.append(b)
    return inside[::-1], outside[::-1]


def plan_rows(sch: Schedule, blocks: Sequence[BlockInfo], cfg: RowConfig) -> RowPlan:
    """Steps 2 and the layout choice of step 3 (module docstring), on ``sch``."""
    anchor = blocks[-1]
    rows = row_vars(sch, anchor, blocks[:-1])
    row_loops = [it.loop_rv for it in anchor.iters if id(it.var) in rows]
    col_loops = [it.loop_rv for it in anchor.iters if id(it.var) not in rows]
    first = next((b for b in blocks if is_reduction_block(b)), anchor)
    red = anchor if is_reduction_block(anchor) else first
    column = _product([it.dom if isinstance(it.dom, int) else None
                       for it in red.iters if it.kind is IterKind.REDUCE])  # fmt: skip
    if not row_loops:  # one row (a full reduction): one thread block, no row loop
        return RowPlan(sch, None, [anchor.block_rv], list(blocks[:-1]), True, column, True)
    if col_loops:
        sch.reorder(*row_loops, *col_loops)
    across = (
        _reductions_innermost(blocks)
        and _innermost_is_column(anchor, rows)
        and (column is None or column >= cfg.warp_size)
    )
    inside, outside = _move_under(sch, blocks, row_loops, across)
    row = row_loops[0] if len(row_loops) == 1 else sch.fuse(*row_loops)
    return RowPlan(sch, row, [*inside, anchor.block_rv], outside, across, column, False)


def localize(sch: Schedule, blocks: Sequence[BlockRV]) -> None:
    """Step 4: the intermediate outputs of blocks computed in a row live in registers."""
    for b in blocks:
        if not writes_param(sch, b):
            attempt(sch, sch.set_scope, b, 0, "local")


def row_threads(cfg: RowConfig, column: int | None, sampled: Factor | None) -> Factor:
    """Threads walking one row: a power of two covering a short row, at most the maximum."""
    if sampled is not None:
        return sampled
    if column is None:
        return cfg.max_row_threads
    return max(cfg.warp_size, min(cfg.max_row_threads, pow2_at_least(column)))


def bind_across(sch: Schedule, plan: RowPlan, threads: Factor) -> None:
    """Threads across the row: a block per row, ``threads`` threads walking each stage."""
    if plan.row is not None:  # None: one row (a full reduction), one thread block
        sch.bind(plan.row, "blockIdx.x")
    for block in plan.inside:
        below = loops_below(sch, block, plan.row)
        if not below:
            below = [sch.add_unit_loop(block)]
        inner = below[0] if len(below) == 1 else sch.fuse(*below)
        outer, tx = sch.split(inner, [None, threads])
        sch.reorder(tx, outer)  # consecutive threads on consecutive elements, one combine
        sch.bind(tx, "threadIdx.x")


def bind_per_thread(sch: Schedule, loop: LoopRV, threads: Factor) -> None:
    """Spread ``loop``'s iterations over blocks of ``threads`` threads, one each."""
    bx, tx = sch.split(loop, [None, threads])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")


def flat_threads(cfg: RowConfig, extent: int | None) -> int:
    """Threads per block for ``extent`` independent iterations."""
    if extent is None:
        return cfg.threads_per_block
    return max(cfg.warp_size, min(cfg.threads_per_block, pow2_at_least(extent)))


def schedule_flat(
    sch: Schedule, block: BlockRV, cfg: RowConfig, sampled: Factor | None = None
) -> None:
    """A block on its own: its leading spatial loops fused and spread one per thread; the
    loops after them (reduce loops, or the rest of an opaque block's nest) serial per thread.
    A block without a leading spatial loop gets a unit loop to bind. ``sampled``: the threads
    per block drawn by a tunable rule."""
    realize = sch.get_realize(block)
    spatial_vars = {
        id(v) for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True)
        if iv.kind is IterKind.SPATIAL for v in collect_vars(value)
    }  # fmt: skip
    lead: list[LoopRV] = []
    for lp in sch.get_loops(block):
        var = lp.var
        if not isinstance(var, Var) or id(var) not in spatial_vars:
            break
        lead.append(lp)
    if not lead:
        top = sch.get_loops(block)
        lead = [sch.add_unit_loop(top[0] if top else block)]
    loop = lead[0] if len(lead) == 1 else sch.fuse(*lead)
    threads = sampled if sampled is not None else flat_threads(cfg, loop_extent(sch, loop))
    bind_per_thread(sch, loop, threads)
    _private_outputs(sch, block)


def _private_outputs(sch: Schedule, block: BlockRV) -> None:
    """Registers for what ``block`` writes and nobody else reads (``argmax``'s running max):
    a global buffer allocated inside a kernel cannot be lowered."""
    params = {id(b) for b in sch.func.buffer_params}
    read_elsewhere = {
        id(r.buffer) for c in sch.get_consumers(block) for r in block_node(sch, c).reads
    }
    for n, w in enumerate(block_node(sch, block).writes):
        if id(w.buffer) not in params and id(w.buffer) not in read_elsewhere:
            attempt(sch, sch.set_scope, block, n, "local")


def schedule_rows(
    sch: Schedule, blocks: Sequence[BlockInfo], cfg: RowConfig, sampled: Factor | None = None
) -> RowPlan:
    """The whole row schedule of ``blocks`` (module docstring); blocks that cannot join the
    anchor's rows get kernels of their own (a reduction its own rows, a spatial block a flat
    nest). ``sampled``: the threads per row drawn by a tunable rule."""
    plan = plan_rows(sch, blocks, cfg)
    localize(sch, plan.inside[:-1])
    if plan.across:
        bind_across(sch, plan, row_threads(cfg, plan.column, sampled))
    elif plan.row is not None:
        bind_per_thread(sch, plan.row, flat_threads(cfg, loop_extent(sch, plan.row)))
    for b in plan.outside:
        if is_reduction_block(b):
            schedule_rows(sch, [b], cfg, sampled)
        else:
            schedule_flat(sch, b.block_rv, cfg)
    return plan
