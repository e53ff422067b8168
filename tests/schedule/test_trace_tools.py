"""Trace tools: simplified(), replay with overridden decisions, the postprocessing marker."""

from __future__ import annotations

import pytest
from sched_loop_helpers import matmul

import tilecraft as tc
from tilecraft.errors import ScheduleError
from tilecraft.schedule import Schedule, Trace, TraceFormatError
from tilecraft.testing import verify_trace_roundtrip


def _tiled(postproc: bool = True) -> Schedule:
    """Tile the matmul with sampled factors, with dead queries/samples, then postprocess."""
    sch = Schedule(matmul(32, 32, 32), seed=0)
    c = sch.get_block("C")
    i, j, _k = sch.get_loops(c)
    sch.get_consumers(c)  # dead query
    sch.sample_categorical([1, 2, 4], [1, 1, 1], decision=2)  # dead sample
    vi = sch.sample_perfect_tile(i, n=2, decision=[4, 8])
    vj = sch.sample_perfect_tile(j, n=2, decision=[8, 4])
    io, ii = sch.split(i, vi)
    jo, ji = sch.split(j, vj)
    sch.reorder(io, jo, ii, ji)
    sch.get_loops(c)  # dead query
    if postproc:
        sch.enter_postproc()
        sch.parallel(io)
        sch.get_child_blocks(sch.get_block("root"))  # dead, after the marker
    return sch


def _replayed(trace: Trace, **kw: object) -> Schedule:
    sch = Schedule(matmul(32, 32, 32))
    trace.apply_to_schedule(sch, **kw)  # type: ignore[arg-type]
    return sch


def test_simplified_drops_dead_instructions_and_replays_the_same() -> None:
    sch = _tiled()
    simple = sch.trace.simplified(remove_postproc=False)
    kinds = [inst.kind for inst in simple]
    assert kinds == [
        "get_block", "get_loops", "sample_perfect_tile", "sample_perfect_tile", "split",
        "split", "reorder", "enter_postproc", "parallel",
    ]  # fmt: skip
    assert len(simple) < len(sch.trace)
    assert tc.ir.structural_equal(_replayed(simple).func, sch.func)
    # simplifying again changes nothing; JSON and Python forms of the result work
    assert simple.simplified(remove_postproc=False).as_json() == simple.as_json()
    assert Trace.from_json(simple.as_json()).as_python() == simple.as_python()


def test_simplified_can_remove_postprocessing() -> None:
    sch = _tiled()
    pre = sch.trace.simplified(remove_postproc=True)
    assert [inst.kind for inst in pre][-1] == "reorder"
    assert "enter_postproc" not in pre.as_python()
    assert tc.ir.structural_equal(_replayed(pre).func, _tiled(postproc=False).func)


def test_replay_can_stop_at_the_postproc_marker() -> None:
    sch = _tiled()
    assert sch.trace.postproc_index() is not None
    assert "sch.enter_postproc()" in sch.trace.as_python()
    stopped = _replayed(sch.trace, remove_postproc=True)
    assert tc.ir.structural_equal(stopped.func, _tiled(postproc=False).func)
    assert stopped.trace.postproc_index() is None
    full = _replayed(Trace.from_json(sch.trace.as_json()))
    assert tc.ir.structural_equal(full.func, sch.func)
    verify_trace_roundtrip(sch, matmul(32, 32, 32))


def test_replay_with_overridden_decisions() -> None:
    sch = _tiled(postproc=False)
    trace = sch.trace
    first = trace.sampling_indices()[1]  # the tile of i
    want = _replayed(trace.with_decision(first, [2, 16]))
    got = _replayed(trace, decisions={first: [2, 16]})
    assert tc.ir.structural_equal(got.func, want.func)
    assert not tc.ir.structural_equal(got.func, sch.func)
    assert got.trace[first].decision == (2, 16)  # the replayed schedule records what it used
    assert trace[first].decision == (4, 8)  # the trace itself is unchanged
    negative = first - len(trace)
    again = _replayed(trace, decisions={negative: [2, 16]})
    assert tc.ir.structural_equal(again.func, want.func)


@pytest.mark.parametrize(
    ("decisions", "error", "match"),
    [
        ({0: 1}, TraceFormatError, "has no decision"),
        ({99: 1}, TraceFormatError, "out of range"),
        ({"2": 1}, TraceFormatError, "index must be an int"),
        ([(2, 1)], TraceFormatError, "decisions must be a mapping"),
        ({"tile": None}, TraceFormatError, "index must be an int"),
    ],
)
def test_bad_overrides_are_rejected(decisions: object, error: type, match: str) -> None:
    trace = _tiled(postproc=False).trace
    sch = Schedule(matmul(32, 32, 32))
    with pytest.raises(error, match=match):
        trace.apply_to_schedule(sch, decisions=decisions)  # type: ignore[arg-type]
    assert len(sch.trace) == 0


def test_a_decision_that_does_not_fit_fails_cleanly() -> None:
    trace = _tiled(postproc=False).trace
    tile = trace.sampling_indices()[1]
    sch = Schedule(matmul(32, 32, 32))
    with pytest.raises(ScheduleError, match="sample_perfect_tile: argument 'decision'"):
        trace.apply_to_schedule(sch, decisions={tile: "x"})
    with pytest.raises(ScheduleError, match="no longer fits"):
        trace.apply_to_schedule(sch, decisions={tile: [3, 3]})
    assert len(sch.trace) == 0
    with pytest.raises(TraceFormatError, match="remove_postproc must be a bool"):
        trace.apply_to_schedule(sch, remove_postproc="yes")  # type: ignore[arg-type]
    with pytest.raises(TraceFormatError, match="remove_postproc must be a bool"):
        trace.simplified(remove_postproc=None)  # type: ignore[arg-type]


def test_trace_holds_only_instructions() -> None:
    with pytest.raises(TraceFormatError, match="sequence of Instruction"):
        Trace([1, 2])  # type: ignore[list-item]
    with pytest.raises(TraceFormatError, match="sequence of Instruction"):
        Trace(5)  # type: ignore[arg-type]
    assert len(Trace(_tiled().trace.insts)) == len(_tiled().trace)
