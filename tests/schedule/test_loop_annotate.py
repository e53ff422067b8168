"""parallel / vectorize / unroll / bind / annotate / unannotate."""

from __future__ import annotations

import pytest
from sched_loop_helpers import matmul, same_result

import tilecraft as tc
from tilecraft.ir import ForKind
from tilecraft.schedule.testing_utils import assert_fails_unchanged, verify_trace_roundtrip
from tilecraft.testing import assert_ir_equal

BEFORE = """
@T.prim_func
def main(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
    with T.block("root"):
        for i, j in T.grid(4, 8):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                vj = T.axis.spatial(8, j)
                T.reads(A[vi, vj])
                T.writes(B[vi, vj])
                B[vi, vj] = A[vi, vj] + T.float32(1.0)
"""

EXPECTED = """
@T.prim_func
def main(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
    with T.block("root"):
        for i in T.parallel(4):
            for j in T.vectorized(8):
                with T.block("B"):
                    vi = T.axis.spatial(4, i)
                    vj = T.axis.spatial(8, j)
                    T.reads(A[vi, vj])
                    T.writes(B[vi, vj])
                    B[vi, vj] = A[vi, vj] + T.float32(1.0)
"""


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
