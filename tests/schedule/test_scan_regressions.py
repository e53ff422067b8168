"""Regressions found by running the random-sequence property test at scale: one test per bug,
each with the failure the primitive must now raise (schedule unchanged) and, where the
primitive still applies in a nearby valid form, a numerical check of that form."""

from __future__ import annotations

from compute_workloads import assert_same_result, matmul, row_sum_scale

import tilecraft as tc
from tilecraft.testing import assert_fails_unchanged, verify_trace_roundtrip

te = tc.te


def _chain() -> tc.ir.PrimFunc:
    """B = A * 2; C = B + 1 over 8 elements."""
    a = te.placeholder((8,), "float32", name="A")
    b = te.compute((8,), lambda i: a[i] * 2.0, name="B")
    c = te.compute((8,), lambda i: b[i] + 1.0, name="C")
    return te.create_prim_func([a, c])


def _scaled_row_sum() -> tc.ir.PrimFunc:
    """B = A * 2 (8 x 8); C[i] = sum_k B[i, k]."""
    a = te.placeholder((8, 8), "float32", name="A")
    b = te.compute((8, 8), lambda i, j: a[i, j] * 2.0, name="B")
    k = te.reduce_axis((0, 8), name="k")
    c = te.compute((8,), lambda i: te.sum(b[i, k], axis=k), name="C")
    return te.create_prim_func([a, c])


# -- reorder: a fused spatial+reduction loop (layer_norm, seed 70047) -----------------------
def test_reorder_rejects_moving_a_loop_that_binds_both_kinds() -> None:
    before = row_sum_scale(8)
    sch = tc.Schedule(before)
    s = sch.get_block("S")
    fused = sch.fuse(*sch.get_loops(s))
    outer, inner = sch.split(fused, [None, 5])
    # the init would run on the first k of a row, which is no longer the first update
    assert_fails_unchanged(sch, "reorder", inner, outer, match="binds both iterator kinds")


def test_reorder_of_pure_reduction_loops_is_allowed() -> None:
    before = row_sum_scale(8)
    sch = tc.Schedule(before)
    s = sch.get_block("S")
    i, k = sch.get_loops(s)
    k0, k1 = sch.split(k, [2, 4])
    sch.reorder(k1, k0, i)
    assert_same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


REPEATED = """
@T.prim_func
def main(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4,), "float32")):
    with T.block("root"):
        for i, r, k in T.grid(4, 2, 8):
            with T.block("C"):
                vi = T.axis.spatial(4, i)
                vk = T.axis.reduce(8, k)
                T.reads(A[vi, vk], C[vi])
                T.writes(C[vi])
                with T.init():
                    C[vi] = T.float32(0.0)
                C[vi] = C[vi] + A[vi, vk]
"""


def test_reorder_rejects_moving_a_repeating_loop_past_the_reduction() -> None:
    func = tc.script.parse(REPEATED)
    assert isinstance(func, tc.ir.PrimFunc)
    sch = tc.Schedule(func)
    i, r, k = sch.get_loops(sch.get_block("C"))
    assert_fails_unchanged(sch, "reorder", k, r, match='loop "r" repeats block "C"')
    sch.reorder(r, i)  # moving it past a spatial loop keeps every row's updates in order
    assert_same_result(func, sch.func)


# -- reverse_compute_at of an update without init (batch_matmul, seed 70137) -----------------
def test_reverse_compute_at_rejects_an_update_without_init() -> None:
    sch = tc.Schedule(matmul(8))
    c = sch.get_block("C")
    i, _, _ = sch.get_loops(c)
    init = sch.decompose_reduction(c, i)
    init_i = sch.get_loops(init)[0]
    assert_fails_unchanged(sch, "reverse_compute_at", c, init_i, match="has no init")


# -- reverse_compute_at reading other iterations' elements (conv2d, seed 70086) --------------
def test_reverse_compute_at_rejects_reading_elements_of_other_iterations() -> None:
    before = _scaled_row_sum()
    sch = tc.Schedule(before)
    c = sch.get_block("C")
    row, col = sch.get_loops(sch.get_block("B"))
    # C[i] sums a whole row of B; under B's column loop only one element of it exists
    assert_fails_unchanged(sch, "reverse_compute_at", c, col, match="other iterations")
    sch.reverse_compute_at(c, row)
    assert_same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


def test_reverse_compute_at_rejects_a_loop_carrying_the_producers_reduction() -> None:
    before = row_sum_scale(8)
    sch = tc.Schedule(before)
    i, k = sch.get_loops(sch.get_block("S"))
    y = sch.get_block("Y")
    assert_fails_unchanged(sch, "reverse_compute_at", y, k, match="carries the reduction")
    sch.reverse_compute_at(y, i)
    assert_same_result(before, sch.func)


# -- reverse_compute_at under a producer predicate on outer loops (conv2d, seed 70086) -------
def test_reverse_compute_at_inherits_the_producers_outer_predicate() -> None:
    before = _chain()
    sch = tc.Schedule(before)
    (i,) = sch.get_loops(sch.get_block("B"))
    i0, i1 = sch.split(i, [None, 2])
    i10, i11 = sch.split(i1, [2, 3])  # guard i10 * 3 + i11 < 2: some iterations do nothing
    sch.reorder(i10, i0)
    sch.reverse_compute_at(sch.get_block("C"), i11)
    # the producer's guard is on both blocks now; without it C recomputed valid elements
    # from stale B values in the iterations where B does nothing
    assert sch.func.script().count("T.where(i_1_0 * 3 + i_1_1 < 2)") == 1
    assert sch.func.script().count("and i_1_0 * 3 + i_1_1 < 2)") == 1
    assert_same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


# -- storage_align on a buffer that later disappears (transpose, seeds 80026 and 80144) ------
def _transpose_scale() -> tc.ir.PrimFunc:
    x = te.placeholder((16, 32), "float32", name="x")
    y = tc.topi.transpose(x, (1, 0))
    z = te.compute((32, 16), lambda i, j: y[i, j] * 2.0, name="scale")
    return te.create_prim_func([x, z])


def _alignments(sch: tc.Schedule, name: str) -> object:
    blk = sch.get(sch.get_block(name))
    assert isinstance(blk, tc.ir.Block)
    return blk.annotations.get("buffer_dim_align")


def test_reverse_compute_inline_drops_alignment_of_the_removed_buffer() -> None:
    before = _transpose_scale()
    sch = tc.Schedule(before)
    t = sch.get_block("T_transpose")
    sch.storage_align(t, 0, 1, 16, 0)
    assert _alignments(sch, "T_transpose") == ((0, 1, 16, 0),)
    # T_transpose now writes the output parameter, which lowering cannot pad
    sch.reverse_compute_inline(sch.get_block("scale"))
    assert _alignments(sch, "T_transpose") is None
    assert_same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


def test_transform_layout_drops_alignment_of_the_old_layout() -> None:
    before = _transpose_scale()
    sch = tc.Schedule(before)
    t = sch.get_block("T_transpose")
    sch.storage_align(t, 0, 1, 16, 0)
    sch.transform_layout(t, ("write", 0), lambda i, j: (i * 16 + j,))  # 2-d -> 1-d
    assert _alignments(sch, "T_transpose") is None
    assert_same_result(before, sch.func)


# -- decompose_reduction under a loop that repeats the block (softmax, seed 80023) ----------
def test_decompose_reduction_rejects_a_non_injective_binding() -> None:
    before = row_sum_scale(8)
    sch = tc.Schedule(before)
    s = sch.get_block("S")
    fused = sch.fuse(*sch.get_loops(sch.get_block("Y")))
    sch.compute_at(s, fused)  # S[i] is recomputed for each of the 8 columns of row i
    assert_same_result(before, sch.func)
    assert_fails_unchanged(sch, "decompose_reduction", s, fused, match="exactly once")
    sch.decompose_reduction(s, sch.get_loops(s)[-1])  # inside one recomputation it is fine
    assert_same_result(before, sch.func)


# -- reverse_compute_at over a producer that skips part of its box (batch_matmul, 90150) ----
def test_reverse_compute_at_rejects_a_producer_with_an_inner_guard() -> None:
    a = te.placeholder((16, 8), "float32", name="A")
    b = te.compute((16, 8), lambda i, j: a[i, j] * 2.0, name="B")
    c = te.compute((16, 8), lambda i, j: b[i, j] + 1.0, name="C")
    before = te.create_prim_func([a, c])
    sch = tc.Schedule(before)
    i, _ = sch.get_loops(sch.get_block("B"))
    i0, i1 = sch.split(i, [None, 4])
    sch.split(i1, [None, 3])  # guard i1_0 * 3 + i1_1 < 4: rows 4 and 5 of the box are skipped
    sch.parallel(i0)
    # the moved copy would compute rows of the next (concurrent) iteration from unready data
    assert_fails_unchanged(sch, "reverse_compute_at", sch.get_block("C"), i0, match="a box")


def test_reverse_compute_at_accepts_a_tail_guard_and_a_fused_loop() -> None:
    a = te.placeholder((10, 8), "float32", name="A")
    b = te.compute((10, 8), lambda i, j: a[i, j] * 2.0, name="B")
    c = te.compute((10, 8), lambda i, j: b[i, j] + 1.0, name="C")
    before = te.create_prim_func([a, c])
    sch = tc.Schedule(before)
    i, j = sch.get_loops(sch.get_block("B"))
    i0, i1 = sch.split(i, [None, 4])  # guard i0 * 4 + i1 < 10 only clips to the shape
    sch.fuse(i1, j)
    sch.parallel(i0)
    sch.reverse_compute_at(sch.get_block("C"), i0)
    assert_same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)
