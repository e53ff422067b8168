"""fuse / reorder / add_unit_loop: expected IR, numeric check, replay, failure per requirement."""

from __future__ import annotations

from sched_loop_helpers import ADD_ONE_BEFORE, add_one_script, matmul, same_result, two_stage

import tilecraft as tc
from tilecraft.schedule.testing_utils import assert_fails_unchanged, verify_trace_roundtrip
from tilecraft.testing import assert_ir_equal

BEFORE = ADD_ONE_BEFORE
FUSED = add_one_script("for i_j_fused in range(32)", vi="i_j_fused // 8", vj="i_j_fused % 8")
REORDERED = add_one_script("for j, i in T.grid(8, 4)")
UNIT = add_one_script("for u, i, j in T.grid(1, 4, 8)")


def test_fuse_two_loops() -> None:
    before = tc.script.parse(BEFORE)
    sch = tc.Schedule(before)
    i, j = sch.get_loops(sch.get_block("B"))
    fused = sch.fuse(i, j)
    assert_ir_equal(sch.func, tc.script.parse(FUSED))
    assert sch.get(fused).extent.value == 32
    same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


def test_fuse_split_roundtrip_on_matmul() -> None:
    before = matmul(16, 12, 8)
    sch = tc.Schedule(before)
    i, j, _k = sch.get_loops(sch.get_block("C"))
    f = sch.fuse(i, j)
    sch.split(f, [None, 5])
    same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


def test_fuse_requires_adjacent_nested_loops() -> None:
    sch = tc.Schedule(matmul(8, 8, 8))
    i, _, k = sch.get_loops(sch.get_block("C"))
    assert_fails_unchanged(sch, "fuse", i, k, match="not adjacent and perfectly nested")
    assert_fails_unchanged(sch, "fuse", k, i, match="not adjacent")


def test_fuse_requires_serial_loops() -> None:
    sch = tc.Schedule(tc.script.parse(BEFORE))
    i, j = sch.get_loops(sch.get_block("B"))
    sch.vectorize(j)
    assert_fails_unchanged(sch, "fuse", i, j, match="is vectorized")


def test_fuse_requires_distinct_loops() -> None:
    sch = tc.Schedule(tc.script.parse(BEFORE))
    i, _ = sch.get_loops(sch.get_block("B"))
    assert_fails_unchanged(sch, "fuse", i, i, match="given twice")


def test_fuse_requires_loops() -> None:
    sch = tc.Schedule(tc.script.parse(BEFORE))
    assert_fails_unchanged(sch, "fuse", match="at least one loop")


def test_reorder_swaps_loops() -> None:
    before = tc.script.parse(BEFORE)
    sch = tc.Schedule(before)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.reorder(j, i)
    assert_ir_equal(sch.func, tc.script.parse(REORDERED))
    same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


def test_reorder_keeps_unlisted_loops_in_place() -> None:
    before = matmul(8, 8, 8)
    sch = tc.Schedule(before)
    i, _j, k = sch.get_loops(sch.get_block("C"))
    sch.reorder(k, i)
    order = [sch.get(x).loop_var.name for x in sch.get_loops(sch.get_block("C"))]
    assert order == ["k", "j", "i"]
    same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


def test_reorder_requires_one_chain() -> None:
    sch = tc.Schedule(two_stage(8))
    bi, _ = sch.get_loops(sch.get_block("B"))
    _, cj = sch.get_loops(sch.get_block("C"))
    assert_fails_unchanged(sch, "reorder", cj, bi, match="not in one chain")


def test_reorder_does_not_cross_blocks() -> None:
    sch = tc.Schedule(two_stage(8))
    _bi, _bj = sch.get_loops(sch.get_block("B"))
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0])
    c_loops = sch.get_loops(sch.get_block("C"))
    b_loops = sch.get_loops(sch.get_block("B"))
    assert_fails_unchanged(sch, "reorder", b_loops[-1], c_loops[0], match="lies between")


def test_reorder_requires_perfect_nest() -> None:
    sch = tc.Schedule(two_stage(8))
    ci = sch.get_loops(sch.get_block("C"))[0]
    sch.compute_at(sch.get_block("B"), ci)
    cj = sch.get_loops(sch.get_block("C"))[1]
    assert_fails_unchanged(sch, "reorder", cj, ci, match="perfectly nested")


def test_reorder_requires_distinct_loops() -> None:
    sch = tc.Schedule(tc.script.parse(BEFORE))
    i, j = sch.get_loops(sch.get_block("B"))
    assert_fails_unchanged(sch, "reorder", i, j, i, match="given twice")


def test_add_unit_loop_above_loop_and_block() -> None:
    before = tc.script.parse(BEFORE)
    sch = tc.Schedule(before)
    i, _ = sch.get_loops(sch.get_block("B"))
    u = sch.add_unit_loop(i)
    assert_ir_equal(sch.func, tc.script.parse(UNIT))
    assert sch.get(u).extent.value == 1
    u2 = sch.add_unit_loop(sch.get_block("B"))
    assert sch.get_loops(sch.get_block("B"))[-1].var is u2.var
    same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


def test_add_unit_loop_rejects_root() -> None:
    sch = tc.Schedule(tc.script.parse(BEFORE))
    assert_fails_unchanged(sch, "add_unit_loop", sch.get_block("root"), match="root block")
