"""Candidates of one task as the evolutionary search keeps them: made from traces, postprocessed,
featurized once and scored by the cost model."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

import numpy as np

from ...errors import ScheduleError
from ...ir import PrimFunc, structural_hash
from ...schedule import Schedule, Trace, TraceFormatError
from ..features import PerStoreFeature
from ..postproc.base import Postproc, apply_postprocs


@dataclass(frozen=True, eq=False)
class Candidate:
    """A postprocessed schedule, the trace it was made from (without postprocessing), its
    structural hash and its feature rows."""

    sch: Schedule
    trace: Trace
    key: str
    features: np.ndarray


class CandidateMaker:
    """Makes candidates of ``func`` from traces, counting what fails and why.

    Parameters
    ----------
    func
        The task's unscheduled function.
    postprocs
        Run on every candidate; one that refuses drops it (counted in :attr:`dropped`).
    extractor
        Gives each candidate its feature rows.
    """

    def __init__(
        self, func: PrimFunc, postprocs: list[Postproc], extractor: PerStoreFeature
    ) -> None:
        self.func = func
        self.postprocs = postprocs
        self.extractor = extractor
        self.invalid = 0
        self.last_error: str | None = None
        self.dropped: Counter[str] = Counter()
        self._features: dict[str, np.ndarray] = {}

    def make(self, trace: Trace, rng: random.Random) -> Candidate | None:
        """The candidate of ``trace`` (its undecided samples drawn from ``rng``), or None when
        the trace does not replay or a postprocessor drops it."""
        sch = Schedule(self.func, seed=rng.getrandbits(31))
        try:
            trace.apply_to_schedule(sch, remove_postproc=True)
        except ScheduleError as e:
            self.invalid += 1
            self.last_error = f"{e.primitive}: {e.short}"
            return None
        except TraceFormatError as e:
            self.invalid += 1
            self.last_error = str(e)
            return None
        base = sch.trace.copy()
        failed = apply_postprocs(sch, self.postprocs)
        if failed is not None:
            self.dropped[failed] += 1
            self.last_error = f"dropped by postprocessor {failed}"
            return None
        key = structural_hash(sch.func)
        feats = self._features.get(key)
        if feats is None:
            feats = self.extractor.extract_one(sch.func)
            self._features[key] = feats
        return Candidate(sch, base, key, feats)
