"""decompose_reduction and rfactor: expected IR, numerics and one failure per rule."""

from __future__ import annotations

import pytest
from compute_workloads import (
    assert_same_result,
    assert_script,
    elementwise_chain,
    matmul,
    row_sum_scale,
)
from named_calls import compute_at, decompose_reduction, rfactor

from tilecraft.errors import ScheduleError
from tilecraft.schedule import _tree

DECOMPOSED = """\
@T.prim_func
def main(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32"), C: T.Buffer((4, 4), "float32")):
    with T.block("root"):
        for i, j in T.grid(4, 4):
            with T.block("C_init"):
                vi = T.axis.spatial(4, i)
                vj = T.axis.spatial(4, j)
                T.reads()
                T.writes(C[vi, vj])
                C[vi, vj] = T.float32(0.0)
            for k in range(4):
                with T.block("C"):
                    vi = T.axis.spatial(4, i)
                    vj = T.axis.spatial(4, j)
                    vk = T.axis.reduce(4, k)
                    T.reads(A[vi, vk], B[vk, vj], C[vi, vj])
                    T.writes(C[vi, vj])
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]"""  # noqa: E501


def loops(func, block):
    return [lp.loop_var for lp in _tree.loops_above(func, block)]


def test_decompose_reduction_at_k() -> None:
    before = matmul(4)
    after, name = decompose_reduction(before, "C", loops(before, "C")[2])
    assert name == "C_init"
    assert_script(after, DECOMPOSED)
    assert_same_result(before, after)


def test_decompose_reduction_at_outer_loop() -> None:
    before = matmul(8)
    after, _ = decompose_reduction(before, "C", loops(before, "C")[0])
    assert [v.name for v in loops(after, "C_init")] == ["i_init", "j_init"]
    assert_same_result(before, after)


def test_decompose_reduction_errors() -> None:
    f = matmul(4)
    e = elementwise_chain()
    with pytest.raises(ScheduleError, match=r'decompose_reduction: block "B" has no init'):
        decompose_reduction(e, "B", loops(e, "B")[0])
    g = row_sum_scale()
    with pytest.raises(ScheduleError, match=r"decompose_reduction: loop .* is not above"):
        decompose_reduction(g, "S", loops(g, "Y")[0])
    with pytest.raises(ScheduleError, match=r'decompose_reduction: loop handle "i" is stale'):
        decompose_reduction(f, "C", loops(matmul(4), "C")[0])


def test_rfactor_matmul() -> None:
    before = matmul(8)
    after, rf = rfactor(before, loops(before, "C")[2], 0)
    assert rf == "C_rf"
    assert "C_rf = T.alloc_buffer((8, 8, 8)" in after.script()
    assert_same_result(before, after)
    last, _ = rfactor(before, loops(before, "C")[2], -1)
    assert_same_result(before, last)


def test_rfactor_row_sum_then_compute_at() -> None:
    before = row_sum_scale()
    after, rf = rfactor(before, loops(before, "S")[1], 1)
    assert_same_result(before, after)
    moved = compute_at(after, rf, loops(after, "S")[0])
    assert_same_result(before, moved)


def test_rfactor_errors() -> None:
    f = matmul(4)
    i, _j, k = loops(f, "C")
    with pytest.raises(ScheduleError, match=r"rfactor: loop \"i\" is not a reduction loop"):
        rfactor(f, i)
    with pytest.raises(ScheduleError, match=r"rfactor: argument 'factor_axis'"):
        rfactor(f, k, 5)
    decomposed, _ = decompose_reduction(f, "C", i)
    with pytest.raises(ScheduleError, match=r'rfactor: block "C" has no init'):
        rfactor(decomposed, loops(decomposed, "C")[2])
    e = elementwise_chain()
    with pytest.raises(ScheduleError, match=r'rfactor: loop "i" has 0 reduction blocks under it'):
        rfactor(e, loops(e, "B")[0])
    g = row_sum_scale()
    with pytest.raises(ScheduleError, match=r"rfactor: loop .* has 0 reduction blocks under it"):
        rfactor(g, loops(g, "Y")[1])
