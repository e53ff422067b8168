"""``Schedule.try_`` returns a :class:`TryResult`: success and failure never look alike.

A primitive returning None (``reorder``) succeeds with a truthy result whose value is None;
a failing call gives a falsy result carrying the ScheduleError, the schedule unchanged.
"""

from __future__ import annotations

import pytest
from sched_loop_helpers import matmul

from tilecraft.errors import ScheduleError
from tilecraft.schedule import LoopRV, Schedule, TryResult


def test_a_primitive_returning_none_succeeds_distinctly() -> None:
    sch = Schedule(matmul(16, 16, 16))
    i, j, k = sch.get_loops(sch.get_block("C"))
    res = sch.try_(sch.reorder, k, i)
    assert isinstance(res, TryResult)
    assert res
    assert res.ok
    assert res.error is None
    assert res.value is None
    assert res.value_or("default") is None
    assert sch.trace[len(sch.trace) - 1].kind == "reorder"
    names = [sch.get(lp).loop_var.name for lp in sch.get_loops(sch.get_block("C"))]  # type: ignore[union-attr]
    assert names == ["k", "j", "i"]
    del j


def test_a_value_is_returned_on_success() -> None:
    sch = Schedule(matmul(16, 16, 16))
    i = sch.get_loops(sch.get_block("C"))[0]
    res = sch.try_(sch.split, i, [None, 4])
    assert res
    outer, inner = res.value
    assert isinstance(outer, LoopRV)
    assert isinstance(inner, LoopRV)
    assert res.value_or(None) == res.value
    assert "success" in repr(res)


def test_a_failure_carries_the_error_and_leaves_the_schedule_unchanged() -> None:
    sch = Schedule(matmul(16, 16, 16))
    i, _j, k = sch.get_loops(sch.get_block("C"))
    func, n = sch.func, len(sch.trace)
    res = sch.try_(sch.fuse, i, k)  # not adjacent
    assert not res
    assert not res.ok
    assert isinstance(res.error, ScheduleError)
    assert res.error.primitive == "fuse"
    assert res.value_or("default") == "default"
    with pytest.raises(ScheduleError, match=r"fuse: .*not adjacent"):
        _ = res.value
    assert sch.func is func
    assert len(sch.trace) == n
    assert "failure" in repr(res)


def test_a_failure_after_commits_inside_fn_is_undone() -> None:
    sch = Schedule(matmul(16, 16, 16))
    loops = sch.get_loops(sch.get_block("C"))
    func, n = sch.func, len(sch.trace)

    def two_steps() -> None:
        sch.split(loops[-1], [None, 4])
        sch.fuse(loops[0], loops[-1])  # stale after the split: fails

    res = sch.try_(two_steps)
    assert not res
    assert isinstance(res.error, ScheduleError)
    assert sch.func is func
    assert len(sch.trace) == n


def test_failure_needs_a_schedule_error() -> None:
    with pytest.raises(TypeError, match="ScheduleError"):
        TryResult.failure(ValueError("x"))  # type: ignore[arg-type]
