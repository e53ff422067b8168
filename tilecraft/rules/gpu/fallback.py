"""``Fallback``: a GPU schedule for any function the other rules leave, so every kernel runs.

1. inline the intermediate blocks without reduction into their consumers (``compute_inline``,
   else ``reverse_compute_inline``);
2. for each block left, on its own nest: its leading spatial loops fused and spread one
   iteration per thread (consecutive threads on consecutive output elements, so elementwise
   and broadcast chains read and write coalesced), over as many thread blocks as needed; the
   loops after them (a reduction, the rest of an opaque block such as ``argmax``) run
   serially in each thread. A block without a spatial loop runs in one thread.

Declines an argument the Schedule API refuses, a function it cannot normalize (loops that do
not match its blocks' iterators), and a function already scheduled: an unscheduled kernel has
no thread binding, so unlike the CPU ``Fallback`` it cannot be returned unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir import PrimFunc
from ...schedule import Schedule
from ...schedule.analysis import normalize_prim_func
from ...target import Target
from ..base import Decline
from ..common import open_schedule
from ._rows import RowConfig, inline_spatial, schedule_flat
from .config import GPUArchRule


def _flat_all(sch: Schedule, cfg: RowConfig, tunable: bool) -> None:
    """Step 2 on every block left after inlining (threads per block sampled when tunable)."""
    for b in inline_spatial(sch, normalize_prim_func(sch) or []):
        sampled = cfg.sample_row_threads(sch) if tunable else None
        schedule_flat(sch, b.block_rv, cfg, sampled)


class Fallback(GPUArchRule):
    """One thread per output element, on every block (module docstring)."""

    @dataclass(frozen=True)
    class Config(RowConfig):
        """The numbers of :class:`Fallback`: ``threads_per_block``, and ``row_threads_choices``
        as the candidates a tunable Fallback samples threads per block from."""

    def schedule(
        self, func: PrimFunc, target: Target, cfg: Fallback.Config, tunable: bool
    ) -> Schedule | Decline:
        """Schedule ``func`` or decline (see the module docstring)."""
        # Step 1. A normalized function.
        got = open_schedule(func)
        if isinstance(got, str):
            return Decline(got)
        sch, _ = got
        # Step 2. Inline the chains; one thread per element of each block left.
        done = sch.try_(_flat_all, sch, cfg, tunable)
        if not done:
            return Decline(f"the flat schedule failed: {done.error.short if done.error else ''}")
        return sch
