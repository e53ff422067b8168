"""Task schedulers: which task measures its next batch of candidates.

One global budget (``max_trials_global``) is shared by every task, each task capped at
``max_trials_per_task``; a scheduler only chooses the order in which tasks spend it.
"""

from ...errors import TuneError
from .base import TaskScheduler as TaskScheduler
from .base import TaskView as TaskView
from .gradient import GradientBased as GradientBased
from .round_robin import RoundRobin as RoundRobin


def as_scheduler(value: TaskScheduler | str) -> TaskScheduler:
    """A scheduler from itself or its name (``"round-robin"`` or ``"gradient"``).

    Raises
    ------
    TuneError
        For any other value.
    """
    if isinstance(value, TaskScheduler):
        return value
    if value == RoundRobin.name:
        return RoundRobin()
    if value == GradientBased.name:
        return GradientBased()
    raise TuneError(
        f"task_scheduler: expected one of {[GradientBased.name, RoundRobin.name]} or a "
        f"TaskScheduler, got {value!r}"
    )
