"""The opening every row rule shares: a normalized schedule, its intermediate stages inlined,
and the reductions it can analyse (else the reason to decline)."""

from __future__ import annotations

from collections.abc import Sequence

from ...ir import PrimFunc
from ...schedule import Schedule
from ...schedule.analysis import BlockInfo, OpPattern, detect_reduction, why_not_reduction
from ..base import Decline
from ..common import open_schedule
from ._rows import inline_spatial, is_reduction_block


def why_not_rows(infos: Sequence[BlockInfo]) -> str | None:
    """Why ``infos`` is not a row computation: an opaque block, no reduction, a reduction
    the analysis cannot describe, or a single multiply-accumulate (matmul-like)."""
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


def open_rows(func: PrimFunc) -> tuple[Schedule, list[BlockInfo]] | Decline:
    """A schedule of ``func`` with its intermediate stages inlined, and the blocks left."""
    got = open_schedule(func)
    if isinstance(got, str):
        return Decline(got)
    sch, infos = got
    why = why_not_rows(infos)
    if why is not None:
        return Decline(why)
    return sch, inline_spatial(sch, infos)
