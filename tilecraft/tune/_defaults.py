"""The rules' schedule of a task: the first candidate measured, so tuning never loses to them.

``tc.compile`` without a database schedules a function with the target's default rules; the
tuner measures that schedule before any candidate of the search, so the best record of a
task is never slower than what the user had without tuning. CPU targets use
:func:`tilecraft.rules.cpu.default_rules`; GPU targets use ``tilecraft.rules.gpu``'s
``default_rules`` when the rules package provides one. A target without default rules, or a
function no rule takes, has no such candidate: the reason is logged and the search starts
alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from .. import rules
from ..ir import PrimFunc
from ..rules import ScheduleRule, try_rules
from ..runtime.backend import backend_of
from ..schedule import Schedule
from ..target import Target

logger = logging.getLogger("tilecraft.tune")


def default_rules_of(target: Target) -> list[ScheduleRule] | None:
    """The default rules for ``target``, or None when the rules package has none for it."""
    if not backend_of(target).needs_gpu_schedule:
        return rules.cpu.default_rules()
    gpu = getattr(rules, "gpu", None)
    make: Callable[[], Sequence[ScheduleRule]] | None = getattr(gpu, "default_rules", None)
    return None if make is None else list(make())


def rules_candidate(func: PrimFunc, target: Target, task_name: str) -> Schedule | None:
    """The default rules' schedule of ``func``; None (with the reason logged) when none."""
    found = default_rules_of(target)
    if found is None:
        logger.info(
            "task %s: no default rules for %s; the search starts without the rules' schedule",
            task_name,
            target,
        )
        return None
    outcome = try_rules(func, found, target)
    if outcome.schedule is None:
        reasons = "; ".join(f"{r}: {d.reason}" for r, d in outcome.declines) or "no rule"
        logger.info("task %s: no default rule takes it (%s)", task_name, reasons)
        return None
    return outcome.schedule
