"""Trace printing, JSON round trip, malformed input; Schedule queries, copy and try_."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sched_loop_helpers import matmul, two_stage

import tilecraft as tc
from tilecraft.schedule import Trace, TraceFormatError


def _scheduled() -> tc.Schedule:
    sch = tc.Schedule(matmul(64, 64, 64), seed=0)
    blk = sch.get_block("C")
    i, j, _k = sch.get_loops(blk)
    v = sch.sample_perfect_tile(i, n=2, decision=[4, 16])
    io, ii = sch.split(i, factors=v)
    sch.reorder(io, j, ii)
    sch.parallel(io)
    return sch


def test_as_python_text() -> None:
    text = _scheduled().trace.as_python()
    assert text.splitlines() == [
        'b0 = sch.get_block("C")',
        "l1, l2, l3 = sch.get_loops(b0)",
        "v4, v5 = sch.sample_perfect_tile(l1, n=2, decision=[4, 16])",
        "l6, l7 = sch.split(l1, factors=[v4, v5])",
        "sch.reorder(l6, l2, l7)",
        "sch.parallel(l6)",
    ]


def test_json_roundtrip_is_exact() -> None:
    sch = _scheduled()
    js = sch.trace.as_json()
    again = Trace.from_json(js)
    assert again.as_json() == js
    assert len(again) == len(sch.trace)
    sch2 = tc.Schedule(matmul(64, 64, 64))
    again.apply_to_schedule(sch2)
    assert tc.ir.structural_equal(sch2.func, sch.func)


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        json.dumps({"format": "other", "version": 1, "insts": []}),
        json.dumps({"format": "tilecraft.trace", "version": 99, "insts": []}),
        json.dumps({"format": "tilecraft.trace", "version": 1, "insts": [{"kind": "nope"}]}),
        json.dumps(
            {
                "format": "tilecraft.trace",
                "version": 1,
                "insts": [
                    {
                        "kind": "get_loops",
                        "inputs": [{"rv": "b9"}],
                        "attrs": {},
                        "decision": None,
                        "outputs": ["l0"],
                    }
                ],
            }
        ),
        json.dumps(
            {
                "format": "tilecraft.trace",
                "version": 1,
                "insts": [
                    {"kind": "split", "inputs": [], "attrs": {}, "decision": None, "outputs": []}
                ],
            }
        ),
    ],
)
def test_malformed_json(text: str) -> None:
    with pytest.raises(TraceFormatError, match="trace"):
        Trace.from_json(text)
    assert issubclass(TraceFormatError, tc.errors.TilecraftError)


def test_with_decision_rejects_non_sampling() -> None:
    trace = _scheduled().trace
    with pytest.raises(TraceFormatError, match="has no decision"):
        trace.with_decision(0, 1)
    with pytest.raises(TraceFormatError, match="out of range"):
        trace.with_decision(99, 1)


def test_queries() -> None:
    sch = tc.Schedule(two_stage(8))
    b, c = sch.get_block("B"), sch.get_block("C")
    assert [sch.get(x).name for x in sch.get_child_blocks(sch.get_block("root"))] == ["B", "C"]
    assert [sch.get(x).name for x in sch.get_consumers(b)] == ["C"]
    assert [sch.get(x).name for x in sch.get_producers(c)] == ["B"]
    assert sch.get_producers(b) == []
    assert sch.get_consumers(c) == []
    i, _ = sch.get_loops(b)
    assert [sch.get(x).name for x in sch.get_child_blocks(i)] == ["B"]
    with pytest.raises(tc.errors.ScheduleError, match='no block named "Z"'):
        sch.get_block("Z")
    assert isinstance(sch.mod, tc.ir.IRModule)
    assert sch.mod["main"] is sch.func


def test_module_input_and_func_name() -> None:
    mod = tc.ir.IRModule({"mm": matmul(8, 8, 8)})
    sch = tc.Schedule(mod, func_name="mm")
    sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 4])
    assert sch.mod["mm"] is sch.func
    with pytest.raises(tc.errors.ScheduleError, match="no function"):
        tc.Schedule(mod)


def test_try_rolls_back_and_copy_is_independent() -> None:
    sch = _scheduled()
    loops = sch.get_loops(sch.get_block("C"))
    func, n = sch.func, len(sch.trace)

    def two_steps() -> None:
        sch.split(loops[-1], [None, 4])
        sch.fuse(loops[0], loops[-1])  # not adjacent: fails after the split committed

    failed = sch.try_(two_steps)
    assert not failed
    assert sch.func is func
    assert len(sch.trace) == n
    assert isinstance(failed.error, tc.errors.ScheduleError)
    assert sch.try_(sch.split, loops[-1], [None, 4]).value is not None
    other = sch.copy()
    other.unroll(other.get_loops(other.get_block("C"))[-1])
    assert len(other.trace) == len(sch.trace) + 3
    assert sch.func is not other.func
    twin = sch.copy()
    assert sch.fork_seed() == twin.fork_seed()


def test_index_map_in_trace_roundtrip() -> None:
    before = two_stage(8)
    sch = tc.Schedule(before)
    sch.transform_layout(sch.get_block("B"), ("write", 0), lambda i, j: (j, i))
    js = sch.trace.as_json()
    assert "lambda i, j: (j, i)" in sch.trace.as_python()
    sch2 = tc.Schedule(before)
    Trace.from_json(js).apply_to_schedule(sch2)
    assert tc.ir.structural_equal(sch2.func, sch.func)


def test_traces_recorded_before_the_restructuring_still_load_and_replay() -> None:
    """traces_v1.json: traces and result hashes recorded by the previous implementation."""
    import trace_fuzz

    from tilecraft.schedule import Schedule

    recorded = json.loads((Path(__file__).parent / "traces_v1.json").read_text())
    assert set(recorded) == set(trace_fuzz.WORKLOADS)
    for name, entry in recorded.items():
        trace = Trace.from_json(entry["trace"])
        assert trace.as_json() == entry["trace"]
        sch = Schedule(trace_fuzz.WORKLOADS[name][0]())
        trace.apply_to_schedule(sch)
        assert tc.ir.structural_hash(sch.func) == entry["structural_hash"], name
