"""parallel / vectorize / unroll / bind / annotate / unannotate."""

from __future__ import annotations

import pytest
from sched_loop_helpers import ADD_ONE_BEFORE, add_one_script, matmul, same_result

import tilecraft as tc
from tilecraft.ir import ForKind
from tilecraft.schedule.testing_utils import assert_fails_unchanged, verify_trace_roundtrip
from tilecraft.testing import assert_ir_equal

BEFORE = ADD_ONE_BEFORE
EXPECTED = add_one_script("for i in T.parallel(4)", "for j in T.vectorized(8)")


def test_parallel_vectorize() -> None:
    before = tc.script.parse(BEFORE)
    sch = tc.Schedule(before)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.parallel(i)
    sch.vectorize(j)
    assert_ir_equal(sch.func, tc.script.parse(EXPECTED))
    same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


def test_unroll_reduction_loop_and_parallel_spatial() -> None:
    before = matmul(16, 16, 8)
    sch = tc.Schedule(before)
    i, _j, k = sch.get_loops(sch.get_block("C"))
    sch.unroll(k)
    sch.parallel(i)
    assert sch.get(k).kind is ForKind.UNROLLED
    assert sch.get(i).kind is ForKind.PARALLEL
    same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


def test_bind_threads() -> None:
    before = matmul(16, 16, 8)
    sch = tc.Schedule(before)
    i, j, _k = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    assert sch.get(i).thread == "blockIdx.x"
    assert sch.get(j).kind is ForKind.THREAD_BINDING
    verify_trace_roundtrip(sch, before)
    # A GPU schedule keeps its serial meaning: run it through CPU emulation.
    tc.testing.check_numeric(before, sch.func, emulate_gpu=True)


def test_bind_reduction_to_thread_is_allowed() -> None:
    sch = tc.Schedule(matmul(8, 8, 32))
    _, _, k = sch.get_loops(sch.get_block("C"))
    sch.bind(k, "threadIdx.x")
    assert sch.get(k).thread == "threadIdx.x"


@pytest.mark.parametrize("prim", ["parallel", "vectorize"])
def test_parallel_vectorize_reject_reduction_loop(prim: str) -> None:
    sch = tc.Schedule(matmul(8, 8, 8))
    _, _, k = sch.get_loops(sch.get_block("C"))
    err = assert_fails_unchanged(sch, prim, k, match="binds reduce iterator")
    assert err.primitive == prim
    assert "Requires:" in str(err)


@pytest.mark.parametrize("prim", ["parallel", "vectorize", "unroll"])
def test_kind_primitives_require_serial(prim: str) -> None:
    sch = tc.Schedule(tc.script.parse(BEFORE))
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.bind(i, "blockIdx.x")
    assert_fails_unchanged(sch, prim, i, match="bound to")


def test_parallel_rejects_reduction_block_not_bound() -> None:
    sch = tc.Schedule(matmul(8, 8, 8))
    i, _, _ = sch.get_loops(sch.get_block("C"))
    u = sch.add_unit_loop(i)
    assert_fails_unchanged(sch, "parallel", u, match="does not depend on loop")


def test_bind_rejects_unknown_thread() -> None:
    sch = tc.Schedule(tc.script.parse(BEFORE))
    i, _ = sch.get_loops(sch.get_block("B"))
    assert_fails_unchanged(sch, "bind", i, "warp.x", match="expected one of")


def test_bind_rejects_nested_same_axis() -> None:
    sch = tc.Schedule(tc.script.parse(BEFORE))
    i, j = sch.get_loops(sch.get_block("B"))
    sch.bind(i, "threadIdx.x")
    assert_fails_unchanged(sch, "bind", j, "threadIdx.x", match="already bound")


def test_bind_block_idx_rejects_reduction() -> None:
    sch = tc.Schedule(matmul(8, 8, 8))
    _, _, k = sch.get_loops(sch.get_block("C"))
    assert_fails_unchanged(sch, "bind", k, "blockIdx.x", match="reduce iterator")


def test_annotate_and_unannotate() -> None:
    before = tc.script.parse(BEFORE)
    sch = tc.Schedule(before)
    blk = sch.get_block("B")
    i, _ = sch.get_loops(blk)
    sch.annotate(blk, "meta_schedule.tiling_structure", "SSRSRS")
    sch.annotate(i, "pragma_auto_unroll_max_step", 16)
    assert sch.get(blk).annotations["meta_schedule.tiling_structure"] == "SSRSRS"
    assert sch.get(i).annotations["pragma_auto_unroll_max_step"] == 16
    verify_trace_roundtrip(sch, before)
    sch.unannotate(blk, "meta_schedule.tiling_structure")
    sch.unannotate(i, "pragma_auto_unroll_max_step")
    assert_ir_equal(sch.func, before)
    verify_trace_roundtrip(sch, before)


def test_unannotate_requires_present_key() -> None:
    sch = tc.Schedule(tc.script.parse(BEFORE))
    assert_fails_unchanged(sch, "unannotate", sch.get_block("B"), "nope", match="no annotation")


def test_annotate_rejects_bad_value() -> None:
    sch = tc.Schedule(tc.script.parse(BEFORE))
    assert_fails_unchanged(sch, "annotate", sch.get_block("B"), "k", object(), match="value")
    assert_fails_unchanged(sch, "annotate", sch.get_block("B"), "", 1, match="key")


# -- loop-kind nesting (regression: a parallel loop inside a vectorized one made C that gcc
# rejects, "OpenMP constructs may not be nested inside simd region")
def _two_loops() -> tuple[tc.Schedule, tc.schedule.LoopRV, tc.schedule.LoopRV]:
    sch = tc.Schedule(tc.script.parse(BEFORE))
    i, j = sch.get_loops(sch.get_block("B"))
    return sch, i, j


def test_parallel_rejected_inside_vectorized_loop() -> None:
    sch, i, j = _two_loops()
    sch.vectorize(i)
    assert_fails_unchanged(
        sch, "parallel", j, match='parallel loop "j" would lie inside vectorized'
    )


def test_vectorize_rejected_around_parallel_loop() -> None:
    sch, i, j = _two_loops()
    sch.parallel(j)
    assert_fails_unchanged(
        sch, "vectorize", i, match='parallel loop "j" would lie inside vectorized'
    )


def test_nested_parallel_rejected_both_orders() -> None:
    sch, i, j = _two_loops()
    sch.parallel(i)
    assert_fails_unchanged(sch, "parallel", j, match='parallel loop "j" would lie inside parallel')
    sch2, i2, j2 = _two_loops()
    sch2.parallel(j2)
    assert_fails_unchanged(
        sch2, "parallel", i2, match='parallel loop "j" would lie inside parallel'
    )


def test_nested_vectorize_rejected_both_orders() -> None:
    sch, i, j = _two_loops()
    sch.vectorize(i)
    assert_fails_unchanged(sch, "vectorize", j, match='vectorized loop "j" would lie inside')
    sch2, i2, j2 = _two_loops()
    sch2.vectorize(j2)
    assert_fails_unchanged(sch2, "vectorize", i2, match='vectorized loop "j" would lie inside')


def test_nesting_checked_across_blocks() -> None:
    """A loop of another block's nest counts: the consumer's loop encloses the producer's."""
    a = tc.te.placeholder((4, 8), "float32", name="A")
    b = tc.te.compute((4, 8), lambda i, j: a[i, j] + 1.0, name="B")
    c = tc.te.compute((4, 8), lambda i, j: b[i, j] * 2.0, name="C")
    sch = tc.Schedule(tc.te.create_prim_func([a, c]))
    i, _ = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), i)
    sch.vectorize(i)
    (inner,) = sch.get_loops(sch.get_block("B"))[1:]
    assert_fails_unchanged(sch, "parallel", inner, match="would lie inside vectorized loop")


def test_reorder_rejected_when_it_nests_parallel_inside_vectorized() -> None:
    sch, i, j = _two_loops()
    sch.parallel(i)
    sch.vectorize(j)
    assert_fails_unchanged(sch, "reorder", j, i, match='parallel loop "i" would lie inside')
    sch.reorder(i, j)  # the same order is fine


def test_parallel_outer_vectorized_inner_compiles() -> None:
    before = tc.script.parse(BEFORE)
    sch = tc.Schedule(before)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.vectorize(j)
    sch.parallel(i)
    same_result(before, sch.func)
