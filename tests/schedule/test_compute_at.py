"""compute_at and reverse_compute_at: expected IR, numerics and one failure per rule."""

from __future__ import annotations

import pytest
from compute_workloads import (
    assert_same_result,
    assert_script,
    elementwise_chain,
    matmul,
    row_sum_scale,
)
from named_calls import cache_read, cache_write, compute_at, decompose_reduction, reverse_compute_at

import tilecraft as tc
from tilecraft.errors import ScheduleError
from tilecraft.schedule import Schedule, _tree
from tilecraft.testing import check_numeric, verify_trace_roundtrip

EXPECTED_AT = """\
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    with T.block("root"):
        B = T.alloc_buffer((8, 8), "float32")
        for i in range(8):
            for ax0 in range(8):
                with T.block("B"):
                    vi = T.axis.spatial(8, ax0)
                    vj = T.axis.spatial(8, i)
                    T.reads(A[vi, vj])
                    T.writes(B[vi, vj])
                    B[vi, vj] = A[vi, vj] + T.float32(1.0)
            for j in range(8):
                with T.block("C"):
                    vi = T.axis.spatial(8, i)
                    vj = T.axis.spatial(8, j)
                    T.reads(B[vj, vi])
                    T.writes(C[vi, vj])
                    C[vi, vj] = B[vj, vi] * T.float32(2.0)"""


def loop(func, block, k):
    return _tree.loops_above(func, block)[k].loop_var


def test_compute_at_transposed_consumer() -> None:
    before = elementwise_chain()
    after = compute_at(before, "B", loop(before, "C", 0))
    assert_script(after, EXPECTED_AT)
    assert_same_result(before, after)


def test_compute_at_inner_loop_and_reduction_producer() -> None:
    before = matmul(8, relu=True)
    after = compute_at(before, "C", loop(before, "D", 1))
    assert [lp.loop_var.name for lp in _tree.loops_above(after, "C")] == ["i", "j", "ax2"]
    assert_same_result(before, after)


def test_compute_at_preserve_unit_loops() -> None:
    before = matmul(4, relu=True)
    after = compute_at(before, "C", loop(before, "D", 1), preserve_unit_loops=True)
    assert len(_tree.loops_above(after, "C")) == 5
    assert_same_result(before, after)


def test_compute_at_row_reduction() -> None:
    before = row_sum_scale()
    after = compute_at(before, "S", loop(before, "Y", 0))
    assert_same_result(before, after)


def test_cache_read_then_compute_at() -> None:
    before = matmul(8, relu=True)
    func, name = cache_read(before, "C", 1, "shared")
    after = compute_at(func, name, loop(func, "C", 0))
    assert_same_result(before, after)


def test_reverse_compute_at() -> None:
    before = matmul(8, relu=True)
    func, name = cache_write(before, "C", 0, "local")
    after = reverse_compute_at(func, name, loop(func, "C", 0))
    assert next(lp.loop_var.name for lp in _tree.loops_above(after, name)) == "i"
    assert_same_result(before, after)
    after2 = reverse_compute_at(after, "D", loop(after, "C", 0))
    assert_same_result(before, after2)


def test_compute_at_rejects_loop_above_block() -> None:
    f = elementwise_chain()
    with pytest.raises(ScheduleError, match=r"compute_at: .*already under loop"):
        compute_at(f, "B", loop(f, "B", 0))


def test_compute_at_rejects_output_buffer() -> None:
    f = elementwise_chain()
    with pytest.raises(ScheduleError, match=r'compute_at: .*function output "C"'):
        compute_at(f, "C", loop(f, "B", 0))


def test_compute_at_rejects_consumer_outside_loop() -> None:
    f = matmul(4, relu=True)
    func, _name = cache_write(f, "C", 0, "local")
    # "C" writes C_local, read by the copy block; the copy block's loops are not above it
    with pytest.raises(ScheduleError, match=r"(?s)compute_at: .*every consumer"):
        compute_at(func, "C", loop(func, "D", 0))


def test_compute_at_rejects_other_writers() -> None:
    f = matmul(4, relu=True)
    func, _ = decompose_reduction(f, "C", loop(f, "C", 0))
    with pytest.raises(ScheduleError, match=r"compute_at: .*other writers"):
        compute_at(func, "C", loop(func, "D", 0))


def test_compute_at_rejects_bad_index() -> None:
    f = elementwise_chain()
    with pytest.raises(ScheduleError, match=r"compute_at: index 5 is not a valid position"):
        compute_at(f, "B", loop(f, "C", 0), index=5)


def test_compute_at_rejects_a_loop_of_another_function() -> None:
    f = elementwise_chain()
    other = elementwise_chain()
    with pytest.raises(ScheduleError, match=r'compute_at: loop handle "i" is stale'):
        compute_at(f, "B", loop(other, "C", 0))


def test_reverse_compute_at_rejects_no_producer() -> None:
    f = elementwise_chain()
    with pytest.raises(ScheduleError, match=r'reverse_compute_at: block "B" has no producers'):
        reverse_compute_at(f, "B", loop(f, "C", 0))


def test_reverse_compute_at_rejects_producer_outside() -> None:
    f = matmul(4, relu=True)
    func, _name = cache_write(f, "C", 0, "local")
    with pytest.raises(ScheduleError, match=r"(?s)reverse_compute_at: .*every producer"):
        reverse_compute_at(func, "D", loop(func, "C", 0))


def test_compute_at_under_a_blockized_consumer_uses_the_outer_block_region() -> None:
    """A consumer blockized into an outer block: its inner block's reads use the outer
    block's iterator, not a loop. The producer's region comes from the outer block (one row
    per iteration), with no free variable; replaying the schedule gives the same function."""
    x = tc.te.placeholder((8, 32), "float32", name="x")
    before = tc.te.create_prim_func([x, tc.topi.softmax(x)])
    sch = Schedule(before)
    _, inner = sch.get_loops(sch.get_block("T_softmax_norm"))
    sch.blockize(inner)
    expsum = sch.get_block("T_softmax_expsum")
    (row,) = sch.get_loops(sch.get_block("T_softmax_norm_o"))
    sch.compute_at(expsum, row)
    tc.ir.verify(sch.func)
    extents = [sch.get(lp).extent for lp in sch.get_loops(expsum)]
    assert [e.value for e in extents] == [8, 32]  # one row per iteration of the row loop
    check_numeric(before, sch.func)
    verify_trace_roundtrip(sch, before)


def test_reverse_compute_at_clips_the_loops_to_the_consumers_domain() -> None:
    """A consumer of a padded producer (200 rows written, 197 read) runs over the 197 rows
    its domain holds, in a loop of that extent with no predicate: gcc runs a vector loop
    holding a guard one element at a time."""
    a = tc.te.placeholder((197, 64), "float32", name="A")
    b = tc.te.placeholder((64, 197), "float32", name="B")
    func = tc.te.create_prim_func([a, b, tc.topi.matmul(a, b)])
    sch = Schedule(func)
    main = sch.get_block("matmul")
    sch.pad_einsum(main, [8, 16, 1])
    i, _, _ = sch.get_loops(main)
    i_o, _ = sch.split(i, [None, 40])
    sch.reverse_compute_at(sch.get_block("matmul_unpad"), i_o)
    text = sch.func.script()
    assert "for ax0_1, ax1_1 in T.grid(40, 197):" in text, text
    # the rows' bound varies with i0_0 and stays a predicate; the columns' is the extent
    assert "T.where(i0_0 * 40 + ax0_1 < 197)" in text, text
    check_numeric(sch.func, func)
    verify_trace_roundtrip(sch, func)


def test_compute_at_drops_a_guarded_unit_loop_with_its_guard() -> None:
    # softmax over the middle axis of (1, 1, 1): the exponentials are demanded at the
    # reduction's index 0 and the result's index i1, an extent varying with i1 bounded to 1;
    # the loop is dropped and its guard must not name it (regression: a free variable)
    x = tc.te.placeholder((1, 1, 1), "float32", name="x")
    before = tc.te.create_prim_func([x, tc.topi.softmax(x, axis=1)])
    sch = Schedule(before)
    row = sch.get_loops(sch.get_block("T_softmax_norm"))[2]
    sch.compute_at(sch.get_block("T_softmax_expsum"), row)
    sch.compute_at(sch.get_block("T_softmax_exp"), row)
    tc.ir.verify(sch.func)
    assert_same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)
