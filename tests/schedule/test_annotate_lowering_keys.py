"""Annotations that lowering acts on are checked when set and when a trace is read."""

from __future__ import annotations

import json

import pytest
from sched_loop_helpers import ADD_ONE_BEFORE, matmul

import tilecraft as tc
from tilecraft.schedule import Trace
from tilecraft.schedule._trace_json import TraceFormatError
from tilecraft.schedule.primitives.annotate import MAX_AUTO_UNROLL_STEP
from tilecraft.schedule.testing_utils import assert_fails_unchanged, verify_trace_roundtrip

UNROLL = "pragma_auto_unroll_max_step"


def _sch() -> tc.Schedule:
    return tc.Schedule(tc.script.parse(ADD_ONE_BEFORE))


def _set_value(text: str, kind: str, value: object) -> str:
    """The trace JSON ``text`` with the value of its first ``kind`` instruction replaced."""
    data = json.loads(text)
    inst = next(i for i in data["insts"] if i["kind"] == kind)
    inst["inputs"][1] = value
    return json.dumps(data)


def test_unroll_step_cap_is_what_real_schedules_use() -> None:
    assert MAX_AUTO_UNROLL_STEP == 1024
    before = matmul(16, 16, 16)
    sch = tc.Schedule(before)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    sch.annotate(i, UNROLL, MAX_AUTO_UNROLL_STEP)
    sch.annotate(i, "pragma_unroll_explicit", 1)
    verify_trace_roundtrip(sch, before)


@pytest.mark.parametrize("value", [MAX_AUTO_UNROLL_STEP + 1, 10**9, -1, "16", 16.0, True])
def test_unroll_step_above_the_cap_or_not_an_int_is_refused(value: object) -> None:
    sch = _sch()
    i, _ = sch.get_loops(sch.get_block("B"))
    err = assert_fails_unchanged(sch, "annotate", i, UNROLL, value, match="annotate: loop")
    assert "from 0 to 1024" in str(err)
    assert err.primitive == "annotate"


def test_a_sampled_unroll_step_above_the_cap_is_refused() -> None:
    sch = _sch()
    i, _ = sch.get_loops(sch.get_block("B"))
    big = sch.sample_categorical([16, 1 << 20], [0.5, 0.5], decision=1)
    assert_fails_unchanged(sch, "annotate", i, UNROLL, big, match="from 0 to 1024")


def test_a_trace_with_an_unroll_step_above_the_cap_does_not_load() -> None:
    sch = _sch()
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.annotate(i, UNROLL, 512)
    text = sch.trace.as_json()
    assert len(Trace.from_json(text)) == len(sch.trace)
    with pytest.raises(TraceFormatError, match=r"annotate.*pragma_auto_unroll_max_step.*1024"):
        Trace.from_json(_set_value(text, "annotate", 10**9))


def test_a_trace_sampling_an_unroll_step_above_the_cap_does_not_load() -> None:
    sch = _sch()
    i, _ = sch.get_loops(sch.get_block("B"))
    step = sch.sample_categorical([16, 64], [0.5, 0.5], decision=1)
    sch.annotate(i, UNROLL, step)
    data = json.loads(sch.trace.as_json())
    sample = next(x for x in data["insts"] if x["kind"] == "sample_categorical")
    sample["attrs"]["candidates"] = [16, 1 << 20]
    with pytest.raises(TraceFormatError, match="pragma_auto_unroll_max_step"):
        Trace.from_json(json.dumps(data))


# -- software pipelining -------------------------------------------------------------------
STAGE, ORDER = "software_pipeline_stage", "software_pipeline_order"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (STAGE, 0),
        (STAGE, []),
        (STAGE, [0, 0]),
        (STAGE, [0, 1, 2]),
        (STAGE, [0, True]),
        (STAGE, [0, "1"]),
        (STAGE, [-1, 0]),
        (ORDER, 1),
        (ORDER, [0, 0, 1]),
        (ORDER, [1, 2]),
        (ORDER, []),
    ],
)
def test_malformed_pipeline_annotations_are_refused(key: str, value: object) -> None:
    sch = _sch()
    i, _ = sch.get_loops(sch.get_block("B"))
    err = assert_fails_unchanged(sch, "annotate", i, key, value, match=f'annotate: loop "i": {key}')
    assert err.requires.startswith(f"{key} needs")


def test_pipeline_annotations_belong_on_loops() -> None:
    sch = _sch()
    assert_fails_unchanged(sch, "annotate", sch.get_block("B"), STAGE, [0, 1], match="loops only")


@pytest.mark.parametrize(
    ("key", "value"), [(STAGE, [0, 1]), (STAGE, [0, 0, 2]), (ORDER, [0]), (ORDER, [2, 0, 1])]
)
def test_wellformed_pipeline_annotations_are_set(key: str, value: list[int]) -> None:
    before = tc.script.parse(ADD_ONE_BEFORE)
    sch = tc.Schedule(before)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.annotate(i, key, value)
    assert list(sch.get(i).annotations[key]) == value
    verify_trace_roundtrip(sch, before)


def test_a_trace_with_a_malformed_pipeline_stage_does_not_load() -> None:
    sch = _sch()
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.annotate(i, STAGE, [0, 1])
    with pytest.raises(TraceFormatError, match="software_pipeline_stage = 0 is not"):
        Trace.from_json(_set_value(sch.trace.as_json(), "annotate", 0))
