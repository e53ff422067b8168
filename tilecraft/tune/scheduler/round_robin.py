"""Round robin: the tasks take turns in order."""

from __future__ import annotations

from collections.abc import Sequence

from .base import TaskScheduler, TaskView


class RoundRobin(TaskScheduler):
    """Each task in turn, in task order; a finished task is passed over."""

    name = "round-robin"

    def __init__(self) -> None:
        self._next = 0

    def next_task(self, tasks: Sequence[TaskView]) -> int:
        """The first task not done at or after the one following the last choice."""
        n = len(tasks)
        for step in range(n):
            index = (self._next + step) % n
            if not tasks[index].done:
                self._next = index + 1
                return index
        raise AssertionError("next_task: every task is done")
