"""decompose_padding: expected IR, numerics (static and symbolic), trace round trip and one
failure per requirement."""

from __future__ import annotations

import pytest
from compute_workloads import assert_script, conv2d, matmul

import tilecraft as tc
from tilecraft.ir import PrimFunc
from tilecraft.schedule import Schedule
from tilecraft.testing import assert_fails_unchanged, check_numeric, verify_trace_roundtrip

te, topi = tc.te, tc.topi


def _padded_scale(n: int | str = 4) -> PrimFunc:
    x = te.placeholder((2, n), "float32", name="X")
    p = topi.pad(x, [0, 1], [0, 1], name="P")
    y = te.compute(p.shape, lambda i, j: p[i, j] * 2.0, name="Y")
    return te.create_prim_func([x, y])


def _parse(text: str) -> PrimFunc:
    func = tc.script.parse(text)
    assert isinstance(func, PrimFunc)
    return func


AT_OUTER = """\
@T.prim_func
def main(X: T.Buffer((2, 4), "float32"), Y: T.Buffer((2, 6), "float32")):
    with T.block("root"):
        P = T.alloc_buffer((2, 6), "float32")
        for i0_1, i1_1 in T.grid(2, 6):
            with T.block("P_pad_const"):
                vi0 = T.axis.spatial(2, i0_1)
                vi1 = T.axis.spatial(6, i1_1)
                T.reads()
                T.writes(P[vi0, vi1])
                P[vi0, vi1] = T.float32(0.0)
        for i0 in range(2):
            for i1 in range(1, 5):
                with T.block("P"):
                    vi0 = T.axis.spatial(2, i0)
                    vi1 = T.axis.spatial(6, i1)
                    T.reads(X[vi0, vi1 - 1])
                    T.writes(P[vi0, vi1])
                    P[vi0, vi1] = X[vi0, vi1 - 1]
        for i, j in T.grid(2, 6):
            with T.block("Y"):
                vi = T.axis.spatial(2, i)
                vj = T.axis.spatial(6, j)
                T.reads(P[vi, vj])
                T.writes(Y[vi, vj])
                Y[vi, vj] = P[vi, vj] * T.float32(2.0)
"""

AT_INNER = """\
@T.prim_func
def main(X: T.Buffer((2, 4), "float32"), Y: T.Buffer((2, 6), "float32")):
    with T.block("root"):
        P = T.alloc_buffer((2, 6), "float32")
        for i0 in range(2):
            for i1_1 in range(6):
                with T.block("P_pad_const"):
                    vi0 = T.axis.spatial(2, i0)
                    vi1 = T.axis.spatial(6, i1_1)
                    T.reads()
                    T.writes(P[vi0, vi1])
                    P[vi0, vi1] = T.float32(0.0)
            for i1 in range(1, 5):
                with T.block("P"):
                    vi0 = T.axis.spatial(2, i0)
                    vi1 = T.axis.spatial(6, i1)
                    T.reads(X[vi0, vi1 - 1])
                    T.writes(P[vi0, vi1])
                    P[vi0, vi1] = X[vi0, vi1 - 1]
        for i, j in T.grid(2, 6):
            with T.block("Y"):
                vi = T.axis.spatial(2, i)
                vj = T.axis.spatial(6, j)
                T.reads(P[vi, vj])
                T.writes(Y[vi, vj])
                Y[vi, vj] = P[vi, vj] * T.float32(2.0)
"""


@pytest.mark.parametrize(("which", "expected"), [(0, AT_OUTER), (1, AT_INNER)])
def test_decompose_padding(which: int, expected: str) -> None:
    before = _padded_scale()
    sch = Schedule(before)
    blk = sch.get_block("P")
    loop = sch.get_loops(blk)[which]
    fill = sch.decompose_padding(blk, loop)
    assert sch.get(fill).name == "P_pad_const"
    assert sch.get(loop).loop_var.name == f"i{which}"  # handles keep their loops
    assert_script(sch.func, expected)
    check_numeric(sch.func, before)
    verify_trace_roundtrip(sch, before)


def test_decompose_padding_symbolic_bound_stays_a_predicate() -> None:
    before = _padded_scale("n")
    sch = Schedule(before)
    blk = sch.get_block("P")
    sch.decompose_padding(blk, sch.get_loops(blk)[0])
    assert "T.where" in sch.func.script()  # i1 < n + 1 is not a constant bound
    for n in (1, 4):
        check_numeric(sch.func, before, shape_vars={"n": n})
    verify_trace_roundtrip(sch, before)


def test_decompose_padding_of_conv2d_after_compute_at() -> None:
    before = conv2d()
    sch = Schedule(before)
    pad = sch.get_block("pad_temp")
    sch.compute_at(pad, sch.get_loops(sch.get_block("conv2d"))[1])
    loops = sch.get_loops(pad)
    sch.decompose_padding(pad, loops[2])  # the first loop compute_at made for the block
    assert len(tc.schedule._tree.block_names(sch.func)) == 4  # root, fill, copy, conv2d
    check_numeric(sch.func, before)
    verify_trace_roundtrip(sch, before)


def test_decompose_padding_requires_a_padding_block() -> None:
    sch = Schedule(matmul(4))
    blk = sch.get_block("C")
    assert_fails_unchanged(
        sch, "decompose_padding", blk, sch.get_loops(blk)[0], match="not a padding block"
    )


def test_decompose_padding_requires_a_constant_pad_value() -> None:
    sch = Schedule(
        _parse(
            """
@T.prim_func
def main(X: T.Buffer((4,), "float32"), P: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("P"):
            vi = T.axis.spatial(4, i)
            T.reads(X[0:4])
            T.writes(P[vi])
            P[vi] = T.Select(vi < 3, X[vi], X[0])
"""
        )
    )
    blk = sch.get_block("P")
    assert_fails_unchanged(
        sch, "decompose_padding", blk, sch.get_loops(blk)[0], match="not a padding block"
    )


def test_decompose_padding_rejects_a_reduction() -> None:
    sch = Schedule(
        _parse(
            """
@T.prim_func
def main(X: T.Buffer((4, 4), "float32"), P: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 4):
        with T.block("P"):
            vi = T.axis.spatial(4, i)
            vk = T.axis.reduce(4, k)
            T.reads(X[vi, vk])
            T.writes(P[vi])
            P[vi] = T.Select(vk < 3, X[vi, vk], T.float32(0.0))
"""
        )
    )
    blk = sch.get_block("P")
    assert_fails_unchanged(
        sch, "decompose_padding", blk, sch.get_loops(blk)[0], match="is a reduction"
    )


def test_decompose_padding_rejects_reading_the_padded_buffer() -> None:
    sch = Schedule(
        _parse(
            """
@T.prim_func
def main(P: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("P"):
            vi = T.axis.spatial(4, i)
            T.reads(P[vi])
            T.writes(P[vi])
            P[vi] = T.Select(vi < 3, P[vi] * T.float32(2.0), T.float32(0.0))
"""
        )
    )
    blk = sch.get_block("P")
    assert_fails_unchanged(
        sch, "decompose_padding", blk, sch.get_loops(blk)[0], match="reads the buffer it pads"
    )


def test_decompose_padding_requires_the_loop_above_the_block() -> None:
    sch = Schedule(_padded_scale())
    other = sch.get_loops(sch.get_block("Y"))[0]
    assert_fails_unchanged(
        sch, "decompose_padding", sch.get_block("P"), other, match="is not above block"
    )


def test_decompose_padding_requires_the_block_alone_under_the_loop() -> None:
    sch = Schedule(_padded_scale())
    sch.compute_at(sch.get_block("P"), sch.get_loops(sch.get_block("Y"))[0])
    blk = sch.get_block("P")
    assert_fails_unchanged(
        sch, "decompose_padding", blk, sch.get_loops(blk)[0], match="holds more than the nest"
    )


def test_decompose_padding_then_unroll_runs_correctly() -> None:
    # the campaign's reproducer of a gcc 12.2 miscompile (tests/runtime/test_unroll_if_convert)
    before = conv2d(channels=4, size=8)
    sch = Schedule(before)
    pad = sch.get_block("pad_temp")
    _, channel, _, inner = sch.get_loops(pad)
    sch.unroll(channel)
    sch.decompose_padding(pad, inner)
    check_numeric(sch.func, before, rtol=1e-4, atol=1e-4)
