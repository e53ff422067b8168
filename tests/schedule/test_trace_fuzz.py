"""Seeded, bounded loader fuzzing of trace JSON (issue 10, 6b: trace loading and replay).

Only tilecraft errors may leave ``Trace.from_json``; a trace it accepts must print, and its
replay must succeed or raise ScheduleError / TraceFormatError. The cases come from
:mod:`trace_fuzz` (mutations of valid traces of four workloads). The default run is short
and stops at a deadline; the ``slow`` variant runs many more cases.
"""

from __future__ import annotations

import time

import pytest
import trace_fuzz

from tilecraft.schedule import Schedule, Trace


def _check(counts: dict[str, int], minimum: int) -> None:
    raw = {k: v for k, v in counts.items() if k.startswith("raw")}
    assert raw == {}, f"exceptions that are not tilecraft errors: {raw}"
    assert sum(counts.values()) >= minimum
    # the mutations reach every stage: rejected at load, failing and succeeding replays
    assert counts.get("rejected", 0) > 0
    assert counts.get("replayed", 0) > 0
    assert counts.get("failed", 0) > 0


def test_valid_traces_replay() -> None:
    for name, text in trace_fuzz.valid_traces().items():
        trace = Trace.from_json(text)
        assert trace.as_json() == text
        trace.apply_to_schedule(Schedule(trace_fuzz.WORKLOADS[name][0]()))
        assert trace_fuzz.run_case(name, text) == "replayed"


def test_trace_loader_fuzz() -> None:
    start = time.monotonic()
    counts = trace_fuzz.run(seed=0, n=600, deadline_s=30.0)
    assert time.monotonic() - start < 60.0
    _check(counts, minimum=150)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_trace_loader_fuzz_many(seed: int) -> None:
    _check(trace_fuzz.run(seed=seed, n=10_000), minimum=10_000)
