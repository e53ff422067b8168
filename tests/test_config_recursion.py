"""``deep_recursion`` keeps the raised recursion limit while any thread is inside it."""

from __future__ import annotations

import sys
import threading

import pytest

from tilecraft.config import RECURSION_HEADROOM, deep_recursion


def test_a_thread_leaving_does_not_lower_the_limit_under_another_still_inside() -> None:
    start = sys.getrecursionlimit()
    assert start < RECURSION_HEADROOM  # the test needs the limit below the headroom
    a_inside, b_inside, a_left, b_may_leave = (threading.Event() for _ in range(4))
    seen: dict[str, int] = {}

    @deep_recursion
    def first() -> None:
        a_inside.set()
        assert b_inside.wait(10)

    @deep_recursion
    def second() -> None:
        b_inside.set()
        assert a_left.wait(10)
        seen["after the other left"] = sys.getrecursionlimit()
        assert b_may_leave.wait(10)

    ta = threading.Thread(target=first)
    tb = threading.Thread(target=second)
    ta.start()
    assert a_inside.wait(10)
    tb.start()
    ta.join(10)
    a_left.set()
    b_may_leave.set()
    tb.join(10)
    assert seen["after the other left"] == RECURSION_HEADROOM
    assert sys.getrecursionlimit() == start


def test_the_limit_is_restored_after_an_error_and_not_lowered_when_already_high() -> None:
    start = sys.getrecursionlimit()

    @deep_recursion
    def fails() -> None:
        assert sys.getrecursionlimit() == RECURSION_HEADROOM
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        fails()
    assert sys.getrecursionlimit() == start
    sys.setrecursionlimit(RECURSION_HEADROOM + 10)
    try:
        deep_recursion(lambda: None)()
        assert sys.getrecursionlimit() == RECURSION_HEADROOM + 10
    finally:
        sys.setrecursionlimit(start)
