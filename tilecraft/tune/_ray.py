"""Shared Ray plumbing of :class:`RayBuilder` and :class:`RayRunner` (``tilecraft[distributed]``).

Work goes to Ray tasks that run the same request handler as a local worker
(:func:`tilecraft.tune._worker.handle`), so a build or a measurement means the same thing on
a cluster. Each task is a streaming generator (:func:`serve_request`): it first says that it
has started (its worker process is up, has imported what the request needs and, for a run,
holds the reference outputs of the workload), then yields the reply. The driver keeps at
most ``max_in_flight`` tasks submitted. A task's deadline (``timeout_s``) counts from its
start as the driver sees it, not from its submission, so the time Ray takes to start a
worker process (seconds on a loaded machine, and a cancelled task's worker is killed, so the
next task often waits for a new one) or to queue the task is never charged to the build or
measurement. A task that has not started gets ``start_timeout_s`` to start, counted while
no other task of the batch runs (one that does has its own deadline) from its submission or
from the last time another task started or ended, whichever is later. A task past either
deadline is cancelled with ``force=True`` (its Ray worker process is killed). Tasks never
retry: a crashed measurement is a failed candidate. The driver alone writes the database:
tasks only return results.
"""

from __future__ import annotations

import importlib
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ..errors import TilecraftError, TuneError
from ._proc import STARTUP_TIMEOUT_S, Message, failure

START_MARK = "tilecraft_task_started"
"""Key of the first item a task yields: it has started (the value is its process id)."""

__all__ = ["START_MARK", "STARTUP_TIMEOUT_S", "require_ray", "run_windowed", "serve_request"]


def require_ray() -> ModuleType:
    """The ``ray`` module, connected to a cluster.

    Raises
    ------
    TuneError
        When Ray is not installed (``pip install tilecraft[distributed]``) or ``ray.init``
        was not called.
    """
    try:
        ray = importlib.import_module("ray")
    except ImportError:
        raise TuneError("Ray is not installed: pip install 'tilecraft[distributed]'") from None
    if not ray.is_initialized():
        raise TuneError("Ray is not connected: call ray.init(...) before building or running")
    return ray


def _warm(request: Message) -> None:
    """Hold what a run request needs besides its candidate: the reference outputs, built and
    computed once per worker process and workload (a compile: seconds on a loaded machine)."""
    check = request.get("check") or {}
    if request.get("op") != "run" or request.get("reference") is None:
        return
    if not check.get("enabled", True):
        return
    from ..runtime.compiler import adopt_flag_probe
    from .arg_info import ArgInfo
    from .runner._measure import reference_outputs

    try:
        adopt_flag_probe(request.get("probe"))
        args = [ArgInfo.from_dict(a) for a in request["args"]]
        reference_outputs(request["reference"], args, int(check.get("seed", 0)))
    except TilecraftError:
        pass  # the request meets the same failure again and reports it


def serve_request(request: Message) -> Iterator[Message]:
    """The body of every Ray task (a streaming generator): get ready, say so, answer.

    The first item, ``{START_MARK: pid}``, comes once the worker process runs this task, has
    imported what the request needs and (for a run) holds the reference outputs, as a local
    runner's worker does before its clock starts; the second is the reply to the request.
    """
    from ._worker import handle, preload

    preload(str(request.get("op")))
    _warm(request)
    yield {START_MARK: os.getpid()}
    yield handle(request)


def task_options(ray: ModuleType, **options: Any) -> Any:
    """The remote function of :func:`serve_request` with Ray ``options`` (never retried)."""
    return ray.remote(serve_request).options(num_returns="streaming", max_retries=0, **options)


@dataclass
class _Task:
    index: int
    since: float  # when it was submitted, then when the driver saw it start
    started: bool = False


def _next_item(ray: ModuleType, gen: Any, label: str) -> Message:
    """The next item of a task whose next item is ready (a crash becomes a failure)."""
    try:
        item = ray.get(next(gen))
    except StopIteration:
        return failure("crash", f"the Ray {label} task ended without a reply")
    except ray.exceptions.RayError as e:
        text = str(e).strip().splitlines()
        head = text[0] if text else ""
        return failure("crash", f"the Ray {label} task failed: {type(e).__name__}: {head}")
    return item if isinstance(item, dict) else failure("crash", f"bad reply {item!r}")


class _Window:
    """The tasks in flight, their deadlines and the replies collected so far."""

    def __init__(self, ray: ModuleType, count: int, label: str) -> None:
        self.ray = ray
        self.label = label
        self.results: list[Message | None] = [None] * count
        self.tasks: dict[Any, _Task] = {}
        self.progress = time.monotonic()  # when a task last started or ended

    def deadline(self, task: _Task, timeout_s: float, start_timeout_s: float) -> float:
        if task.started:
            return task.since + timeout_s
        if any(t.started for t in self.tasks.values()):
            return math.inf  # queued behind a running task, which has its own deadline
        return max(task.since, self.progress) + start_timeout_s

    def collect(self, wait_s: float) -> None:
        """Wait up to ``wait_s`` for an item, then take every item that is ready."""
        refs = list(self.tasks)
        ready, _ = self.ray.wait(refs, num_returns=1, timeout=wait_s)
        if ready:
            ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0)
        for gen in ready:
            task = self.tasks[gen]
            item = _next_item(self.ray, gen, self.label)
            self.progress = time.monotonic()
            if not task.started and START_MARK in item:
                task.started, task.since = True, self.progress
                continue
            if START_MARK in item:
                item = failure("crash", f"the Ray {self.label} task said it started twice")
            del self.tasks[gen]
            self.results[task.index] = item

    def expire(self, timeout_s: float, start_timeout_s: float) -> None:
        """Cancel (killing their workers) and fail the tasks past their deadline."""
        now = time.monotonic()
        for gen, task in list(self.tasks.items()):
            if now < self.deadline(task, timeout_s, start_timeout_s):
                continue
            self.ray.cancel(gen, force=True)
            del self.tasks[gen]
            if task.started:
                why = f"timed out after {timeout_s:g} s; the Ray {self.label} task was cancelled"
            else:
                why = (
                    f"the Ray {self.label} task did not start within {start_timeout_s:g} s "
                    "(no worker took it); it was cancelled"
                )
            self.results[task.index] = failure("timeout", why)


def run_windowed(
    ray: ModuleType,
    submit: Callable[[int], Any],
    count: int,
    timeout_s: float,
    max_in_flight: int,
    label: str,
    start_timeout_s: float = STARTUP_TIMEOUT_S,
) -> list[Message]:
    """Submit ``count`` tasks of :func:`serve_request` (``submit(i)`` returns the task's
    ObjectRefGenerator), at most ``max_in_flight`` at once, and collect their replies in
    order; a task late to start (``start_timeout_s``) or to answer once started
    (``timeout_s``) is cancelled and gets a ``"timeout"`` failure."""
    window = _Window(ray, count, label)
    next_index = 0
    while next_index < count or window.tasks:
        while next_index < count and len(window.tasks) < max(1, max_in_flight):
            window.tasks[submit(next_index)] = _Task(next_index, time.monotonic())
            next_index += 1
        first = min(window.deadline(t, timeout_s, start_timeout_s) for t in window.tasks.values())
        window.collect(max(0.0, first - time.monotonic()))
        window.expire(timeout_s, start_timeout_s)
    return [r if r is not None else failure("lost", "no reply") for r in window.results]
