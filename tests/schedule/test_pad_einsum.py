"""pad_einsum: expected IR, numerics (static and symbolic), trace round trip and one failure
per requirement."""

from __future__ import annotations

import numpy as np
import pytest
from compute_workloads import assert_script, conv2d

import tilecraft as tc
from tilecraft.ir import PrimFunc
from tilecraft.schedule import Schedule
from tilecraft.testing import assert_fails_unchanged, check_numeric, verify_trace_roundtrip

te, topi = tc.te, tc.topi


def _matmul(m: int | str = 3, k: int = 5, n: int = 2) -> PrimFunc:
    a = te.placeholder((m, k), "float32", name="A")
    b = te.placeholder((k, n), "float32", name="B")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return te.create_prim_func([a, b, c])


def _parse(text: str) -> PrimFunc:
    func = tc.script.parse(text)
    assert isinstance(func, PrimFunc)
    return func


PADDED = """\
@T.prim_func
def main(A: T.Buffer((3, 5), "float32"), B: T.Buffer((5, 2), "float32"), C: T.Buffer((3, 2), "float32")):
    with T.block("root"):
        C_pad = T.alloc_buffer((4, 4), "float32")
        A_pad = T.alloc_buffer((4, 8), "float32")
        B_pad = T.alloc_buffer((8, 4), "float32")
        for ax0, ax1 in T.grid(4, 8):
            with T.block("A_pad"):
                v0 = T.axis.spatial(4, ax0)
                v1 = T.axis.spatial(8, ax1)
                T.reads(A[v0, v1])
                T.writes(A_pad[v0, v1])
                A_pad[v0, v1] = T.Select(v0 < 3 and v1 < 5, A[v0, v1], T.float32(0.0))
        for ax0, ax1 in T.grid(8, 4):
            with T.block("B_pad"):
                v0 = T.axis.spatial(8, ax0)
                v1 = T.axis.spatial(4, ax1)
                T.reads(B[v0, v1])
                T.writes(B_pad[v0, v1])
                B_pad[v0, v1] = T.Select(v0 < 5 and v1 < 2, B[v0, v1], T.float32(0.0))
        for i, j, k in T.grid(4, 4, 8):
            with T.block("C"):
                vi = T.axis.spatial(4, i)
                vj = T.axis.spatial(4, j)
                vk = T.axis.reduce(8, k)
                T.reads(A_pad[vi, vk], B_pad[vk, vj], C_pad[vi, vj])
                T.writes(C_pad[vi, vj])
                with T.init():
                    C_pad[vi, vj] = T.float32(0.0)
                C_pad[vi, vj] = C_pad[vi, vj] + A_pad[vi, vk] * B_pad[vk, vj]
        for ax0, ax1 in T.grid(3, 2):
            with T.block("C_unpad"):
                v0 = T.axis.spatial(3, ax0)
                v1 = T.axis.spatial(2, ax1)
                T.reads(C_pad[v0, v1])
                T.writes(C[v0, v1])
                C[v0, v1] = C_pad[v0, v1]
"""  # noqa: E501


def test_pad_einsum_matmul() -> None:
    before = _matmul()
    sch = Schedule(before)
    sch.pad_einsum(sch.get_block("C"), [4, 4, 4])
    assert_script(sch.func, PADDED)
    check_numeric(sch.func, before)
    verify_trace_roundtrip(sch, before)


def test_pad_einsum_of_a_padding_block_copies_only_the_source() -> None:
    """Padding the block pad_einsum made (``B_pad[v] = B[v] if v < 5 else 0`` over 8 rows):
    the new copy of ``B`` reads only its 5 rows, not the 8 the block iterates over."""
    before = _matmul(3, 5, 2)
    sch = Schedule(before)
    sch.pad_einsum(sch.get_block("C"), [1, 1, 8])
    sch.pad_einsum(sch.get_block("B_pad"), [3, 1])
    tc.ir.verify(sch.func)  # before: "load B[...] is out of bounds"
    check_numeric(sch.func, before)
    sch.decompose_padding(sch.get_block("B_pad_1"), sch.get_loops(sch.get_block("B_pad_1"))[0])
    tc.ir.verify(sch.func)
    check_numeric(sch.func, before)
    verify_trace_roundtrip(sch, before)


def test_pad_einsum_spatial_only_keeps_reduction_and_tiles_evenly() -> None:
    before = _matmul(7, 6, 5)
    sch = Schedule(before)
    blk = sch.get_block("C")
    sch.pad_einsum(blk, [4, 4, 1])
    i, j, k = sch.get_loops(blk)  # the loop handles survive, with padded extents
    assert [sch.get(x).extent.value for x in (i, j, k)] == [8, 8, 6]
    sch.split(i, [None, 4])
    sch.split(j, [None, 4])
    assert tc.schedule._tree.find_block(sch.func, "C")[0].predicate.value == 1  # no guard
    check_numeric(sch.func, before)
    verify_trace_roundtrip(sch, before)


def test_pad_einsum_symbolic_rows() -> None:
    before = _matmul("n", 8, 6)
    sch = Schedule(before)
    sch.pad_einsum(sch.get_block("C"), [4, 4, 1])
    for n in (1, 4, 7):
        check_numeric(sch.func, before, shape_vars={"n": n})
    verify_trace_roundtrip(sch, before)


def test_pad_einsum_elementwise_and_decompose_the_producer() -> None:
    x = te.placeholder((5, 3), "float32", name="X")
    before = te.create_prim_func([x, te.compute((5, 3), lambda i, j: x[i, j] * 3.0, name="Y")])
    sch = Schedule(before)
    sch.pad_einsum(sch.get_block("Y"), [8, 4])
    pad = sch.get_block("X_pad")
    sch.decompose_padding(pad, sch.get_loops(pad)[0])
    check_numeric(sch.func, before)
    verify_trace_roundtrip(sch, before)


@pytest.mark.parametrize("padding", [[4, 4], [4, 0, 4], [4, None, 4], "444", [4, True, 4]])
def test_pad_einsum_rejects_bad_padding(padding: object) -> None:
    sch = Schedule(_matmul())
    assert_fails_unchanged(
        sch, "pad_einsum", sch.get_block("C"), padding, match="argument 'padding'"
    )


def test_pad_einsum_requires_a_change() -> None:
    sch = Schedule(_matmul(4, 8, 2))
    assert_fails_unchanged(
        sch, "pad_einsum", sch.get_block("C"), [2, 2, 4], match="already a multiple"
    )


def test_pad_einsum_requires_owned_nest() -> None:
    sch = Schedule(_matmul())
    blk = sch.get_block("C")
    sch.split(sch.get_loops(blk)[2], [None, 2])
    assert_fails_unchanged(sch, "pad_einsum", blk, [4, 4, 4], match="owns its loop nest")


def test_pad_einsum_requires_einsum_indices() -> None:
    sch = Schedule(conv2d())
    blk = sch.get_block("conv2d")
    assert_fails_unchanged(sch, "pad_einsum", blk, [1, 1, 4, 4, 1, 1, 1], match="indexes")


def test_pad_einsum_requires_sum_of_products_to_pad_a_reduction() -> None:
    x = te.placeholder((4, 6), "float32", name="x")
    k = te.reduce_axis((0, 6), name="k")
    m = te.compute((4,), lambda i: te.max(x[i, k], axis=k), name="M")
    before = te.create_prim_func([x, m])
    sch = Schedule(before)
    assert_fails_unchanged(
        sch, "pad_einsum", sch.get_block("M"), [1, 4], match="would change its sum"
    )
    sch.pad_einsum(sch.get_block("M"), [8, 1])  # the spatial iterator alone may be padded
    check_numeric(sch.func, before)


def test_pad_einsum_requires_padded_spatial_iterators_in_the_output() -> None:
    sch = Schedule(
        _parse(
            """
@T.prim_func
def main(X: T.Buffer((3, 3), "float32"), Y: T.Buffer((3,), "float32")):
    for i, j in T.grid(3, 3):
        with T.block("Y"):
            vi = T.axis.spatial(3, i)
            vj = T.axis.spatial(3, j)
            T.reads(X[vi, vj])
            T.writes(Y[vi])
            Y[vi] = X[vi, vj]
"""
        )
    )
    assert_fails_unchanged(
        sch, "pad_einsum", sch.get_block("Y"), [1, 4], match="does not index the output"
    )


def test_pad_einsum_requires_one_padding_per_buffer_dimension() -> None:
    sch = Schedule(
        _parse(
            """
@T.prim_func
def main(X: T.Buffer((3, 3), "float32"), Y: T.Buffer((3, 3), "float32")):
    for i, j in T.grid(3, 3):
        with T.block("Y"):
            vi = T.axis.spatial(3, i)
            vj = T.axis.spatial(3, j)
            T.reads(X[vi, vj], X[vj, vi])
            T.writes(Y[vi, vj])
            Y[vi, vj] = X[vi, vj] + X[vj, vi]
"""
        )
    )
    assert_fails_unchanged(sch, "pad_einsum", sch.get_block("Y"), [4, 1], match="padded otherwise")


def test_pad_einsum_requires_reading_the_output_in_place() -> None:
    sch = Schedule(
        _parse(
            """
@T.prim_func
def main(X: T.Buffer((3,), "float32"), Y: T.Buffer((3,), "float32")):
    for i in range(3):
        with T.block("Y"):
            vi = T.axis.spatial(3, i)
            T.reads(X[vi], Y[0])
            T.writes(Y[vi])
            Y[vi] = X[vi] + Y[0]
"""
        )
    )
    assert_fails_unchanged(
        sch, "pad_einsum", sch.get_block("Y"), [4], match="away from where it stores it"
    )


def test_pad_einsum_accumulating_into_its_output_copies_it_in_first() -> None:
    before = _parse(
        """
@T.prim_func
def main(X: T.Buffer((3,), "float32"), Y: T.Buffer((3,), "float32")):
    for i in range(3):
        with T.block("Y"):
            vi = T.axis.spatial(3, i)
            T.reads(X[vi], Y[vi])
            T.writes(Y[vi])
            Y[vi] = Y[vi] + X[vi]
"""
    )
    sch = Schedule(before)
    sch.pad_einsum(sch.get_block("Y"), [4])
    assert {"X_pad", "Y_pad", "Y", "Y_unpad"} <= set(tc.schedule._tree.block_names(sch.func))
    x, y = np.array([1, 2, 3], "float32"), np.array([10, 20, 30], "float32")
    tc.build(sch.mod, target="cpu")["main"](x, y)
    np.testing.assert_array_equal(y, [11, 22, 33])
    verify_trace_roundtrip(sch, before)
