"""split: expected IR, numeric equivalence, trace replay, one failure test per requirement."""

from __future__ import annotations

import pytest
from sched_loop_helpers import elementwise, matmul, same_result

import tilecraft as tc
from tilecraft.schedule.testing_utils import assert_fails_unchanged, verify_trace_roundtrip
from tilecraft.testing import assert_ir_equal

BEFORE = """
@T.prim_func
def main(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32")):
    with T.block("root"):
        for i in range(128):
            with T.block("B"):
                vi = T.axis.spatial(128, i)
                T.reads(A[vi])
                T.writes(B[vi])
                B[vi] = A[vi] * T.float32(2.0)
"""

EXPECTED = """
@T.prim_func
def main(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32")):
    with T.block("root"):
        for i_0, i_1 in T.grid(4, 32):
            with T.block("B"):
                vi = T.axis.spatial(128, i_0 * 32 + i_1)
                T.reads(A[vi])
                T.writes(B[vi])
                B[vi] = A[vi] * T.float32(2.0)
"""

EXPECTED_GUARDED = """
@T.prim_func
def main(A: T.Buffer((10,), "float32"), B: T.Buffer((10,), "float32")):
    with T.block("root"):
        for i_0, i_1 in T.grid(3, 4):
            with T.block("B"):
                vi = T.axis.spatial(10, i_0 * 4 + i_1)
                T.where(i_0 * 4 + i_1 < 10)
                T.reads(A[vi])
                T.writes(B[vi])
                B[vi] = A[vi] * T.float32(2.0)
"""


def _loop(sch: tc.Schedule, block: str = "B", k: int = 0) -> tc.schedule.LoopRV:
    return sch.get_loops(sch.get_block(block))[k]


def test_split_inferred_factor() -> None:
    before = tc.script.parse(BEFORE)
    sch = tc.Schedule(before)
    outer, inner = sch.split(_loop(sch), factors=[None, 32])
    assert_ir_equal(sch.func, tc.script.parse(EXPECTED))
    assert sch.get(outer).extent.value == 4
    assert sch.get(inner).extent.value == 32
    same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


def test_split_non_divisible_adds_guard() -> None:
    before = elementwise(10)
    sch = tc.Schedule(before)
    sch.split(_loop(sch), factors=[None, 4])
    assert_ir_equal(sch.func, tc.script.parse(EXPECTED_GUARDED))
    same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


def test_split_three_way_on_matmul_reduction() -> None:
    before = matmul(16, 16, 24)
    sch = tc.Schedule(before)
    k0, k1, k2 = sch.split(_loop(sch, "C", 2), factors=[2, None, 3])
    assert [sch.get(x).extent.value for x in (k0, k1, k2)] == [2, 4, 3]
    same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


def test_split_symbolic_extent() -> None:
    n = tc.ir.Var("n")
    A = tc.te.placeholder((n,), "float32", name="A")
    B = tc.te.compute((n,), lambda i: A[i] * 2.0, name="B")
    before = tc.te.create_prim_func([A, B])
    sch = tc.Schedule(before)
    sch.split(_loop(sch), factors=[None, 4])
    realize = tc.schedule._tree.find_block(sch.func, "B")[0]
    assert isinstance(realize.predicate, tc.ir.LT)
    assert realize.predicate.b is n
    for value in (1, 8, 13):
        same_result(before, sch.func, shape_vars={"n": value})
    verify_trace_roundtrip(sch, before)


def test_split_without_unit_iters() -> None:
    before = elementwise(32)
    sch = tc.Schedule(before)
    loops = sch.split(_loop(sch), factors=[1, 32], preserve_unit_iters=False)
    assert len(loops) == 1
    assert sch.get(loops[0]).extent.value == 32
    same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


@pytest.mark.parametrize(
    ("factors", "match"),
    [
        ([None, None, 4], "at most one None"),
        ([32], "at least 2 factors"),
        ([0, None], "argument 'factors': expected a sequence of positive int or None"),
        ([2, 8], "at least the loop extent"),
    ],
)
def test_split_rejects_bad_factors(factors: list[int | None], match: str) -> None:
    sch = tc.Schedule(elementwise(128))
    err = assert_fails_unchanged(sch, "split", _loop(sch), factors, match=match)
    assert err.primitive == "split"


def test_split_symbolic_extent_needs_inferred_factor() -> None:
    n = tc.ir.Var("n")
    A = tc.te.placeholder((n,), "float32", name="A")
    B = tc.te.compute((n,), lambda i: A[i] * 2.0, name="B")
    sch = tc.Schedule(tc.te.create_prim_func([A, B]))
    assert_fails_unchanged(sch, "split", _loop(sch), [4, 4], match="symbolic extent")


def test_split_requires_serial_loop() -> None:
    sch = tc.Schedule(elementwise(128))
    loop = _loop(sch)
    sch.parallel(loop)
    assert_fails_unchanged(sch, "split", loop, [None, 4], match="is parallel")


def test_split_stale_handle() -> None:
    sch = tc.Schedule(elementwise(128))
    loop = _loop(sch)
    sch.split(loop, [None, 4])
    err = assert_fails_unchanged(sch, "split", loop, [None, 2], match="stale")
    assert "Hint:" in str(err)
