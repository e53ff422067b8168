"""tilecraft.testing.run_forked: a value, an exception, a crash and a hang are each an outcome."""

from __future__ import annotations

import ctypes
import faulthandler
import os
import subprocess
import sys
import time
from pathlib import Path

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


def _segfault() -> bytes:
    """Crash on a null read, quietly: the fault handler the child inherits from the test run
    (pytest's) would print a "Fatal Python error" stack dump into the run's output."""
    faulthandler.disable()
    return ctypes.string_at(0)


def test_a_segfault_is_a_signal() -> None:
    got = run_forked(_segfault, timeout=30)
    assert got.failure == "signal 11"


def test_the_deliberately_crashing_children_print_no_stack_dump() -> None:
    root = Path(__file__).resolve().parents[2]
    tests = [
        "tests/testing/test_forked.py::test_a_segfault_is_a_signal",
        "tests/gpu/test_gpu_campaign.py::test_a_crashing_or_hanging_child_is_recorded",
    ]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *tests],
        cwd=root, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "2 passed" in output
    assert "Fatal Python error" not in output


def test_a_hang_is_killed() -> None:
    start = time.perf_counter()
    got = run_forked(lambda: time.sleep(60), timeout=0.5)
    assert got.failure == "hang"
    assert time.perf_counter() - start < 30


def test_an_exit_without_answer_died() -> None:
    got = run_forked(lambda: os._exit(3), timeout=30)
    assert got.failure == "died"
