"""Run a check in a forked child, so that a crash or a hang is an outcome, not the end.

Campaigns that build and run thousands of generated kernels (the random-schedule and
GPU-schedule campaigns of the test suite) call :func:`run_forked`: a segfault, an abort or a
hang of the child is reported with how it happened, and the caller goes on.
"""

from __future__ import annotations

import multiprocessing
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class ForkOutcome(Generic[T]):
    """What a forked call gave.

    Attributes
    ----------
    value
        ``fn()``'s result when it returned (``failure`` is then None).
    failure
        None when ``fn`` returned; else ``"raised"`` (it raised), ``"hang"`` (no answer in
        time; the child was killed), ``"signal N"`` (killed by signal N) or ``"died"`` (it
        exited without answering).
    detail
        The exception's traceback, or what happened, for a failure.
    """

    value: T | None = None
    failure: str | None = None
    detail: str = ""


def run_forked(fn: Callable[[], T], timeout: float) -> ForkOutcome[T]:
    """``fn()`` in a forked child (its result must pickle); see :class:`ForkOutcome`."""
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)

    def child() -> None:
        try:
            send.send(ForkOutcome(value=fn()))
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            send.send(ForkOutcome(failure="raised", detail=f"{type(e).__name__}: {e}\n"
                                  f"{traceback.format_exc()}"))  # fmt: skip

    proc = ctx.Process(target=child)
    proc.start()
    send.close()
    outcome: ForkOutcome[T] = ForkOutcome(failure="hang", detail=f"no answer in {timeout} s")
    answered = False
    if recv.poll(timeout):
        try:
            outcome, answered = recv.recv(), True
        except EOFError:
            outcome = ForkOutcome(failure="died", detail="the child closed its pipe")
        proc.join(5)
    if proc.is_alive():
        proc.kill()
        proc.join()
    elif not answered and proc.exitcode is not None and proc.exitcode < 0:
        outcome = ForkOutcome(failure=f"signal {-proc.exitcode}", detail=outcome.detail)
    return outcome
