"""get_output_blocks and transform_block_layout: expected IR, numerics, trace round trip and
one failure per requirement."""

from __future__ import annotations

import pytest
from compute_workloads import assert_script, elementwise_chain, matmul

import tilecraft as tc
from tilecraft.ir import PrimFunc
from tilecraft.schedule import IndexMap, Schedule
from tilecraft.testing import assert_fails_unchanged, check_numeric, verify_trace_roundtrip

te = tc.te


def _scale(rows: int | str = 4, cols: int = 6) -> PrimFunc:
    x = te.placeholder((rows, cols), "float32", name="X")
    return te.create_prim_func([x, te.compute(x.shape, lambda i, j: x[i, j] * 2.0, name="Y")])


def _parse(text: str) -> PrimFunc:
    func = tc.script.parse(text)
    assert isinstance(func, PrimFunc)
    return func


# ------------------------------------------------------------------------------------------
# get_output_blocks
def test_get_output_blocks_of_root() -> None:
    before = elementwise_chain(4)
    sch = Schedule(before)
    out = sch.get_output_blocks(sch.get_block("root"))
    assert [sch.get(b).name for b in out] == ["C"]  # B writes an intermediate
    assert sch.trace.as_python().endswith("(b1,) = sch.get_output_blocks(b0)")
    verify_trace_roundtrip(sch, before)


def test_get_output_blocks_several_and_none() -> None:
    sch = Schedule(matmul(4, relu=True))
    assert [sch.get(b).name for b in sch.get_output_blocks(sch.get_block("root"))] == ["D"]
    assert sch.get_output_blocks(sch.get_block("C")) == []  # C has no child block


def test_get_output_blocks_stale_handle() -> None:
    sch = Schedule(elementwise_chain(4))
    b = sch.get_block("B")
    sch.compute_inline(b)
    assert_fails_unchanged(sch, "get_output_blocks", b, match="stale")


# ------------------------------------------------------------------------------------------
# transform_block_layout
TRANSPOSED = """\
@T.prim_func
def main(X: T.Buffer((4, 6), "float32"), Y: T.Buffer((4, 6), "float32")):
    with T.block("root"):
        for ax0, ax1 in T.grid(6, 4):
            with T.block("Y"):
                v0 = T.axis.spatial(6, ax0)
                v1 = T.axis.spatial(4, ax1)
                T.reads(X[v1, v0])
                T.writes(Y[v1, v0])
                Y[v1, v0] = X[v1, v0] * T.float32(2.0)
"""

FUSED = """\
@T.prim_func
def main(X: T.Buffer((4, 6), "float32"), Y: T.Buffer((4, 6), "float32")):
    with T.block("root"):
        for ax0 in range(24):
            with T.block("Y"):
                v0 = T.axis.spatial(24, ax0)
                T.reads(X[v0 // 6, v0 % 6])
                T.writes(Y[v0 // 6, v0 % 6])
                Y[v0 // 6, v0 % 6] = X[v0 // 6, v0 % 6] * T.float32(2.0)
"""


@pytest.mark.parametrize(
    ("index_map", "expected"),
    [(lambda i, j: (j, i), TRANSPOSED), (lambda i, j: (i * 6 + j,), FUSED)],
)
def test_transform_block_layout_permute_and_fuse(index_map: object, expected: str) -> None:
    before = _scale()
    sch = Schedule(before)
    sch.transform_block_layout(sch.get_block("Y"), index_map)
    assert_script(sch.func, expected)
    check_numeric(sch.func, before)
    verify_trace_roundtrip(sch, before)


SPLIT_REDUCTION_FIRST = """\
@T.prim_func
def main(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32"), C: T.Buffer((4, 4), "float32")):
    with T.block("root"):
        for ax0, ax1, ax2, ax3 in T.grid(4, 2, 2, 4):
            with T.block("C"):
                v0 = T.axis.reduce(4, ax0)
                v1 = T.axis.spatial(2, ax1)
                v2 = T.axis.spatial(2, ax2)
                v3 = T.axis.spatial(4, ax3)
                T.reads(A[v1 * 2 + v2, v0], B[v0, v3], C[v1 * 2 + v2, v3])
                T.writes(C[v1 * 2 + v2, v3])
                with T.init():
                    C[v1 * 2 + v2, v3] = T.float32(0.0)
                C[v1 * 2 + v2, v3] = C[v1 * 2 + v2, v3] + A[v1 * 2 + v2, v0] * B[v0, v3]
"""  # noqa: E501


def test_transform_block_layout_split_and_move_reduction_out() -> None:
    before = matmul(4)
    sch = Schedule(before)
    sch.transform_block_layout(sch.get_block("C"), lambda i, j, k: (k, i // 2, i % 2, j))
    assert_script(sch.func, SPLIT_REDUCTION_FIRST)
    check_numeric(sch.func, before)
    verify_trace_roundtrip(sch, before)


def test_transform_block_layout_symbolic_permutation() -> None:
    before = _scale("n")
    sch = Schedule(before)
    sch.transform_block_layout(sch.get_block("Y"), IndexMap.from_func(lambda i, j: (j, i)))
    for n in (1, 5):
        check_numeric(sch.func, before, shape_vars={"n": n})
    verify_trace_roundtrip(sch, before)


def test_transform_block_layout_then_split_and_fuse() -> None:
    before = matmul(8, relu=True)
    sch = Schedule(before)
    sch.transform_block_layout(sch.get_block("D"), lambda i, j: (i * 8 + j,))
    (fused,) = sch.get_loops(sch.get_block("D"))
    sch.split(fused, [None, 16])
    check_numeric(sch.func, before)
    verify_trace_roundtrip(sch, before)


def test_transform_block_layout_unit_iterator_bound_to_zero() -> None:
    # reindex drops unit loops: the staged block binds its unit iterator to 0, loop-less
    x = te.placeholder((1, 9), "float32", name="X")
    k = te.reduce_axis(6, "k")
    y = te.compute((1, 4), lambda n, i: te.sum(x[n, i + k], axis=[k]), name="Y")
    before = te.create_prim_func([x, y])
    sch = Schedule(before)
    staged = sch.reindex(sch.get_block("Y"), ("read", 0))
    assert len(sch.get_loops(staged)) == 2  # three iterators
    sch.transform_block_layout(staged, lambda n, i, k: (n * 4 + i, k))
    assert len(sch.get_loops(staged)) == 2
    check_numeric(sch.func, before)
    verify_trace_roundtrip(sch, before)


def test_transform_block_layout_requires_owned_nest() -> None:
    sch = Schedule(_scale())
    blk = sch.get_block("Y")
    sch.split(sch.get_loops(blk)[0], [2, 2])
    assert_fails_unchanged(
        sch, "transform_block_layout", blk, lambda i, j: (j, i), match="2 iterators under 3"
    )


def test_transform_block_layout_requires_serial_loops() -> None:
    sch = Schedule(_scale())
    blk = sch.get_block("Y")
    sch.parallel(sch.get_loops(blk)[0])
    assert_fails_unchanged(sch, "transform_block_layout", blk, lambda i, j: (j, i), match="serial")


def test_transform_block_layout_requires_no_predicate() -> None:
    sch = Schedule(
        _parse(
            """
@T.prim_func
def main(X: T.Buffer((4,), "float32"), Y: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("Y"):
            vi = T.axis.spatial(4, i)
            T.where(i < 3)
            T.reads(X[vi])
            T.writes(Y[vi])
            Y[vi] = X[vi]
"""
        )
    )
    assert_fails_unchanged(
        sch, "transform_block_layout", sch.get_block("Y"), lambda i: (i,), match="predicate"
    )


def test_transform_block_layout_rejects_opaque_iterators() -> None:
    sch = Schedule(
        _parse(
            """
@T.prim_func
def main(X: T.Buffer((4,), "float32"), Y: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("Y"):
            vi = T.axis.opaque(4, i)
            T.reads(X[vi])
            T.writes(Y[vi])
            Y[vi] = X[vi]
"""
        )
    )
    assert_fails_unchanged(
        sch, "transform_block_layout", sch.get_block("Y"), lambda i: (i,), match="opaque"
    )


@pytest.mark.parametrize(
    ("index_map", "match"),
    [
        (lambda i: (i,), "takes 1 indices but block"),
        (lambda i, j: (i * 2, j), "not a bijection"),
        (lambda i, j: (i + j,), "not a bijection"),
        (5, "expected an IndexMap or a callable"),
        (lambda i, j: ("i", j), "calling it on index variables failed"),
    ],
)
def test_transform_block_layout_requires_a_bijection(index_map: object, match: str) -> None:
    sch = Schedule(_scale())
    assert_fails_unchanged(
        sch, "transform_block_layout", sch.get_block("Y"), index_map, match=match
    )


def test_transform_block_layout_keeps_kinds_apart() -> None:
    sch = Schedule(matmul(4))
    assert_fails_unchanged(
        sch,
        "transform_block_layout",
        sch.get_block("C"),
        lambda i, j, k: (i, j * 4 + k),
        match="mixes spatial and reduction",
    )
