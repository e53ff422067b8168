"""The one "scheduled" mark: values, validation, the older attributes it reads."""

from __future__ import annotations

import pytest

import tilecraft as tc
from tilecraft.errors import IRError
from tilecraft.ir import PrimFunc, by_dispatch, by_rule, is_scheduled, mark_scheduled, scheduled_by


def _func() -> PrimFunc:
    a = tc.te.placeholder((8,), "float32", name="A")
    return tc.te.create_prim_func([a, tc.te.compute((8,), lambda i: a[i] + 1.0, name="B")])


@pytest.mark.parametrize("by", ["rule:GEMV", "database", "dispatch:cublas", "hand"])
def test_mark_round_trips(by: str) -> None:
    func = _func()
    assert scheduled_by(func) is None
    assert not is_scheduled(func)
    marked = mark_scheduled(func, by)
    assert marked.attrs["tc.scheduled"] == by
    assert scheduled_by(marked) == by
    assert is_scheduled(marked)
    assert "tc.scheduled" not in func.attrs  # the input is not changed


def test_mark_helpers_build_prefixed_values() -> None:
    assert by_rule("Matmul") == "rule:Matmul"
    assert by_dispatch("cublas") == "dispatch:cublas"
    assert tc.ir.SCHEDULED_ATTR == "tc.scheduled"


@pytest.mark.parametrize(
    "bad", ["", "tuned", "rule:", "rule:My Rule", "dispatch:", "Hand", "database ", 1, True, None]
)
def test_a_bad_mark_is_an_error(bad: object) -> None:
    with pytest.raises(IRError, match=r"tc\.scheduled: expected 'database', 'hand'"):
        mark_scheduled(_func(), bad)  # type: ignore[arg-type]


def test_a_bad_mark_read_from_a_function_is_an_error() -> None:
    func = _func().with_attr("tc.scheduled", "by the intern")
    with pytest.raises(IRError, match=r"function 'main': tc\.scheduled: expected"):
        scheduled_by(func)


def test_bad_rule_and_library_names() -> None:
    with pytest.raises(IRError):
        by_rule("")
    with pytest.raises(IRError):
        by_dispatch("two words")
    with pytest.raises(IRError, match="expected a PrimFunc"):
        mark_scheduled("main", "hand")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("attr", "value", "meaning"),
    [
        ("tc.schedule_rule", "Matmul", "rule:Matmul"),
        ("tc.tuned", True, "database"),
        ("tc.is_scheduled", True, "hand"),
    ],
)
def test_older_attributes_read_as_the_mark(attr: str, value: object, meaning: str) -> None:
    assert scheduled_by(_func().with_attr(attr, value)) == meaning


def test_older_attributes_false_mean_unscheduled() -> None:
    func = _func().with_attr("tc.tuned", False).with_attr("tc.is_scheduled", False)
    assert scheduled_by(func) is None


def test_the_mark_wins_over_older_attributes() -> None:
    func = mark_scheduled(_func().with_attr("tc.schedule_rule", "Matmul"), "hand")
    assert scheduled_by(func) == "hand"


def test_the_mark_survives_the_script_round_trip() -> None:
    marked = mark_scheduled(_func(), "rule:Injective")
    again = tc.script.parse(marked.script())
    assert isinstance(again, PrimFunc)
    assert scheduled_by(again) == "rule:Injective"
