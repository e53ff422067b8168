"""Shared Ray plumbing of :class:`RayBuilder` and :class:`RayRunner` (``tilecraft[distributed]``).

Work goes to Ray tasks that run the same request handler as a local worker
(:func:`tilecraft.tune._worker.handle`), so a build or a measurement means the same thing on
a cluster. The driver keeps at most ``max_in_flight`` tasks submitted, each with a deadline
counted from its submission; a task past it is cancelled with ``force=True`` (its Ray worker
process is killed). Tasks never retry: a crashed measurement is a failed candidate. The
driver alone writes the database: tasks only return results.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from ..errors import TuneError
from ._proc import Message, failure


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


def handle_request(request: Message) -> Message:
    """The body of every Ray task: answer one build or run request."""
    from ._worker import handle

    return handle(request)


def _outcome(ray: ModuleType, ref: Any, label: str) -> Message:
    try:
        reply = ray.get(ref)
    except ray.exceptions.RayError as e:
        text = str(e).strip().splitlines()
        head = text[0] if text else ""
        return failure("crash", f"the Ray {label} task failed: {type(e).__name__}: {head}")
    return reply if isinstance(reply, dict) else failure("crash", f"bad reply {reply!r}")


def run_windowed(
    ray: ModuleType,
    submit: Callable[[int], Any],
    count: int,
    timeout_s: float,
    max_in_flight: int,
    label: str,
) -> list[Message]:
    """Submit ``count`` tasks (``submit(i)`` returns an ObjectRef), at most ``max_in_flight``
    at once, and collect their replies in order; late tasks are cancelled."""
    results: list[Message | None] = [None] * count
    in_flight: dict[Any, tuple[int, float]] = {}
    next_index = 0
    while next_index < count or in_flight:
        while next_index < count and len(in_flight) < max(1, max_in_flight):
            in_flight[submit(next_index)] = (next_index, time.monotonic() + timeout_s)
            next_index += 1
        wait_s = max(0.0, min(d for _, d in in_flight.values()) - time.monotonic())
        ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=wait_s)
        for ref in ready:
            index, _ = in_flight.pop(ref)
            results[index] = _outcome(ray, ref, label)
        now = time.monotonic()
        for ref, (index, deadline) in list(in_flight.items()):
            if now >= deadline:
                ray.cancel(ref, force=True)
                del in_flight[ref]
                results[index] = failure(
                    "timeout",
                    f"timed out after {timeout_s:g} s; the Ray {label} task was cancelled",
                )
    return [r if r is not None else failure("lost", "no reply") for r in results]
