"""The task scheduler interface and what it sees of each task."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Protocol


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
