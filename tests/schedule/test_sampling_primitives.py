"""Sampling instructions: determinism, validity, fixed decisions, mutated replays."""

from __future__ import annotations

import math

import pytest
from sched_loop_helpers import matmul, same_result, two_stage

import tilecraft as tc
from tilecraft.schedule.testing_utils import assert_fails_unchanged, verify_trace_roundtrip


def _tile(seed: int, n: int = 3, limit: int = 16) -> list[int]:
    sch = tc.Schedule(matmul(96, 8, 8), seed=seed)
    i = sch.get_loops(sch.get_block("C"))[0]
    return [int(v) for v in sch.sample_perfect_tile(i, n=n, max_innermost_factor=limit)]


def test_perfect_tile_is_deterministic_and_valid() -> None:
    seen = set()
    for seed in range(20):
        tiles = _tile(seed)
        assert tiles == _tile(seed)
        assert math.prod(tiles) == 96
        assert tiles[-1] <= 16
        assert len(tiles) == 3
        seen.add(tuple(tiles))
    assert len(seen) > 3


def test_perfect_tile_factors_drive_split_and_replay() -> None:
    before = matmul(32, 16, 16)
    sch = tc.Schedule(before, seed=3)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    factors = sch.sample_perfect_tile(i, n=2, max_innermost_factor=8)
    loops = sch.split(i, factors)
    assert [sch.get(x).extent.value for x in loops] == [int(f) for f in factors]
    same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


def test_with_decision_changes_replay() -> None:
    before = matmul(32, 16, 16)
    sch = tc.Schedule(before, seed=0)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, sch.sample_perfect_tile(i, n=2, decision=[4, 8]))
    idx = sch.trace.sampling_indices()
    assert idx == [2]
    mutated = sch.trace.with_decision(2, [2, 16])
    sch2 = tc.Schedule(before)
    mutated.apply_to_schedule(sch2)
    loops = sch2.get_loops(sch2.get_block("C"))
    assert [sch2.get(x).extent.value for x in loops[:2]] == [2, 16]
    same_result(before, sch2.func)
    assert "decision=[2, 16]" in sch2.trace.as_python()


def test_decision_that_no_longer_fits_raises() -> None:
    sch = tc.Schedule(matmul(32, 16, 16), seed=0)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, sch.sample_perfect_tile(i, n=2, decision=[4, 8]))
    bad = sch.trace.with_decision(2, [3, 8])
    with pytest.raises(tc.errors.ScheduleError, match="no longer fits"):
        bad.apply_to_schedule(tc.Schedule(matmul(32, 16, 16)))


def test_perfect_tile_failures() -> None:
    sch = tc.Schedule(matmul(32, 16, 16), seed=0)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    assert_fails_unchanged(sch, "sample_perfect_tile", i, 0, match="'n'")
    assert_fails_unchanged(sch, "sample_perfect_tile", i, 2, 16, [4, 4], match="no longer fits")
    assert_fails_unchanged(sch, "sample_perfect_tile", i, 2, 4, [2, 16], match="max_innermost")
    assert_fails_unchanged(sch, "sample_perfect_tile", i, 2, 16, [32], match="2 positive ints")
    n = tc.ir.Var("n")
    A = tc.te.placeholder((n,), "float32", name="A")
    B = tc.te.compute((n,), lambda x: A[x] * 2.0, name="B")
    sym = tc.Schedule(tc.te.create_prim_func([A, B]))
    (loop,) = sym.get_loops(sym.get_block("B"))
    assert_fails_unchanged(sym, "sample_perfect_tile", loop, 2, match="symbolic extent")
    prime = tc.Schedule(matmul(17, 4, 4))
    pi = prime.get_loops(prime.get_block("C"))[0]
    assert_fails_unchanged(prime, "sample_perfect_tile", pi, 1, 16, match="at most 16")


def test_categorical() -> None:
    picks = []
    for seed in range(30):
        sch = tc.Schedule(matmul(8, 8, 8), seed=seed)
        v = sch.sample_categorical([16, 64, 512], [0.2, 0.0, 0.8])
        assert isinstance(v, int)
        assert v in (16, 512)
        picks.append(int(v))
    assert set(picks) == {16, 512}
    sch = tc.Schedule(matmul(8, 8, 8), seed=0)
    assert sch.sample_categorical([1, 2], [0.5, 0.5], decision=1) == 2
    assert_fails_unchanged(sch, "sample_categorical", [1, 2], [0.5, 0.5], 2, match="no longer fits")
    assert_fails_unchanged(sch, "sample_categorical", [1, 2], [0.5], match="equally many")
    assert_fails_unchanged(sch, "sample_categorical", [1, 2], [-1.0, 0.5], match="non-negative")
    js = sch.trace.as_json()
    assert tc.schedule.Trace.from_json(js).as_json() == js


def test_compute_location() -> None:
    before = two_stage(8)
    seen = set()
    for seed in range(8):
        sch = tc.Schedule(before, seed=seed)
        blk = sch.get_block("B")
        loc = sch.sample_compute_location(blk)
        sch.compute_at(blk, loc)
        seen.add(sch.trace[-2].decision)
        same_result(before, sch.func)
        verify_trace_roundtrip(sch, before)
    assert len(seen) > 1
    sch = tc.Schedule(before)
    blk = sch.get_block("B")
    loc = sch.sample_compute_location(blk, decision=0)
    sch.compute_at(blk, loc)
    assert sch.get_loops(blk)[0].var is sch.get_loops(sch.get_block("C"))[0].var
    fresh = tc.Schedule(before)
    assert_fails_unchanged(
        fresh, "sample_compute_location", fresh.get_block("B"), 7, match="no longer fits"
    )
