"""Replay strategies: random sampling of the design space, with no model.

``ReplayFunc`` runs the space again for every candidate (so Python control flow in a
schedule function may depend on what it sampled). ``ReplayTrace`` runs the space once and
then replays its traces with every sampling decision drawn anew (the structure stays, the
decisions change), which is cheaper and works the same on any trace; a trace without
sampling instructions is one candidate, drawn once.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import ScheduleError
from ...ir import PrimFunc
from ...schedule import Schedule, Trace
from ...target import Target
from ..database.workload import TuningRecord
from ..space.base import SpaceGenerator, resampled
from .base import DRAWS_PER_CANDIDATE, SearchStrategy


class ReplayFunc(SearchStrategy):
    """Each candidate is a fresh run of the space with a new seed."""

    def _draw(self) -> Schedule | None:
        assert self.space is not None
        assert self.func is not None
        assert self.target is not None
        found = self.space.generate(self.func, self.target, self._seed())
        if not found:
            return None
        return found[self.rng.randrange(len(found))]


class ReplayTrace(SearchStrategy):
    """Each candidate replays one of the space's traces with new sampling decisions."""

    def __init__(self) -> None:
        super().__init__()
        self.traces: list[Trace] = []

    def initialize(
        self,
        func: PrimFunc,
        target: Target,
        space: SpaceGenerator,
        seed: int,
        records: Sequence[TuningRecord] = (),
    ) -> None:
        """Sample the space once; its traces are replayed from then on."""
        super().initialize(func, target, space, seed, records)
        self.traces = []
        for _ in range(DRAWS_PER_CANDIDATE):
            try:
                self.traces = [s.trace for s in space.generate(func, target, self._seed())]
            except ScheduleError as e:
                self.invalid += 1
                self.last_error = f"{e.primitive}: {e.short}"
                continue
            break

    def _draw(self) -> Schedule | None:
        assert self.func is not None
        if not self.traces:
            return None
        index = self.rng.randrange(len(self.traces))
        trace = self.traces[index]
        if not trace.sampling_indices():  # one candidate only (a rule variant): drawn once
            del self.traces[index]
        return resampled(self.func, trace, self._seed())
