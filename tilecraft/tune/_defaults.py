"""The rules' schedule of a task: the first candidate measured, so tuning never loses to them.

``tc.compile`` without a database schedules a function with the target's default rules; the
tuner measures that schedule before any candidate of the search, so the best record of a
task is never slower than what the user had without tuning. The rules are the target's
(:func:`tilecraft.rules.default_rules`, as ``tc.compile`` uses). A function no rule takes has
no such candidate: the reason is logged and the search starts alone.
"""

from __future__ import annotations

import logging

from .. import rules
from ..ir import PrimFunc
from ..rules import try_rules
from ..schedule import Schedule
from ..target import Target

logger = logging.getLogger("tilecraft.tune")


def rules_candidate(func: PrimFunc, target: Target, task_name: str) -> Schedule | None:
    """The default rules' schedule of ``func``; None (with the reason logged) when none."""
    outcome = try_rules(func, rules.default_rules(target), target)
    if outcome.schedule is None:
        reasons = "; ".join(f"{r}: {d.reason}" for r, d in outcome.declines) or "no rule"
        logger.info("task %s: no default rule takes it (%s)", task_name, reasons)
        return None
    return outcome.schedule
