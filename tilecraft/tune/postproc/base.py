"""Postprocessors: finish or check a sampled candidate before it is built.

A postprocessor's :meth:`~Postproc.apply` rewrites the schedule (its instructions are
recorded after an ``enter_postproc`` marker, so the trace still replays) and returns whether
the candidate may be measured. :func:`apply_postprocs` runs a list in order: the first that
refuses, or whose rewrite breaks a schedule rule, drops the candidate and is named, so the
search can count what was dropped and why.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from ...errors import LowerError, ScheduleError
from ...schedule import Schedule


class Postproc(ABC):
    """Rewrites or checks one candidate."""

    name = "postproc"

    @abstractmethod
    def apply(self, sch: Schedule) -> bool:
        """Finish ``sch`` in place; False when the candidate must be dropped."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def apply_postprocs(sch: Schedule, postprocs: Sequence[Postproc]) -> str | None:
    """Run ``postprocs`` on ``sch``; None when all passed, else the name of the one that
    dropped the candidate (a ScheduleError or LowerError counts as a refusal)."""
    if not postprocs:
        return None
    sch.enter_postproc()
    for post in postprocs:
        try:
            ok = post.apply(sch)
        except (ScheduleError, LowerError):
            ok = False
        if not ok:
            return post.name
    return None
