"""``GeneralReduction``: row computations made of several reductions and elementwise stages.

Softmax, log-softmax, log-sum-exp, layer norm, RMS norm, group norm, a fused ``add + norm``:
every stage works on the same rows, so one thread block (or one thread) computes a whole row,
its statistics kept in registers between stages. The reduced axis may be anywhere (softmax
over the channels of an NCHW tensor takes one thread per row, no shared memory), the row
length and the row count may be symbolic. Stages that cannot share the last stage's rows
(group norm's per-group statistics read by a per-channel stage) get kernels of their own.
See :mod:`._rows` for the schedule. Declines functions without a reduction, with an opaque
block (``argmax``), a reduction it cannot analyse, or a single multiply-accumulate.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir import PrimFunc
from ...schedule import Schedule
from ...target import Target
from ..base import Decline
from ._checks import open_rows
from ._rows import RowConfig, schedule_rows
from .config import GPUArchRule


class GeneralReduction(GPUArchRule):
    """Multi-stage row computations, a row per thread block or per thread (module doc)."""

    @dataclass(frozen=True)
    class Config(RowConfig):
        """The numbers of :class:`GeneralReduction` (all from :class:`RowConfig`)."""

    def schedule(
        self, func: PrimFunc, target: Target, cfg: GeneralReduction.Config, tunable: bool
    ) -> Schedule | Decline:
        """Schedule ``func`` or decline (see the module docstring)."""
        # Step 1. Reductions the analysis understands; the elementwise stages inlined.
        got = open_rows(func)
        if isinstance(got, Decline):
            return got
        sch, blocks = got
        # Step 2. The row schedule; the threads per row sampled when tunable.
        sampled = cfg.sample_row_threads(sch) if tunable else None
        done = sch.try_(schedule_rows, sch, blocks, cfg, sampled)
        if not done:
            return Decline(f"the row schedule failed: {done.error.short if done.error else ''}")
        return sch
