"""``Reduction``: a function whose one reduction block is a plain sum, product, max or min.

Takes ``topi.sum/prod/max/min/mean`` over any axes, pooling, ``x.sum(-1)``, RMS norm, with
elementwise producers (inlined) and epilogues (``mean``'s divide, casts, a normalisation that
broadcasts the result back over the row) around the one reduction. Declines functions with
several reductions or a producer that cannot be inlined (``GeneralReduction``), a
multiply-accumulate (matmul-like: ``Matmul``/``GEMV``; a batched dot product, such as the
scores of one query against one key at sequence length 1, is a plain sum and taken here),
an opaque block (``argmax``) or no
reduction at all (``Injective``).

The schedule:

1. inline the elementwise producers and intermediate epilogue stages;
2. vectorize the reduction (see :mod:`._vector_nest`): reduce axes innermost and contiguous
   -> ``split`` by the partial width + ``rfactor`` into a vector of partial results, then an
   unrolled fold; reduce axes outer -> vectorize the output's contiguous spatial axis inside
   the reduce loops; otherwise a scalar reduction;
3. fuse the spatial loops and run them in parallel when the kernel touches enough elements;
4. ``reverse_compute_at`` the epilogue under that loop and vectorize it there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...ir import PrimFunc
from ...schedule import LoopRV, Schedule
from ...schedule.analysis import (
    BlockInfo,
    OpPattern,
    consumers,
    is_dot_product,
    why_not_reduction,
)
from ...target import Target
from ..base import CPURule, Decline
from ..common import loops_below
from ._block_plan import inline_spatial, is_reduction_block, schedule_standalone, start
from ._vector_config import VectorConfig
from ._vector_nest import schedule_reduction, schedule_spatial


def _why_not_plain(infos: Sequence[BlockInfo]) -> str | None:
    """Why the function is not one plain reduction with spatial stages around it."""
    for b in infos:
        if b.is_opaque():
            return why_not_reduction(b) or f'block "{b.name}" is opaque (not one store)'
    reductions = [b for b in infos if is_reduction_block(b)]
    if not reductions:
        return "no reduction block (an injective function)"
    if len(reductions) > 1:
        names = ", ".join(f'"{b.name}"' for b in reductions)
        return f"{len(reductions)} reduction blocks ({names}): several reductions"
    (main,) = reductions
    if main.pattern is OpPattern.OUT_EWISE_FUSABLE and not is_dot_product(main):
        return f'block "{main.name}" is a multiply-accumulate (matmul-like)'
    return why_not_reduction(main)


def downstream(infos: Sequence[BlockInfo], root: BlockInfo) -> set[str]:
    """Names of the blocks that read ``root``'s output, directly or through other blocks."""
    seen: set[str] = set()
    todo = [root]
    while todo:
        for c in consumers(infos, todo.pop()):
            if c.name not in seen:
                seen.add(c.name)
                todo.append(c)
    return seen


def attach_epilogue(sch: Schedule, cfg: VectorConfig, block: BlockInfo, row: LoopRV | None) -> None:
    """Compute ``block`` under ``row`` and vectorize it there (else on its own nest)."""
    if row is not None and sch.try_(sch.reverse_compute_at, block.block_rv, row):
        below = loops_below(sch, block.block_rv, row)
        schedule_spatial(sch, cfg, block.block_rv, below, standalone=False)
        return
    schedule_standalone(sch, cfg, block.block_rv)


class Reduction(CPURule):
    """One plain reduction, vectorized and parallel, with its epilogue fused (module doc)."""

    @dataclass(frozen=True)
    class Config(VectorConfig):
        """The numbers of :class:`Reduction` (all from :class:`VectorConfig`)."""

    def schedule(
        self, func: PrimFunc, target: Target, cfg: Reduction.Config, tunable: bool
    ) -> Schedule | Decline:
        """Schedule ``func`` or decline (see the module docstring)."""
        got = start(func)
        if isinstance(got, Decline):
            return got
        sch, infos = got
        # Step 1. One plain reduction, spatial blocks around it.
        why = _why_not_plain(infos)
        if why is not None:
            return Decline(why)
        # Step 2. Inline what may be: producers, intermediate epilogue stages.
        left = inline_spatial(sch, infos)
        main = next(b for b in left if is_reduction_block(b))
        after = downstream(left, main)
        kept = [b.name for b in left if b is not main and b.name not in after]
        if kept:
            return Decline(
                f'block "{kept[0]}" before the reduction cannot be inlined (an output, or '
                "costly and read broadcast): a multi-stage row computation"
            )
        # Step 3. Vectorize the reduction; parallel over its spatial loops.
        row = schedule_reduction(
            sch, cfg, main.block_rv, sch.get_loops(main.block_rv), standalone=True
        )
        # Step 4. The epilogue stages under the reduction's row loop.
        for b in left:
            if b.name in after:
                attach_epilogue(sch, cfg, b, row)
        return sch
