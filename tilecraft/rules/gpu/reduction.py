"""``Reduction``: a function whose one reduction block is a plain sum, product, max or min.

Takes ``topi.sum/prod/max/min/mean`` over any axes (the last, a middle one of a 4-D tensor, all
of them), ``x.sum(-1)``, pooling-like reductions, with their elementwise producers inlined and
their epilogue (``mean``'s divide, a cast) computed in the same kernel. Declines functions with
several reductions (``GeneralReduction``), a multiply-accumulate (matmul-like), an opaque block
(``argmax``) or no reduction at all (``Fallback``).

The schedule is the row schedule of :mod:`._rows`: reduced axes innermost in memory -> one
thread block per output element, its threads reading the reduced elements coalesced and
combining across threads (warp shuffles, shared memory); reduced axes outer (``sum(x,
axis=1)`` of ``(N, C, H, W)``) or shorter than a warp -> one thread per output element,
consecutive threads on consecutive (adjacent in memory) outputs, each summing serially.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir import PrimFunc
from ...schedule import Schedule
from ...target import Target
from ..base import Decline
from ._checks import open_rows
from ._rows import RowConfig, is_reduction_block, schedule_rows
from .config import GPUArchRule


class Reduction(GPUArchRule):
    """One plain reduction and its epilogue, in one kernel (module docstring)."""

    @dataclass(frozen=True)
    class Config(RowConfig):
        """The numbers of :class:`Reduction` (all from :class:`RowConfig`)."""

    def schedule(
        self, func: PrimFunc, target: Target, cfg: Reduction.Config, tunable: bool
    ) -> Schedule | Decline:
        """Schedule ``func`` or decline (see the module docstring)."""
        # Step 1. One reduction, elementwise stages around it (inlined).
        got = open_rows(func)
        if isinstance(got, Decline):
            return got
        sch, blocks = got
        reductions = [b for b in blocks if is_reduction_block(b)]
        if len(reductions) > 1:
            names = ", ".join(f'"{b.name}"' for b in reductions)
            return Decline(f"{len(reductions)} reduction blocks ({names}): several reductions")
        if blocks[0] is not reductions[0]:
            return Decline(
                f'block "{blocks[0].name}" before the reduction cannot be inlined: a multi-stage '
                "row computation"
            )
        # Step 2. The row schedule; the threads per row sampled when tunable.
        sampled = cfg.sample_row_threads(sch) if tunable else None
        done = sch.try_(schedule_rows, sch, blocks, cfg, sampled)
        if not done:
            return Decline(f"the row schedule failed: {done.error.short if done.error else ''}")
        return sch
