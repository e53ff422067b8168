"""MutateComputeLocation: move a block sampled by ``sample_compute_location`` elsewhere."""

from __future__ import annotations

import random

from ...errors import ScheduleError
from ...ir import PrimFunc
from ...schedule import Schedule, Trace
from ...schedule.handles import BlockRV
from ...schedule.trace import TraceFormatError
from .base import Mutator

TRIES = 8
"""Fresh samples drawn before the mutator gives up."""


def _block_at(func: PrimFunc, trace: Trace, index: int, seed: int) -> tuple[Schedule, BlockRV]:
    """A schedule with the instructions before ``index`` replayed, and the handle of the
    block instruction ``index`` samples a location for."""
    sch = Schedule(func, seed=seed)
    Trace(trace.insts[:index]).apply_to_schedule(sch)
    if len(sch.trace) != index:
        raise TraceFormatError("compute location mutator: the replay recorded another trace")
    mapping = {
        id(old): new
        for a, b in zip(trace.insts[:index], sch.trace.insts, strict=True)
        for old, new in zip(a.outputs, b.outputs, strict=True)
    }
    block = mapping.get(id(trace[index].inputs[0]))
    if not isinstance(block, BlockRV):
        raise TraceFormatError("compute location mutator: the sampled block is not in the trace")
    return sch, block


class MutateComputeLocation(Mutator):
    """Draw another location (a consumer's loop, the root, or inlining) for one block."""

    name = "compute_location"

    def apply(self, func: PrimFunc, trace: Trace, rng: random.Random) -> Trace | None:
        """A trace with one location changed, or None (no sample, or no other location)."""
        sites = [i for i, inst in enumerate(trace) if inst.kind == "sample_compute_location"]
        if not sites:
            return None
        index = sites[rng.randrange(len(sites))]
        old = trace[index].decision
        for _ in range(TRIES):
            try:
                sch, block = _block_at(func, trace, index, rng.getrandbits(31))
                sch.sample_compute_location(block)
            except (ScheduleError, TraceFormatError):
                return None
            new = sch.trace[-1].decision
            if new != old:
                return trace.with_decision(index, new)
        return None
