"""NaN inputs give numpy's results (issue 10, 6i).

Before: ``relu(NaN)`` was 0, ``clip(NaN)`` the lower bound, and max/min/argmax/argmin ignored
NaN (C's ``a > b ? a : b`` drops a NaN in one operand order). numpy propagates NaN through
``maximum``/``minimum``/``max``/``min``/``clip`` and ``argmax``/``argmin`` return the first NaN.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

import tilecraft as tc
from tilecraft import te, topi
from tilecraft.arith import evaluate
from tilecraft.ir import FloatImm, Max, Min

DTYPES = ["float32", "float64"]


def _data(dtype: str, shape: tuple[int, ...] = (6, 9)) -> np.ndarray:
    """Random values with NaN at the start, middle and end of rows, a row of NaN only, and a
    NaN-free row."""
    x = np.random.default_rng(7).standard_normal(shape).astype(dtype)
    x[0, 0] = np.nan
    x[1, shape[1] // 2] = np.nan
    x[2, -1] = np.nan
    x[3, 2] = x[3, 5] = np.nan
    x[4, :] = np.nan
    return x


def _run(
    inputs: Sequence[te.Tensor], outs: Sequence[te.Tensor], arrays: Sequence[np.ndarray]
) -> list[np.ndarray]:
    lib = tc.build(te.create_prim_func([*inputs, *outs]))
    shapes = [tuple(int(s.value) for s in o.shape) for o in outs]
    results = [np.full(s, 12345, dtype=str(o.dtype)) for s, o in zip(shapes, outs, strict=True)]
    lib["main"](*arrays, *results)
    return results


def _same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    np.testing.assert_array_equal(got, want, err_msg=what)  # equal_nan by default


@pytest.mark.parametrize("dtype", DTYPES)
def test_elementwise_nan_propagates(dtype: str) -> None:
    x = _data(dtype)
    y = np.random.default_rng(3).standard_normal((9,)).astype(dtype)
    y[4] = np.nan
    X = te.placeholder(x.shape, dtype, name="X")
    Y = te.placeholder(y.shape, dtype, name="Y")
    outs = [
        topi.relu(X),
        topi.clip(X, -0.5, 0.5, name="T_clip"),
        topi.maximum(X, Y),
        topi.minimum(Y, X, name="T_minimum"),
        topi.maximum(X, 0.25, name="T_max_scalar"),
    ]
    got = _run([X, Y], outs, [x, y])
    with np.errstate(invalid="ignore"):
        want = [
            np.maximum(x, 0),
            np.clip(x, -0.5, 0.5),
            np.maximum(x, y),
            np.minimum(y, x),
            np.maximum(x, np.asarray(0.25, dtype=dtype)),
        ]
    for n, (g, w) in enumerate(zip(got, want, strict=True)):
        _same(g, w.astype(dtype), f"output {n}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [1, 0, None])
def test_reductions_nan_propagate(dtype: str, axis: int | None) -> None:
    x = _data(dtype)
    X = te.placeholder(x.shape, dtype, name="X")
    outs = [topi.max(X, axis=axis), topi.min(X, axis=axis)]
    got = _run([X], outs, [x])
    _same(got[0], np.max(x, axis=axis), "max")
    _same(got[1], np.min(x, axis=axis), "min")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [1, 0])
def test_argmax_argmin_pick_the_first_nan(dtype: str, axis: int) -> None:
    x = _data(dtype)
    x[5, 3] = x[5, 4] = x[5].max()  # ties without NaN: the first wins
    X = te.placeholder(x.shape, dtype, name="X")
    outs = [topi.argmax(X, axis=axis), topi.argmin(X, axis=axis)]
    got = _run([X], outs, [x])
    _same(got[0], np.argmax(x, axis=axis).astype("int32"), "argmax")
    _same(got[1], np.argmin(x, axis=axis).astype("int32"), "argmin")


def test_max_after_rfactor_propagates_nan() -> None:
    """Partial maxima combined by the rfactor block still carry a NaN of any partition."""
    x = np.random.default_rng(1).standard_normal((4, 64)).astype("float32")
    x[0, 40] = np.nan
    x[1, 0] = np.nan
    x[2, 63] = np.nan
    X = te.placeholder(x.shape, "float32", name="X")
    func = te.create_prim_func([X, topi.max(X, axis=1)])
    sch = tc.Schedule(func)
    blk = sch.get_block("T_max")
    _, k = sch.get_loops(blk)
    ko, _ = sch.split(k, factors=[4, None])
    sch.rfactor(ko)
    got = np.zeros(4, "float32")
    tc.build(sch.func)["main"](x, got)
    _same(got, np.max(x, axis=1), "max after rfactor")


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_and_pooling_with_nan(dtype: str) -> None:
    x = _data(dtype)
    X = te.placeholder(x.shape, dtype, name="X")
    got = _run([X], [topi.softmax(X)], [x])[0]
    with np.errstate(invalid="ignore"):
        e = np.exp(x - np.max(x, axis=1, keepdims=True))
        want = e / e.sum(axis=1, keepdims=True)
    bad_rows = np.isnan(x).any(axis=1)
    assert np.isnan(got[bad_rows]).all()
    np.testing.assert_allclose(got[~bad_rows], want[~bad_rows], rtol=1e-5)

    img = np.random.default_rng(2).standard_normal((1, 2, 6, 6)).astype(dtype)
    img[0, 0, 1, 1] = np.nan
    img[0, 1, 5, 5] = np.nan
    Img = te.placeholder(img.shape, dtype, name="Img")
    pooled = _run([Img], [topi.max_pool2d(Img, kernel=2, padding=1)], [img])[0]
    padded = np.pad(img, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    want_pool = padded.reshape(1, 2, 4, 2, 4, 2).max(axis=(3, 5))
    _same(pooled, want_pool, "max_pool2d")


def test_te_max_reducer_and_evaluate_agree_with_numpy() -> None:
    k = te.reduce_axis((0, 8), name="k")
    X = te.placeholder((3, 8), "float32", name="X")
    out = te.compute((3,), lambda i: te.max(X[i, k], axis=k), name="M")
    x = np.arange(24, dtype="float32").reshape(3, 8)
    x[1, 0] = np.nan
    x[2, 7] = np.nan
    got = _run([X], [out], [x])[0]
    _same(got, np.max(x, axis=1), "te.max")
    nan, one = FloatImm("float64", float("nan")), FloatImm("float64", 1.0)
    for cls in (Max, Min):
        for a, b in ((nan, one), (one, nan)):
            value = evaluate(cls(a, b))
            assert isinstance(value, float)
            assert value != value, (cls.__name__, a, b)
