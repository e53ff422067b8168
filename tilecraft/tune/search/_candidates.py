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
        self.reused = 0
        self._features: dict[str, np.ndarray] = {}
        self._made: dict[tuple[object, ...], Candidate | None] = {}

    def _known(self, key: tuple[object, ...] | None) -> bool:
        """Whether a trace with ``key`` was made already (count the reuse)."""
        if key is None or key not in self._made:
            return False
        self.reused += 1
        return True

    def make(self, trace: Trace, rng: random.Random) -> Candidate | None:
        """The candidate of ``trace`` (its undecided samples drawn from ``rng``), or None when
        the trace does not replay or a postprocessor drops it.

        A trace whose structure and decisions were made before gives the same candidate (or
        None) without replaying, postprocessing or featurizing it again: mutations and the
        measured parents of each round come back to the same decisions often."""
        key = decision_key(trace)
        if self._known(key):
            return self._made[key]  # type: ignore[index]
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
        made_key = decision_key(base)
        if self._known(made_key):
            return self._made[made_key]  # type: ignore[index]
        cand = self._finish(sch, base)
        if made_key is not None:
            self._made[made_key] = cand
        return cand

    def _finish(self, sch: Schedule, base: Trace) -> Candidate | None:
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


def decision_key(trace: Trace) -> tuple[object, ...] | None:
    """What fixes the candidate ``trace`` replays to: every instruction's kind, attributes,
    decision and inputs (a handle named by the instruction and output that made it); None when
    a sampling decision is not drawn yet."""
    made: dict[int, tuple[int, int]] = {}

    def name(value: object) -> object:
        if isinstance(value, tuple):
            return tuple(name(v) for v in value)
        return made.get(id(value), value if _literal(value) else "?")

    parts: list[object] = []
    for n, inst in enumerate(trace):
        if inst.kind.startswith("sample_") and inst.decision is None:
            return None
        parts.append((inst.kind, name(inst.inputs), inst.attrs, inst.decision))
        for k, out in enumerate(inst.outputs):
            made[id(out)] = (n, k)
    return tuple(parts)


def _literal(value: object) -> bool:
    return value is None or isinstance(value, int | float | str | bool)
