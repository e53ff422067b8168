"""The deadlines of the Ray builder's and runner's driver loop (``run_windowed``), on a fake Ray.

The fake runs on a virtual clock: each task's first item (it has started) and its reply come
at chosen times after its submission, and ``ray.wait`` moves the clock to the next item or
to its timeout. No Ray is needed; every case takes no real time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from tilecraft import tune as ms
from tilecraft.errors import TuneError
from tilecraft.tune import _ray
from tilecraft.tune._ray import START_MARK, run_windowed


class FakeRayError(Exception):
    pass


class WorkerCrashedError(FakeRayError):
    pass


@dataclass
class Plan:
    """When (after submission) a task starts and, once started, how long it runs."""

    start_s: float | None = 0.0  # None: no worker ever takes it
    run_s: float | None = 0.0  # None: it hangs
    crash: str = ""  # "start": dies before starting; "run": dies while running


@dataclass(eq=False)  # hashed by identity, as Ray's ObjectRefGenerator
class FakeGen:
    items: list[tuple[float, Any]]
    taken: int = 0
    cancelled: list[bool] = field(default_factory=list)

    def next_at(self) -> float:
        return self.items[self.taken][0] if self.taken < len(self.items) else math.inf

    def __next__(self) -> Any:
        if self.taken >= len(self.items):
            raise StopIteration
        self.taken += 1
        return self.items[self.taken - 1][1]


class FakeRay:
    exceptions = SimpleNamespace(RayError=FakeRayError)

    def __init__(self, plans: list[Plan]) -> None:
        self.now = 0.0
        self.plans = plans
        self.gens: list[FakeGen] = []
        self.submitted: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def submit(self, index: int) -> FakeGen:
        plan, t0 = self.plans[index], self.now
        self.submitted.append(t0)
        items: list[tuple[float, Any]] = []
        if plan.crash == "start":
            items.append((t0 + 1.0, WorkerCrashedError("The worker died unexpectedly")))
        elif plan.start_s is not None:
            started = t0 + plan.start_s
            items.append((started, {START_MARK: 1234}))
            if plan.crash == "run":
                items.append((started + 0.5, WorkerCrashedError("The worker died unexpectedly")))
            elif plan.run_s is not None:
                items.append((started + plan.run_s, {"ok": True, "index": index}))
        gen = FakeGen(items)
        self.gens.append(gen)
        return gen

    def wait(self, refs: list[FakeGen], *, num_returns: int, timeout: float) -> tuple[list, list]:
        if not any(g.next_at() <= self.now for g in refs):
            self.now = max(self.now, min(self.now + timeout, min(g.next_at() for g in refs)))
        ready = [g for g in refs if g.next_at() <= self.now][:num_returns]
        return ready, [g for g in refs if g not in ready]

    def get(self, value: Any) -> Any:
        if isinstance(value, BaseException):
            raise value
        return value

    def cancel(self, gen: FakeGen, *, force: bool) -> None:
        gen.cancelled.append(force)
        gen.items = gen.items[: gen.taken]  # the task will say nothing more


def _run(
    monkeypatch: pytest.MonkeyPatch, plans: list[Plan], window: int = 1, start_s: float = 120.0
) -> tuple[FakeRay, list[dict[str, Any]]]:
    ray = FakeRay(plans)
    monkeypatch.setattr(_ray, "time", ray)
    replies = run_windowed(ray, ray.submit, len(plans), 10.0, window, "run", start_s)  # type: ignore[arg-type]
    return ray, replies


def test_the_deadline_counts_from_the_start_not_the_submission(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a hang, then a good task whose new worker takes 50 s to start (timeout: 10 s)
    ray, replies = _run(monkeypatch, [Plan(0.1, None), Plan(50.0, 2.0)])
    assert replies[0]["failure"] == "timeout"
    assert replies[0]["error"] == "timed out after 10 s; the Ray run task was cancelled"
    assert ray.gens[0].cancelled == [True]  # force: its worker is killed
    assert ray.submitted[1] == pytest.approx(10.1)  # the hang's deadline: its start + 10 s
    assert replies[1] == {"ok": True, "index": 1}
    assert ray.gens[1].cancelled == []


def test_a_task_past_its_deadline_after_a_slow_start_times_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ray, replies = _run(monkeypatch, [Plan(50.0, 10.5), Plan(0.0, 9.9)])
    assert replies[0]["failure"] == "timeout"
    assert ray.submitted[1] == pytest.approx(60.0)
    assert replies[1] == {"ok": True, "index": 1}


def test_a_task_no_worker_takes_fails_after_the_start_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ray, replies = _run(monkeypatch, [Plan(None), Plan(1.0, 1.0)], start_s=30.0)
    assert replies[0]["failure"] == "timeout"
    assert "did not start within 30 s" in replies[0]["error"]
    assert ray.gens[0].cancelled == [True]
    assert ray.submitted[1] == pytest.approx(30.0)
    assert replies[1] == {"ok": True, "index": 1}


def test_a_task_queued_behind_a_running_one_waits_without_a_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # two in flight on one device: the second starts when the first ends (9.5 s > 5 s limit),
    # then the third waits (from the first's end) longer than the start limit and fails
    plans = [Plan(0.5, 9.0), Plan(9.6, 1.0), Plan(None)]
    ray, replies = _run(monkeypatch, plans, window=2, start_s=5.0)
    assert replies[0] == {"ok": True, "index": 0}
    assert replies[1] == {"ok": True, "index": 1}
    assert "did not start within 5 s" in replies[2]["error"]
    assert ray.now == pytest.approx(10.6 + 5.0)  # the limit counts from the second's end


def test_crashes_before_and_after_the_start_are_failed_candidates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, replies = _run(monkeypatch, [Plan(crash="start"), Plan(crash="run"), Plan(0.0, 1.0)])
    for reply in replies[:2]:
        assert reply["failure"] == "crash"
        assert reply["error"].startswith("the Ray run task failed: WorkerCrashedError")
    assert replies[2] == {"ok": True, "index": 2}


def test_the_start_limit_must_be_positive() -> None:
    with pytest.raises(TuneError, match="start_timeout_s"):
        ms.RayRunner(start_timeout_s=0)
    with pytest.raises(TuneError, match="start_timeout_s"):
        ms.RayBuilder(march="x86-64", start_timeout_s=-1)
