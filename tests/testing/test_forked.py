"""tilecraft.testing.run_forked: a value, an exception, a crash and a hang are each an outcome."""

from __future__ import annotations

import ctypes
import os
import time

import pytest

from tilecraft.testing import ForkOutcome, run_forked

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


def test_a_returned_value() -> None:
    assert run_forked(lambda: [1, 2], timeout=30) == ForkOutcome(value=[1, 2])


def test_an_exception_is_raised_with_its_traceback() -> None:
    def fail() -> None:
        raise ValueError("bad input")

    got = run_forked(fail, timeout=30)
    assert got.failure == "raised"
    assert got.detail.startswith("ValueError: bad input")
    assert "Traceback" in got.detail


def test_a_segfault_is_a_signal() -> None:
    got = run_forked(lambda: ctypes.string_at(0), timeout=30)
    assert got.failure == "signal 11"


def test_a_hang_is_killed() -> None:
    start = time.perf_counter()
    got = run_forked(lambda: time.sleep(60), timeout=0.5)
    assert got.failure == "hang"
    assert time.perf_counter() - start < 30


def test_an_exit_without_answer_died() -> None:
    got = run_forked(lambda: os._exit(3), timeout=30)
    assert got.failure == "died"
