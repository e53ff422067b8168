"""Schedule-level tests: rfactor / decompose_reduction through ``tc.Schedule`` (expected script,
numerics, trace replay, one failure per requirement); layer_norm and conv2d from ``tc.topi``
through compute_at / cache / inline; regressions found by the property test; replaying the
trace's Python text; the public surface of ``tilecraft.schedule``."""

from __future__ import annotations

import pytest
from compute_workloads import (
    assert_same_result,
    assert_script,
    conv2d,
    layer_norm,
    matmul,
    row_sum_scale,
)

import tilecraft as tc
import tilecraft.schedule as tcs
from tilecraft.ir import Select, post_order_visit, structural_equal
from tilecraft.testing import assert_fails_unchanged, check_numeric, verify_trace_roundtrip

RFACTORED = """
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), Y: T.Buffer((8, 8), "float32")):
    with T.block("root"):
        S = T.alloc_buffer((8,), "float32")
        S_rf = T.alloc_buffer((4, 8), "float32")
        for i, k_0, k_1 in T.grid(8, 2, 4):
            with T.block("S_rf"):
                vi = T.axis.spatial(8, i)
                vk_0 = T.axis.reduce(2, k_0)
                vk_1 = T.axis.spatial(4, k_1)
                T.reads(A[vi, vk_0 * 4 + vk_1], S_rf[vk_1, vi])
                T.writes(S_rf[vk_1, vi])
                with T.init():
                    S_rf[vk_1, vi] = T.float32(0.0)
                S_rf[vk_1, vi] = S_rf[vk_1, vi] + T.exp(A[vi, vk_0 * 4 + vk_1])
        for i, k_1 in T.grid(8, 4):
            with T.block("S"):
                vi = T.axis.spatial(8, i)
                vk_1 = T.axis.reduce(4, k_1)
                T.reads(S_rf[vk_1, vi], S[vi])
                T.writes(S[vi])
                with T.init():
                    S[vi] = T.float32(0.0)
                S[vi] = S[vi] + S_rf[vk_1, vi]
        for i, j in T.grid(8, 8):
            with T.block("Y"):
                vi = T.axis.spatial(8, i)
                vj = T.axis.spatial(8, j)
                T.reads(A[vi, vj], S[vi])
                T.writes(Y[vi, vj])
                Y[vi, vj] = T.exp(A[vi, vj]) / S[vi]
"""

DECOMPOSED = """
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), Y: T.Buffer((8, 8), "float32")):
    with T.block("root"):
        S = T.alloc_buffer((8,), "float32")
        for i in range(8):
            with T.block("S_init"):
                vi = T.axis.spatial(8, i)
                T.reads()
                T.writes(S[vi])
                S[vi] = T.float32(0.0)
            for k in range(8):
                with T.block("S"):
                    vi = T.axis.spatial(8, i)
                    vk = T.axis.reduce(8, k)
                    T.reads(A[vi, vk], S[vi])
                    T.writes(S[vi])
                    S[vi] = S[vi] + T.exp(A[vi, vk])
        for i, j in T.grid(8, 8):
            with T.block("Y"):
                vi = T.axis.spatial(8, i)
                vj = T.axis.spatial(8, j)
                T.reads(A[vi, vj], S[vi])
                T.writes(Y[vi, vj])
                Y[vi, vj] = T.exp(A[vi, vj]) / S[vi]
"""


# -- rfactor --------------------------------------------------------------------------------
def test_rfactor_schedule() -> None:
    before = row_sum_scale(8)
    sch = tc.Schedule(before)
    _i, k = sch.get_loops(sch.get_block("S"))
    _ko, ki = sch.split(k, factors=[2, 4])
    rf = sch.rfactor(ki, factor_axis=0)
    assert isinstance(rf, tcs.BlockRV)
    assert rf.name == "S_rf"
    assert_script(sch.func, RFACTORED)
    assert_same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


def test_rfactor_negative_axis_and_decompose_after() -> None:
    before = row_sum_scale(8)
    sch = tc.Schedule(before)
    _i, k = sch.get_loops(sch.get_block("S"))
    ko, _ki = sch.split(k, factors=[2, 4])
    rf = sch.rfactor(ko, factor_axis=-1)
    sch.decompose_reduction(rf, sch.get_loops(rf)[1])
    assert_same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


def test_rfactor_failures() -> None:
    before = row_sum_scale(8)
    sch = tc.Schedule(before)
    i, k = sch.get_loops(sch.get_block("S"))
    # the loop is not a reduction loop
    assert_fails_unchanged(sch, "rfactor", i, match="not a reduction loop")
    # no reduction block under the loop
    yi, _ = sch.get_loops(sch.get_block("Y"))
    assert_fails_unchanged(sch, "rfactor", yi, match="0 reduction blocks")
    # factor_axis out of range
    assert_fails_unchanged(sch, "rfactor", k, factor_axis=3, match="factor_axis")
    # no init (after decompose_reduction)
    sch3 = tc.Schedule(before)
    s3 = sch3.get_block("S")
    _i3, k3 = sch3.get_loops(s3)
    sch3.decompose_reduction(s3, k3)
    assert_fails_unchanged(sch3, "rfactor", k3, match="has no init")


@pytest.mark.parametrize("factor_axis", [0, 1])
def test_rfactor_of_a_guarded_split(factor_axis: int) -> None:
    """A split that does not divide: the guard moves into the rf block's contribution."""
    before = row_sum_scale(8)
    sch = tc.Schedule(before)
    _, k = sch.get_loops(sch.get_block("S"))
    _, ki = sch.split(k, factors=[None, 3])
    rf = sch.rfactor(ki, factor_axis)
    selects: list[object] = []
    post_order_visit(
        sch.get(rf).body, lambda n: selects.append(n) if isinstance(n, Select) else None
    )
    assert len(selects) == 1  # the guarded contribution
    assert_same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


def test_rfactor_rejects_non_combiner_body() -> None:
    text = """
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8,), "float32")):
    with T.block("root"):
        for i, k in T.grid(8, 8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                vk = T.axis.reduce(8, k)
                T.reads(A[vi, vk], C[vi])
                T.writes(C[vi])
                with T.init():
                    C[vi] = T.float32(0.0)
                C[vi] = C[vi] * T.float32(0.5) + A[vi, vk]
"""
    func = tc.script.parse(text)
    sch = tc.Schedule(func)
    _, k = sch.get_loops(sch.get_block("C"))
    assert_fails_unchanged(sch, "rfactor", k, match="op rhs")


# -- decompose_reduction --------------------------------------------------------------------
def test_decompose_reduction_schedule() -> None:
    before = row_sum_scale(8)
    sch = tc.Schedule(before)
    s = sch.get_block("S")
    _i, k = sch.get_loops(s)
    init = sch.decompose_reduction(s, k)
    assert init.name == "S_init"
    assert_script(sch.func, DECOMPOSED)
    assert_same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


def test_decompose_reduction_failures() -> None:
    before = row_sum_scale(8)
    sch = tc.Schedule(before)
    s, y = sch.get_block("S"), sch.get_block("Y")
    i, k = sch.get_loops(s)
    yi, _ = sch.get_loops(y)
    assert_fails_unchanged(sch, "decompose_reduction", y, yi, match="has no init")
    assert_fails_unchanged(sch, "decompose_reduction", s, yi, match="is not above")
    sch.reorder(k, i)
    assert_fails_unchanged(sch, "decompose_reduction", s, i, match="carry the reduction")
    sch2 = tc.Schedule(before)
    s2 = sch2.get_block("S")
    i2, k2 = sch2.get_loops(s2)
    sch2.split(k2, factors=[None, 3])
    # a guarded reduction edge (k0 * 3 + k1 < 8) stays with the update block
    sch2.decompose_reduction(s2, i2)
    check_numeric(sch2.func, before)


def test_decompose_reduction_on_fused_loop() -> None:
    """Regression (property test): a loop binding spatial and reduce iterators is copied for
    the init block instead of leaving its variable unbound."""
    before = row_sum_scale(8)
    sch = tc.Schedule(before)
    s = sch.get_block("S")
    fused = sch.fuse(*sch.get_loops(s))
    sch.decompose_reduction(s, fused)
    assert_same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


# -- layer_norm and conv2d ------------------------------------------------------------------
def test_layer_norm_fused_rows() -> None:
    before = layer_norm(8, 16)
    sch = tc.Schedule(before)
    var, norm = sch.get_block("T_layer_norm_var"), sch.get_block("T_layer_norm")
    row, _ = sch.get_loops(norm)
    sch.compute_at(var, row)
    sch.compute_at(sch.get_block("T_layer_norm_sum"), row)
    sch.parallel(row)
    cached = sch.cache_read(norm, 3, "local")
    assert_same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)
    assert [b.name for b in sch.get_child_blocks(row)] == [
        "T_layer_norm_sum",
        "T_layer_norm_var",
        "T_layer_norm",
    ]
    assert cached.name == "g_local"


def test_layer_norm_failures() -> None:
    sch = tc.Schedule(layer_norm(8, 16))
    total = sch.get_block("T_layer_norm_sum")
    assert_fails_unchanged(sch, "compute_inline", total, match="compute_inline")
    norm = sch.get_block("T_layer_norm")
    assert_fails_unchanged(sch, "reverse_compute_inline", norm, match="reverse_compute_inline")


def test_conv2d_inline_pad_and_local_accumulator() -> None:
    before = conv2d(4, 6)
    sch = tc.Schedule(before)
    sch.compute_inline(sch.get_block("pad_temp"))
    conv = sch.get_block("conv2d")
    local = sch.cache_write(conv, 0, "local")
    loops = sch.get_loops(conv)
    sch.reverse_compute_at(local, loops[3])
    sch.decompose_reduction(conv, loops[4])
    assert_same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


def test_conv2d_pad_computed_at_rows() -> None:
    before = conv2d(4, 6)
    sch = tc.Schedule(before)
    conv = sch.get_block("conv2d")
    loops = sch.get_loops(conv)
    sch.compute_at(sch.get_block("pad_temp"), loops[2])
    assert_same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


# -- regressions found by the property test -------------------------------------------------
def test_reindex_rejects_shared_nest() -> None:
    """A producer computed into the consumer's nest leaves no place for the copy stage."""
    sch = tc.Schedule(conv2d(4, 6))
    pad = sch.get_block("pad_temp")
    conv = sch.get_block("conv2d")
    sch.compute_at(pad, sch.get_loops(conv)[-1])
    assert_fails_unchanged(sch, "reindex", conv, ("read", 0), match="shares its loop nest")
    assert_fails_unchanged(sch, "cache_write", pad, 0, "local", match="shares its loop nest")


def test_cache_read_inside_the_shared_nest() -> None:
    """cache_read after compute_at (a cache chain) stages the copy inside the shared loop."""
    before = conv2d(4, 6)
    sch = tc.Schedule(before)
    pad = sch.get_block("pad_temp")
    conv = sch.get_block("conv2d")
    last = sch.get_loops(conv)[-1]
    sch.compute_at(pad, last)
    copy = sch.cache_read(conv, 0, "local")
    assert any(sch.get(lp) is sch.get(last) for lp in sch.get_loops(copy))
    assert_same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


def test_reindex_rejects_buffer_read_and_written() -> None:
    sch = tc.Schedule(layer_norm(8, 16))
    total = sch.get_block("T_layer_norm_sum")
    assert_fails_unchanged(sch, "reindex", total, ("read", 1), match="both reads and writes")


def test_cache_write_region_clamped_to_buffer() -> None:
    """A guarded split of a unit loop relaxes to a region larger than the buffer."""
    before = conv2d(4, 6)
    sch = tc.Schedule(before)
    conv = sch.get_block("conv2d")
    sch.split(sch.get_loops(conv)[0], factors=[None, 5, 1])
    sch.cache_write(conv, 0, "global")
    assert_same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


def test_split_names_are_fresh_and_replay_exactly() -> None:
    """New loop names never collide with existing ones, so replay gives the same order."""
    before = matmul(16)
    sch = tc.Schedule(before)
    c = sch.get_block("C")
    i, _j, _k = sch.get_loops(c)
    _a, _b = sch.split(i, factors=[4, 4])
    i0 = sch.get_loops(c)[0]
    unit = sch.add_unit_loop(i0)
    parts = sch.split(i0, factors=[2, 2])
    names = [sch.get(lp).loop_var.name for lp in sch.get_loops(c)]  # type: ignore[union-attr]
    assert len(set(names)) == len(names)
    assert sch.get(unit).loop_var.name == "u"  # type: ignore[union-attr]
    assert len(parts) == 2
    verify_trace_roundtrip(sch, before)


# -- replaying the Python text --------------------------------------------------------------
def _scheduled_for_python() -> tuple[tc.ir.PrimFunc, tc.Schedule]:
    before = matmul(16)
    sch = tc.Schedule(before, seed=3)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    tiles = sch.sample_perfect_tile(k, n=2, max_innermost_factor=4)
    _ko, ki = sch.split(k, factors=tiles)
    rf = sch.rfactor(ki, factor_axis=1)
    sch.transform_layout(rf, ("write", 0), lambda a, b, c: (c // 4, b, a, c % 4))
    io, _ii = sch.split(i, factors=[None, 4])
    sch.annotate(io, "pragma_unroll", [1, "x", 2.5])
    sch.unroll(sch.get_loops(c)[-1])
    loc = sch.sample_compute_location(rf, decision=-1)
    sch.compute_at(rf, loc)
    sch.parallel(j)
    return before, sch


def test_trace_python_text_replays() -> None:
    before, sch = _scheduled_for_python()
    text = sch.trace.as_python()
    fresh = tc.Schedule(before)
    namespace: dict[str, object] = {"sch": fresh}
    exec(compile(text, "<trace>", "exec"), namespace)
    assert structural_equal(fresh.func, sch.func)
    assert fresh.trace.as_python() == text
    assert_same_result(before, fresh.func)


# -- public surface -------------------------------------------------------------------------
def test_public_surface() -> None:
    for name in ("Schedule", "BlockRV", "LoopRV", "ExprRV", "Trace", "Instruction", "IndexMap"):
        assert name in tcs.__all__
        assert hasattr(tcs, name)
    assert tcs.ScheduleError is tc.errors.ScheduleError
    assert tc.Schedule is tcs.Schedule
    assert tcs.IndexMap.from_func(lambda i, j: (j, i)).ndim_out == 2
    with pytest.raises(tcs.ScheduleError):
        tc.Schedule(matmul(4)).get_block("missing")


def test_decompose_reduction_rejects_repeating_loop() -> None:
    """Regression (property test, slow run): a reduction under a loop it does not bind is
    recomputed there with its init; hoisting the init would accumulate repeatedly."""
    x = tc.te.placeholder((4, 16), "float32", name="X")
    before = tc.te.create_prim_func([x, tc.topi.softmax(x)])
    sch = tc.Schedule(before)
    expsum = sch.get_block("T_softmax_expsum")
    _, col = sch.get_loops(sch.get_block("T_softmax_norm"))
    sch.compute_at(expsum, col)  # the row sum is recomputed for every column
    assert_same_result(before, sch.func)
    assert_fails_unchanged(sch, "decompose_reduction", expsum, col, match="repeat its reduction")
