"""A reduction over an empty (symbolic, zero-length) axis gives the init value, as numpy does.

Regression: the init was lowered into the reduction loop under "first step" guards, so with
zero steps it never ran and the output kept whatever memory held.
"""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as tc


def _row_sum() -> tc.ir.PrimFunc:
    n, k = tc.ir.Var("n", "int32"), tc.ir.Var("k", "int32")
    a = tc.te.placeholder((n, k), "float32", name="A")
    r = tc.te.reduce_axis((0, k), name="r")
    s = tc.te.compute((n,), lambda i: tc.te.sum(a[i, r], axis=r), name="S")
    return tc.te.create_prim_func([a, s])


def _matmul() -> tc.ir.PrimFunc:
    k = tc.ir.Var("k", "int32")
    a = tc.te.placeholder((4, k), "float32", name="A")
    b = tc.te.placeholder((k, 3), "float32", name="B")
    return tc.te.create_prim_func([a, b, tc.topi.matmul(a, b)])


@pytest.mark.parametrize("k", [0, 1, 5])
def test_row_sum_over_an_empty_axis_is_zero(k: int) -> None:
    lib = tc.build(_row_sum())
    x = np.random.default_rng(k).random((3, k)).astype("float32")
    out = np.full(3, 7.0, "float32")
    lib["main"](x, out)
    np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-6)


def test_matmul_with_an_empty_reduction_is_zero_also_when_scheduled() -> None:
    func = _matmul()
    sch = tc.Schedule(func)
    i, j, kk = sch.get_loops(sch.get_block("matmul"))
    sch.reorder(kk, i, j)  # the reduction loop outermost: the init cannot sit above it
    for f in (func, sch.func):
        lib = tc.build(f)
        for k in (0, 2):
            a = np.ones((4, k), "float32")
            b = np.ones((k, 3), "float32")
            c = np.full((4, 3), 7.0, "float32")
            lib["main"](a, b, c)
            np.testing.assert_array_equal(c, a @ b)


def test_constant_reductions_get_no_extra_nest() -> None:
    a = tc.te.placeholder((4, 8), "float32", name="A")
    r = tc.te.reduce_axis((0, 8), name="r")
    s = tc.te.compute((4,), lambda i: tc.te.sum(a[i, r], axis=r), name="S")
    text = tc.lower.lower(tc.te.create_prim_func([a, s])).script()
    assert "empty" not in text
    assert "if r == 0:" in text  # only the usual first-step guard
    assert text.count("for ") == 1
