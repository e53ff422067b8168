"""``Fallback``: a schedule for any function, so every kernel gets one.

What it does, step by step, each step only where the Schedule API accepts it (a refused step
leaves the function as it was and the next one runs):

1. inline the intermediate blocks without reduction into their consumers (not a costly one
   read broadcast: see :func:`._block_plan.inline_spatial`);
2. for each block left, on its own nest at the root:

   * a reduction (including a matmul-like multiply-accumulate): vectorized as in
     ``Reduction`` — partial vector results when the reduce axes are innermost in every
     input, else along the output's contiguous axis, else serial — with its leading spatial
     loops fused and parallel;
   * a block without reduction: its innermost loop vectorized and its outer loops fused and
     parallel (as in ``Injective``, without tiling transposed accesses);
   * an opaque block (its body is not one store, such as ``argmax``): only its leading
     spatial loops fused and parallel; nothing is vectorized.

Parallel loops are used only when the kernel touches enough elements
(:attr:`VectorConfig.min_parallel_work`). ``Fallback`` declines only a non-CPU target or an
argument that is not a PrimFunc (or one the Schedule API refuses to hold); a function it
cannot normalize (hand-written or transformed
with loops that do not match its blocks' iterators) or one already scheduled (it carries the
``tc.scheduled`` mark, or a loop that is parallel, vectorized, unrolled or bound) is returned
unchanged, as a Schedule with an empty trace.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import ScheduleError
from ...ir import PrimFunc
from ...schedule import Schedule
from ...schedule.analysis import normalize_prim_func
from ...target import Target
from ..base import CPURule, Decline
from ._block_plan import inline_spatial, schedule_standalone
from ._vector_config import VectorConfig


class Fallback(CPURule):
    """Parallel and vectorized where safe; always returns a schedule (module docstring)."""

    @dataclass(frozen=True)
    class Config(VectorConfig):
        """The numbers of :class:`Fallback` (all from :class:`VectorConfig`)."""

    def when_scheduled(self, func: PrimFunc, reason: str) -> Schedule | Decline:
        """An already scheduled function is returned unchanged (module docstring)."""
        return _hold(func)

    def schedule(
        self, func: PrimFunc, target: Target, cfg: Fallback.Config, tunable: bool
    ) -> Schedule | Decline:
        """Schedule ``func`` (see the module docstring)."""
        sch = _hold(func)
        if isinstance(sch, Decline):
            return sch
        # Step 1. Blocks the analysis can describe; else left as it is.
        infos = normalize_prim_func(sch)
        if infos is None:
            return Schedule(func)  # unchanged
        # Step 2. Inline the chains; vectorize and parallelize each block left.
        for b in inline_spatial(sch, infos):
            schedule_standalone(sch, cfg, b.block_rv)
        return sch


def _hold(func: PrimFunc) -> Schedule | Decline:
    """A schedule of ``func`` with an empty trace, or why the Schedule API refuses it."""
    try:
        return Schedule(func)
    except ScheduleError as e:
        return Decline(f"cannot schedule it: {e.short}")
