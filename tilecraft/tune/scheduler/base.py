"""The task scheduler interface and what it sees of each task."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Protocol

from ...errors import TuneError


class TaskView(Protocol):
    """What a scheduler reads of a task (the tuning loop's task state provides it)."""

    @property
    def weight(self) -> int:
        """How many call sites the task stands for."""
        ...

    @property
    def trials(self) -> int:
        """Trials recorded so far, earlier runs included."""
        ...

    @property
    def done(self) -> bool:
        """The task reached its budget or its space ran dry."""
        ...

    @property
    def history(self) -> Sequence[float]:
        """The best seconds after each trial (inf before the first success)."""
        ...


class TaskScheduler(ABC):
    """Chooses the next task to measure among those not done.

    Same inputs, same choices: a scheduler holds no randomness, so the same seed and the same
    measurements give the same search.
    """

    name = "scheduler"

    @abstractmethod
    def next_task(self, tasks: Sequence[TaskView]) -> int:
        """The index in ``tasks`` (every task, in order; one at least not done) to run next.

        The chosen task is not done.
        """


def as_scheduler(value: TaskScheduler | str) -> TaskScheduler:
    """A scheduler from itself or its name (``"round-robin"`` or ``"gradient"``).

    Raises
    ------
    TuneError
        For any other value.
    """
    from .gradient import GradientBased
    from .round_robin import RoundRobin

    if isinstance(value, TaskScheduler):
        return value
    makers = {RoundRobin.name: RoundRobin, GradientBased.name: GradientBased}
    if isinstance(value, str) and value in makers:
        return makers[value]()
    raise TuneError(
        f"task_scheduler: expected one of {sorted(makers)} or a TaskScheduler, got {value!r}"
    )
