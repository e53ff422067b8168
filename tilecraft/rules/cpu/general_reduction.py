"""``GeneralReduction``: row computations made of several reductions and elementwise stages.

Softmax, log-softmax, layer norm, RMS norm, group norm, fused ``add + rms_norm``, attention
(scores, masked softmax, weighted sum) and similar: every stage works on the same rows, so
the whole computation of one row can run while the row is in cache. The schedule:

1. inline the elementwise stages, except a costly one (``exp``, a division) read broadcast,
   such as attention's softmax normalisation feeding a weighted sum (it would be recomputed
   per output column), or read by several stages, such as softmax's ``exp`` read by the sum
   and the result (each exponential is then computed once, into a row buffer);
2. pick the *row loops*: the longest run of leading spatial loops of the last block under
   which every other block can be computed (``compute_at``) with no element computed twice
   (each row loop variable binds one of the block's iterators alone) — or of the first
   block, when it is written out before the reductions (the sum of a fused add + RMS norm:
   the later stages then move with ``reverse_compute_at``); failing that, the longest run
   under which every reduction can; blocks that cannot move stay at the root. (A row of
   symbolic length cannot move today: ``compute_at`` needs constant extents; then every
   stage gets its own nest);
3. fuse the row loops into one loop, parallel when the kernel touches enough elements (row
   loops with a symbolic extent stay nested, the outermost parallel: see ``_row_loop``);
4. vectorize every stage inside the row (see :mod:`._vector_nest`): reductions into a
   vector of partial results folded at the end (``rfactor``), or along the output's
   contiguous axis when the reduced axis is not innermost; elementwise stages along their
   innermost loop. Blocks left at the root get their own vectorized, parallel nests.

Declines functions without a reduction (``Injective``), with an opaque block (``argmax``),
a reduction it cannot analyse, or a single multiply-accumulate (``Matmul``/``GEMV``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...ir import IterKind, PrimFunc
from ...schedule import BlockRV, LoopRV, Schedule
from ...schedule.analysis import BlockInfo, OpPattern, detect_reduction, why_not_reduction
from ...target import Target
from ..base import CPURule, Decline
from ..common import block_node, bound_alone, loop_extent, loop_kinds, loops_below
from ..common import product as _product
from ._block_plan import (
    inline_spatial,
    is_reduction_block,
    schedule_standalone,
    shared_costly,
    start,
)
from ._vector_config import VectorConfig
from ._vector_nest import schedule_reduction, schedule_spatial


def _why_not(infos: Sequence[BlockInfo]) -> str | None:
    for b in infos:
        if b.is_opaque():
            return why_not_reduction(b) or f'block "{b.name}" is opaque (not one store)'
    reductions = [b for b in infos if is_reduction_block(b)]
    if not reductions:
        return "no reduction block (an injective function)"
    for b in reductions:
        if detect_reduction(b) is None:
            return why_not_reduction(b)
    if len(reductions) == 1 and reductions[0].pattern is OpPattern.OUT_EWISE_FUSABLE:
        return f'its one reduction "{reductions[0].name}" is a multiply-accumulate (matmul-like)'
    return None


@dataclass
class _Rows:
    """The outcome of step 2: a schedule with blocks computed under the row loops."""

    sch: Schedule
    prefix: list[LoopRV]
    inside: set[str]
    complete: bool


def _row_candidates(sch: Schedule, anchor: BlockRV) -> list[LoopRV]:
    """The leading loops of ``anchor`` binding spatial iterators only."""
    loops = sch.get_loops(anchor)
    lead: list[LoopRV] = []
    for lp, kinds in zip(loops, loop_kinds(sch, anchor, loops), strict=True):
        if kinds != {IterKind.SPATIAL}:
            break
        lead.append(lp)
    return lead


def _move_under(
    sch: Schedule, blocks: Sequence[BlockRV], at: int, prefix: Sequence[LoopRV]
) -> _Rows:
    """On a copy of ``sch``, compute every block under ``prefix[-1]``, a loop of ``blocks[at]``.

    The anchor's producers (before it) move with ``compute_at``, consumers first; the blocks
    after it with ``reverse_compute_at``, producers first. A move that would compute some
    element twice (a row loop binding none of the block's iterators alone) is undone.
    """
    trial, inside = sch.copy(), {blocks[at].name}
    moves = [(b, False) for b in reversed(blocks[:at])] + [(b, True) for b in blocks[at + 1 :]]
    for block, reverse in moves:
        saved = trial.copy()
        if not trial.try_(
            trial.reverse_compute_at if reverse else trial.compute_at, block, prefix[-1]
        ):
            continue
        if all(loop_extent(trial, lp) == 1 or bound_alone(trial, block, lp) for lp in prefix):
            inside.add(block.name)
        else:
            trial = saved
    return _Rows(trial, list(prefix), inside, len(inside) == len(blocks))


def _choose_rows(sch: Schedule, blocks: Sequence[BlockInfo]) -> _Rows | None:
    """Step 2 of the module docstring; None when no row loop takes every reduction."""
    reductions = {b.name for b in blocks if is_reduction_block(b)}
    anchors = [blocks[-1]]
    if blocks[0].is_output and not is_reduction_block(blocks[0]):
        anchors.append(blocks[0])  # fused producers written out (add + rms_norm)
    fallback: _Rows | None = None
    handles = [b.block_rv for b in blocks]
    for anchor in anchors:
        lead = _row_candidates(sch, anchor.block_rv)
        for depth in range(len(lead), 0, -1):
            rows = _move_under(sch, handles, blocks.index(anchor), lead[:depth])
            if rows.complete:
                return rows
            if fallback is None and reductions <= rows.inside:
                fallback = rows
    return fallback


def _schedule_inside(sch: Schedule, cfg: VectorConfig, block: BlockRV, row: LoopRV) -> None:
    """Vectorize one stage inside the row loop."""
    node = block_node(sch, block)
    below = loops_below(sch, block, row)
    if not below:
        return
    if any(iv.kind is IterKind.REDUCE for iv in node.iter_vars):
        schedule_reduction(sch, cfg, block, below, standalone=False)
    else:
        schedule_spatial(sch, cfg, block, below, standalone=False)


class GeneralReduction(CPURule):
    """Row-wise multi-stage reductions, one pass per row (module docstring)."""

    @dataclass(frozen=True)
    class Config(VectorConfig):
        """The numbers of :class:`GeneralReduction` (all from :class:`VectorConfig`)."""

    def schedule(
        self, func: PrimFunc, target: Target, cfg: GeneralReduction.Config, tunable: bool
    ) -> Schedule | Decline:
        """Schedule ``func`` or decline (see the module docstring)."""
        got = start(func)
        if isinstance(got, Decline):
            return got
        sch, infos = got
        # Step 1. Reductions the analysis understands; inline the elementwise stages.
        why = _why_not(infos)
        if why is not None:
            return Decline(why)
        blocks = inline_spatial(sch, infos, keep=shared_costly(infos))
        work = _product([loop_extent(sch, lp) for lp in sch.get_loops(blocks[-1].block_rv)])
        # Step 2. Row loops of the last block, every stage computed under them.
        rows = _choose_rows(sch, blocks)
        if rows is None:
            for b in blocks:
                schedule_standalone(sch, cfg, b.block_rv)
            return sch
        sch = rows.sch
        # Step 3. One row loop; the parallel loop the outermost (the same loop when fused).
        row, outer = _row_loop(sch, rows.prefix)
        # Step 4. Vectorize each stage in the row; the blocks left at the root on their own.
        for b in blocks:
            if b.name in rows.inside:
                _schedule_inside(sch, cfg, b.block_rv, row)
            else:
                schedule_standalone(sch, cfg, b.block_rv)
        if cfg.worth_parallel(work, loop_extent(sch, outer)):
            sch.try_(sch.parallel, outer)
        return sch


def _row_loop(sch: Schedule, prefix: Sequence[LoopRV]) -> tuple[LoopRV, LoopRV]:
    """(row loop, outermost row loop): ``prefix`` fused, unless an extent is symbolic.

    Fusing a symbolic extent puts a division by it into every index of the row, and a
    division the C compiler may not move out of a guarded load keeps the row's partial
    reductions scalar (softmax over 12 x s x s, s = 128: 2.6 ms against 0.5 static); the
    loops of constant extent before the first symbolic one are fused (the outer, parallel
    loop), the others stay nested.
    """
    if len(prefix) == 1:
        return prefix[0], prefix[0]
    symbolic = [k for k, lp in enumerate(prefix) if loop_extent(sch, lp) is None]
    if symbolic:
        lead = list(prefix[: symbolic[0]]) or [prefix[0]]
        outer = lead[0] if len(lead) == 1 else sch.try_(sch.fuse, *lead).value_or(lead[0])
        return prefix[-1], outer
    fused = sch.try_(sch.fuse, *prefix).value_or(None)
    return (fused, fused) if fused is not None else (prefix[-1], prefix[-1])
