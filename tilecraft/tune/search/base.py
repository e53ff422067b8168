"""The search strategy interface: propose candidates, learn from their measurements."""

from __future__ import annotations

import copy
import random
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Sequence

from ...errors import ScheduleError
from ...ir import PrimFunc, structural_hash
from ...schedule import Schedule
from ...target import Target
from ..database.workload import TuningRecord
from ..postproc import Postproc, apply_postprocs, default_postprocs
from ..space.base import SpaceGenerator

DRAWS_PER_CANDIDATE = 8
"""How many draws a strategy makes per requested candidate before calling the space spent."""


class SearchStrategy(ABC):
    """Proposes new candidates of one task.

    A candidate already measured (the same scheduled function, by structural hash; records
    of earlier runs included) is never proposed again. A draw that breaks a schedule rule
    (ScheduleError) is counted in :attr:`invalid` and drawn again. Every draw is finished by
    the target's postprocessors (:func:`~tilecraft.tune.postproc.default_postprocs`, or
    :attr:`postprocs` when set) before its hash is taken; one they drop is counted in
    :attr:`dropped` and drawn again.
    """

    postprocs: Sequence[Postproc] | None = None
    """The postprocessors of every candidate (None: the target's defaults)."""

    def __init__(self) -> None:
        self.func: PrimFunc | None = None
        self.target: Target | None = None
        self.space: SpaceGenerator | None = None
        self.rng = random.Random(0)
        self.measured: set[str] = set()
        self.invalid = 0
        self.duplicates = 0
        self.last_error: str | None = None
        self.exhausted = False
        self.dropped: Counter[str] = Counter()
        self._post: list[Postproc] = []

    def initialize(
        self,
        func: PrimFunc,
        target: Target,
        space: SpaceGenerator,
        seed: int,
        records: Sequence[TuningRecord] = (),
    ) -> None:
        """Start searching ``func``'s ``space``; ``records`` are the task's earlier trials."""
        self.func, self.target, self.space = func, target, space
        self.rng = random.Random(seed)
        self.measured = {r.func_hash for r in records if r.func_hash}
        self.invalid = self.duplicates = 0
        self.exhausted = False
        self.dropped = Counter()
        self._post = list(default_postprocs(target) if self.postprocs is None else self.postprocs)

    def start(
        self,
        func: PrimFunc,
        target: Target,
        space: SpaceGenerator,
        seed: int,
        records: Sequence[TuningRecord] = (),
    ) -> SearchStrategy:
        """This strategy's search of one task, started and whole: a copy of the strategy
        (configuration kept) initialized on ``func``; the strategy itself is left as it was,
        so one configured strategy can start every task."""
        started = copy.copy(self)
        started.initialize(func, target, space, seed, records)
        return started

    @abstractmethod
    def _draw(self) -> Schedule | None:
        """One sampled candidate (None: the space has nothing for this function)."""

    def generate(self, count: int) -> list[Schedule]:
        """Up to ``count`` new candidates; fewer (and :attr:`exhausted`) when draws run dry."""
        out: list[Schedule] = []
        for _ in range(count * DRAWS_PER_CANDIDATE):
            if len(out) == count:
                break
            try:
                sch = self._draw()
            except ScheduleError as e:
                self.invalid += 1
                self.last_error = f"{e.primitive}: {e.short}"
                continue
            if sch is None:
                break
            failed = apply_postprocs(sch, self._post)
            if failed is not None:
                self.dropped[failed] += 1
                self.last_error = f"dropped by postprocessor {failed}"
                continue
            key = structural_hash(sch.func)
            if key in self.measured:
                self.duplicates += 1
                continue
            self.measured.add(key)
            out.append(sch)
        if len(out) < count:
            self.exhausted = True
        return out

    def notify(self, candidates: Sequence[Schedule], records: Sequence[TuningRecord]) -> None:
        """Learn from measured candidates (the replay strategies ignore it)."""
        del candidates, records

    def _seed(self) -> int:
        return self.rng.getrandbits(63)
