"""Gradient-based task scheduling: spend the next trials where the total latency drops most.

The quantity tuned is the module's weighted latency, the sum over tasks of ``weight x best
seconds``. After one warm-up turn per task (round robin), each turn goes to the task with the
largest estimated gain of one more trial, ``weight x (alpha x backward + (1 - alpha) x
forward)``:

* ``backward``, what the last ``window`` trials gained per trial: ``(best[n - 1 - window] -
  best[n - 1]) / window`` (0 with fewer trials);
* ``forward``, an optimistic guess of what the next trial may gain: ``best / n``, large for a
  slow task that has had few trials.

A task with no successful trial yet scores the largest gain while its trials are fewer than
``window`` (it may still find a candidate that builds) and nothing after that. Ties go to
the first task in order, so the choice is deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ...errors import TuneError
from .base import TaskScheduler, TaskView


class GradientBased(TaskScheduler):
    """Choose the task whose next trial promises the largest drop of the weighted latency.

    Parameters
    ----------
    alpha
        Weight of the measured recent gain against the optimistic guess, in [0, 1].
    window
        Trials over which the recent gain is measured (>= 1).
    """

    name = "gradient"

    def __init__(self, alpha: float = 0.2, window: int = 3) -> None:
        if not 0.0 <= alpha <= 1.0 or isinstance(window, bool) or window < 1:
            raise TuneError(
                f"GradientBased: alpha must be in [0, 1] and window >= 1, got {alpha}, {window}"
            )
        self.alpha = alpha
        self.window = window
        self._visited: set[int] = set()

    def gain(self, task: TaskView) -> float:
        """The estimated drop of weighted seconds from one more trial of ``task``."""
        best = task.history
        n = len(best)
        if n == 0 or math.isinf(best[-1]):
            return math.inf if n < self.window else 0.0
        w = self.window
        before = best[n - 1 - w] if n > w else math.inf
        backward = (before - best[-1]) / w if math.isfinite(before) else 0.0
        forward = best[-1] / n
        return task.weight * (self.alpha * backward + (1.0 - self.alpha) * forward)

    def next_task(self, tasks: Sequence[TaskView]) -> int:
        """A task not yet visited in this run first (in order), then the largest gain."""
        for i, task in enumerate(tasks):
            if not task.done and i not in self._visited:
                self._visited.add(i)
                return i
        choice, top = -1, -math.inf
        for i, task in enumerate(tasks):
            if task.done:
                continue
            g = self.gain(task)
            if g > top:
                choice, top = i, g
        if choice < 0:
            raise AssertionError("next_task: every task is done")
        return choice
