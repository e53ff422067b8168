"""Every topi operator against numpy: built with ``tc.build`` for the CPU and run.

To keep compilation modest, operators of one family share a PrimFunc (one stage and one
output per operator); each output is still compared with its own numpy reference. Shapes
include extents 1, 7 and 13 and a symbolic extent; float32 everywhere, float64 (and float16
where it applies) on one shape by default, all combinations under ``-m slow``.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence

import numpy as np
import pytest

import tilecraft as tc
from tilecraft import te, topi

TOL = {"float16": (2e-2, 2e-2), "float32": (1e-4, 1e-5), "float64": (1e-9, 1e-10)}
_erf = np.vectorize(math.erf, otypes=[np.float64])


def rng_for(*key: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def run(
    args: Sequence[te.Tensor],
    outs: Sequence[te.Tensor],
    arrays: Sequence[np.ndarray],
    expected: Sequence[np.ndarray],
    scalars: Sequence[int] = (),
) -> list[np.ndarray]:
    """Build [args, outs] and call it; outputs are allocated like ``expected``."""
    func = te.create_prim_func([*args, *outs])
    lib = tc.build(func, target="cpu")
    results = [np.zeros(e.shape, dtype=str(o.dtype)) for e, o in zip(expected, outs, strict=True)]
    lib["main"](*arrays, *results, *scalars)
    return results


def check(results: Sequence[np.ndarray], expected: Sequence[np.ndarray], dtype: str) -> None:
    rtol, atol = TOL.get(dtype, (0, 0))
    for n, (got, want) in enumerate(zip(results, expected, strict=True)):
        assert got.shape == want.shape, f"output {n}: shape {got.shape} vs {want.shape}"
        if got.dtype.kind in "fc":
            np.testing.assert_allclose(
                got.astype("float64"), want.astype("float64"), rtol=rtol, atol=atol,
                err_msg=f"output {n}",
            )  # fmt: skip
        else:
            np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=f"output {n}")


def ref_dtype(dtype: str) -> str:
    """numpy computes float16 references in float32 (our codegen upcasts the same way)."""
    return "float32" if dtype == "float16" else dtype


def placeholder(shape: Sequence[int | str], dtype: str, name: str) -> te.Tensor:
    return te.placeholder(tuple(shape), dtype, name=name)


def concrete(shape: Sequence[int | str], n: int) -> tuple[int, ...]:
    return tuple(n if isinstance(s, str) else s for s in shape)


# Each case: (shape with maybe a symbolic "n", value of n, dtype). Default: three f32 shapes
# (extents 1, 7, 13, symbolic) plus one f64 and one f16; slow: everything crossed.
SHAPES = [(1,), (7, 13), ("n", 13)]
DEFAULT = [(s, "float32") for s in SHAPES] + [((13, 7), "float64"), ((7, 13), "float16")]
SLOW = [
    pytest.param(s, d, marks=pytest.mark.slow)
    for s in [*SHAPES, (1, 1, 7)]
    for d in ("float64", "float16")
]


# --- elementwise ---------------------------------------------------------------------------
UNARY: dict[str, tuple[Callable[[te.Tensor], te.Tensor], Callable[[np.ndarray], np.ndarray]]] = {
    "negative": (topi.negative, np.negative),
    "abs": (topi.abs, np.abs),
    "exp": (topi.exp, np.exp),
    "log": (lambda x: topi.log(topi.abs(x)), lambda a: np.log(np.abs(a))),
    "sqrt": (lambda x: topi.sqrt(topi.abs(x)), lambda a: np.sqrt(np.abs(a))),
    "rsqrt": (lambda x: topi.rsqrt(topi.abs(x)), lambda a: 1 / np.sqrt(np.abs(a))),
    "tanh": (topi.tanh, np.tanh),
    "sigmoid": (topi.sigmoid, lambda a: 1 / (1 + np.exp(-a))),
    "erf": (topi.erf, lambda a: _erf(a)),
    "relu": (topi.relu, lambda a: np.maximum(a, 0)),
    "gelu": (topi.gelu, lambda a: 0.5 * a * (1 + _erf(a / math.sqrt(2)))),
    "gelu_tanh": (
        lambda x: topi.gelu(x, approximate="tanh"),
        lambda a: 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a**3))),
    ),
    "silu": (topi.silu, lambda a: a / (1 + np.exp(-a))),
    "clip": (lambda x: topi.clip(x, -0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5)),
    "floor": (topi.floor, np.floor),
}


def _unary_case(shape: Sequence[int | str], dtype: str) -> None:
    x = placeholder(shape, dtype, "x")
    names = list(UNARY)
    outs = [UNARY[k][0](x) for k in names]
    outs.append(topi.cast(x, "int32"))
    outs.append(topi.cast(x, "float64" if dtype != "float64" else "float32"))
    a = rng_for("unary", shape, dtype).uniform(-3, 3, concrete(shape, 5)).astype(dtype)
    # keep values away from 0 for log/rsqrt in low precision
    a = np.where(np.abs(a) < 0.1, 0.5, a).astype(dtype)
    ar = a.astype(ref_dtype(dtype))
    expected = [UNARY[k][1](ar).astype(dtype) for k in names]
    expected.append(a.astype("int32"))
    expected.append(a.astype("float64" if dtype != "float64" else "float32"))
    check(run([x], outs, [a], expected), expected, dtype)


@pytest.mark.parametrize(("shape", "dtype"), [*DEFAULT, *SLOW])
def test_unary(shape: Sequence[int | str], dtype: str) -> None:
    _unary_case(shape, dtype)


BINARY: dict[str, tuple[Callable[..., te.Tensor], Callable[..., np.ndarray]]] = {
    "add": (topi.add, np.add),
    "subtract": (topi.subtract, np.subtract),
    "multiply": (topi.multiply, np.multiply),
    "divide": (topi.divide, np.divide),
    "maximum": (topi.maximum, np.maximum),
    "minimum": (topi.minimum, np.minimum),
    "power": (lambda a, b: topi.power(topi.abs(a), b), lambda a, b: np.power(np.abs(a), b)),
    "where": (
        lambda a, b: topi.where(topi.greater(a, b), a, b),
        lambda a, b: np.where(a > b, a, b),
    ),
    "scalar": (lambda a, b: topi.add(topi.multiply(a, 2.0), 1), lambda a, b: a * 2 + 1),
}
BCAST = [
    ((1,), (1,), "float32"),
    ((7, 1, 13), (5, 1), "float32"),
    (("n", 13), (13,), "float32"),
    ((1, 7), (13, 1), "float64"),
    ((7, 13), (13,), "float16"),
]


@pytest.mark.parametrize(("sa", "sb", "dtype"), BCAST)
def test_binary_broadcast(sa: Sequence[int | str], sb: Sequence[int | str], dtype: str) -> None:
    x, y = placeholder(sa, dtype, "x"), placeholder(sb, dtype, "y")
    names = list(BINARY)
    outs = [BINARY[k][0](x, y) for k in names]
    outs.append(topi.less_equal(x, y))
    g = rng_for("binary", sa, sb, dtype)
    a = g.uniform(0.5, 2, concrete(sa, 4)).astype(dtype)
    b = g.uniform(0.5, 2, concrete(sb, 4)).astype(dtype)
    ar, br = a.astype(ref_dtype(dtype)), b.astype(ref_dtype(dtype))
    expected = [BINARY[k][1](ar, br).astype(dtype) for k in names]
    expected.append(a <= b)
    check(run([x, y], outs, [a, b], expected), expected, dtype)


def test_integer_binary_ops() -> None:
    x, y = placeholder((7, 13), "int32", "x"), placeholder((13,), "int32", "y")
    outs = [topi.add(x, y), topi.multiply(x, y), topi.floor_divide(x, y), topi.maximum(x, y)]
    outs.append(topi.abs(x))
    g = rng_for("int")
    a = g.integers(-50, 50, (7, 13)).astype("int32")
    b = g.integers(1, 9, (13,)).astype("int32") * np.where(np.arange(13) % 2, 1, -1)
    b = b.astype("int32")
    expected = [a + b, a * b, a // b, np.maximum(a, b), np.abs(a)]
    check(run([x, y], outs, [a, b], expected), expected, "int32")


# --- reductions ----------------------------------------------------------------------------
RED_CASES = [
    ((1,), "float32"),
    ((7, 13), "float32"),
    (("n", 7, 13), "float32"),
    ((13, 7), "float64"),
    pytest.param((7, 1, 13), "float64", marks=pytest.mark.slow),
    pytest.param((7, 13), "float16", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("shape", "dtype"), RED_CASES)
def test_reductions(shape: Sequence[int | str], dtype: str) -> None:
    x = placeholder(shape, dtype, "x")
    nd = len(shape)
    last, first = nd - 1, 0
    ops: list[tuple[te.Tensor, Callable[[np.ndarray], np.ndarray]]] = [
        (topi.sum(x), lambda a: np.sum(a)),
        (topi.sum(x, axis=last, keepdims=True), lambda a: np.sum(a, axis=last, keepdims=True)),
        (topi.mean(x, axis=first), lambda a: np.mean(a, axis=first)),
        (topi.max(x, axis=-1), lambda a: np.max(a, axis=-1)),
        (topi.min(x, axis=first, keepdims=True), lambda a: np.min(a, axis=first, keepdims=True)),
        (topi.prod(x, axis=last), lambda a: np.prod(a, axis=last)),
        (topi.argmax(x, axis=-1), lambda a: np.argmax(a, axis=-1).astype("int32")),
        (topi.argmin(x, axis=first), lambda a: np.argmin(a, axis=first).astype("int32")),
    ]
    if nd >= 2:
        ops.append((topi.mean(x, axis=(0, nd - 1)), lambda a: np.mean(a, axis=(0, nd - 1))))
    g = rng_for("red", shape, dtype)
    a = g.uniform(0.5, 1.5, concrete(shape, 3)).astype(dtype)
    a.flat[len(a.flat) // 2] = a.flat[0]  # a tie: argmax/argmin must pick the first
    ar = a.astype(ref_dtype(dtype))
    expected = [np.asarray(f(ar)) for _, f in ops]
    expected = [e if e.dtype.kind == "i" else e.astype(dtype) for e in expected]
    check(run([x], [t for t, _ in ops], [a], expected), expected, dtype)


# --- matmul / dense -------------------------------------------------------------------------
MATMUL = [
    ((1, 1), (1, 1), False, False, "float32"),
    ((7, 13), (13, 5), False, False, "float32"),
    ((13, 7), (5, 13), True, True, "float32"),
    ((2, 1, 7, 13), (3, 13, 4), False, False, "float32"),
    (("n", 13), (13, 7), False, False, "float32"),
    ((3, 7, 13), (3, 1, 13), False, True, "float64"),
    ((7, 13), (13, 7), False, False, "float16"),
]


@pytest.mark.parametrize(("sa", "sb", "ta", "tb", "dtype"), MATMUL)
def test_matmul(sa: tuple, sb: tuple, ta: bool, tb: bool, dtype: str) -> None:
    x, y = placeholder(sa, dtype, "x"), placeholder(sb, dtype, "y")
    out = topi.matmul(x, y, transpose_a=ta, transpose_b=tb)
    g = rng_for("mm", sa, sb, dtype)
    a = g.uniform(-1, 1, concrete(sa, 6)).astype(dtype)
    b = g.uniform(-1, 1, concrete(sb, 6)).astype(dtype)
    ar, br = a.astype(ref_dtype(dtype)), b.astype(ref_dtype(dtype))
    want = np.matmul(np.swapaxes(ar, -1, -2) if ta else ar, np.swapaxes(br, -1, -2) if tb else br)
    expected = [want.astype(dtype)]
    check(run([x, y], [out], [a, b], expected), expected, dtype)


@pytest.mark.parametrize(
    ("xs", "dtype", "bias"),
    [((1, 13), "float32", True), ((2, 7, 13), "float32", False), (("n", 13), "float64", True)],
)
def test_dense(xs: tuple, dtype: str, bias: bool) -> None:
    x, w = placeholder(xs, dtype, "x"), placeholder((7, 13), dtype, "w")
    b = placeholder((7,), dtype, "b")
    out = topi.dense(x, w, b if bias else None)
    g = rng_for("dense", xs, dtype)
    a = g.uniform(-1, 1, concrete(xs, 5)).astype(dtype)
    wa, ba = g.uniform(-1, 1, (7, 13)).astype(dtype), g.uniform(-1, 1, (7,)).astype(dtype)
    want = a @ wa.T + (ba if bias else 0)
    args, arrays = ([x, w, b], [a, wa, ba]) if bias else ([x, w], [a, wa])
    check(run(args, [out], arrays, [want]), [want], dtype)


# --- softmax and normalizations -------------------------------------------------------------
NORM_CASES = [
    ((1, 1), "float32"),
    ((7, 13), "float32"),
    (("n", 13), "float32"),
    ((13, 7), "float64"),
    ((7, 13), "float16"),
]


def _np_softmax(a: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize(("shape", "dtype"), NORM_CASES)
def test_softmax_layer_rms_norm(shape: tuple, dtype: str) -> None:
    x = placeholder(shape, dtype, "x")
    gam = placeholder(shape[-1:], dtype, "gamma")
    bet = placeholder(shape[-1:], dtype, "beta")
    outs = [
        topi.softmax(x),
        topi.softmax(x, axis=0),
        topi.log_softmax(x),
        topi.layer_norm(x, gam, bet),
        topi.rms_norm(x, gam),
        topi.layer_norm(x, None, None, axis=(0, 1)),
    ]
    g = rng_for("norm", shape, dtype)
    a = g.uniform(-3, 3, concrete(shape, 5)).astype(dtype)
    ga = g.uniform(0.5, 1.5, shape[-1:]).astype(dtype)
    be = g.uniform(-1, 1, shape[-1:]).astype(dtype)
    ar, gr, br = (v.astype(ref_dtype(dtype)) for v in (a, ga, be))
    eps = 1e-5

    def ln(v: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        m = v.mean(axis=axes, keepdims=True)
        return (v - m) / np.sqrt(((v - m) ** 2).mean(axis=axes, keepdims=True) + eps)

    expected = [
        _np_softmax(ar, -1),
        _np_softmax(ar, 0),
        np.log(_np_softmax(ar, -1)),
        ln(ar, (-1,)) * gr + br,
        ar / np.sqrt((ar**2).mean(axis=-1, keepdims=True) + eps) * gr,
        ln(ar, (0, 1)),
    ]
    expected = [e.astype(dtype) for e in expected]
    got = run([x, gam, bet], outs, [a, ga, be], expected)
    check(got, expected, dtype)


@pytest.mark.parametrize(
    ("shape", "groups", "dtype"),
    [((1, 4, 1, 1), 2, "float32"), ((2, 6, 7, 13), 3, "float32"), ((1, 4, "n", 7), 4, "float64")],
)
def test_group_norm(shape: tuple, groups: int, dtype: str) -> None:
    x = placeholder(shape, dtype, "x")
    c = shape[1]
    gam, bet = placeholder((c,), dtype, "gamma"), placeholder((c,), dtype, "beta")
    out = topi.group_norm(x, gam, bet, groups, eps=1e-5)
    g = rng_for("gn", shape, dtype)
    a = g.uniform(-2, 2, concrete(shape, 5)).astype(dtype)
    ga, be = g.uniform(0.5, 1.5, (c,)).astype(dtype), g.uniform(-1, 1, (c,)).astype(dtype)
    v = a.reshape(a.shape[0], groups, -1)
    norm = (v - v.mean(-1, keepdims=True)) / np.sqrt(v.var(-1, keepdims=True) + 1e-5)
    want = norm.reshape(a.shape) * ga.reshape(1, c, 1, 1) + be.reshape(1, c, 1, 1)
    check(run([x, gam, bet], [out], [a, ga, be], [want]), [want], dtype)


# --- data movement --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("shape", "dtype"),
    [((1, 1, 1), "float32"), ((2, 7, 13), "float32"), (("n", 7, 13), "float32"),
     ((2, 7, 13), "float64"), ((2, 7, 13), "int32")],
)  # fmt: skip
def test_transforms(shape: tuple, dtype: str) -> None:
    x = placeholder(shape, dtype, "x")
    ids = placeholder((2, 3), "int32", "ids")
    d0, d1, d2 = shape
    outs = [
        topi.transpose(x, (2, 0, 1)),
        topi.permute(x),
        topi.reshape(x, (-1, d2)),
        topi.reshape(x, (d1, -1)) if isinstance(d0, int) else topi.reshape(x, (-1,)),
        topi.concat([x, x, topi.negative(x)], axis=1),
        *topi.split(x, [min(1, d2), d2], axis=2),
        topi.take(x, ids, axis=1),
        topi.embedding(topi.reshape(x, (-1, d2)), ids),
    ]
    g = rng_for("tr", shape, dtype)
    a = (g.uniform(-5, 5, concrete(shape, 3)) * 10).astype(dtype)
    n1 = a.shape[1]
    ia = np.array([[0, n1 - 1, -1], [1 % n1, 0, n1 - 1]], dtype="int32")
    flat = a.reshape(-1, a.shape[2])
    expected = [
        a.transpose(2, 0, 1),
        a.transpose(2, 1, 0),
        flat,
        a.reshape(a.shape[1], -1) if isinstance(d0, int) else a.reshape(-1),
        np.concatenate([a, a, -a], axis=1),
        *np.split(a, [min(1, a.shape[2]), a.shape[2]], axis=2),
        np.take(a, ia, axis=1),
        np.take(flat, np.where(ia < 0, ia + flat.shape[0], ia), axis=0),
    ]
    check(run([x, ids], outs, [a, ia], expected), expected, dtype)


def test_take_clamps_out_of_range_indices() -> None:
    x, ids = placeholder((5, 3), "float32", "x"), placeholder((4,), "int32", "ids")
    out = topi.take(x, ids, axis=0)
    a = np.arange(15, dtype="float32").reshape(5, 3)
    ia = np.array([7, -9, 2, -1], dtype="int32")
    want = a[[4, 0, 2, 4]]
    check(run([x, ids], [out], [a, ia], [want]), [want], "float32")


# --- convolution and pooling ----------------------------------------------------------------
def np_conv2d_nchw(x: np.ndarray, w: np.ndarray, s: int, p: int, d: int, groups: int) -> np.ndarray:
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    oh = (h + 2 * p - d * (kh - 1) - 1) // s + 1
    ow = (wd + 2 * p - d * (kw - 1) - 1) // s + 1
    out = np.zeros((n, o, oh, ow), dtype=np.float64)
    og = o // groups
    for f in range(o):
        grp = f // og
        for y in range(kh):
            for z in range(kw):
                win = xp[:, grp * cg : (grp + 1) * cg, y * d : y * d + s * (oh - 1) + 1 : s,
                         z * d : z * d + s * (ow - 1) + 1 : s]  # fmt: skip
                out[:, f] += np.einsum("nchw,c->nhw", win, w[f, :, y, z])
    return out


CONV = [
    ((1, 1, 1, 1), (1, 1, 1, 1), 1, 0, 1, 1, "NCHW", "float32"),
    ((1, 4, 7, 13), (6, 2, 3, 3), 2, 1, 1, 2, "NCHW", "float32"),
    ((2, 3, 13, 7), (4, 3, 3, 2), 1, 2, 2, 1, "NHWC", "float32"),
    ((1, 2, 9, 9), (2, 1, 3, 3), 1, 1, 1, 2, "NHWC", "float64"),
]


@pytest.mark.parametrize(("xs", "ws", "s", "p", "d", "groups", "layout", "dtype"), CONV)
def test_conv2d(
    xs: tuple, ws: tuple, s: int, p: int, d: int, groups: int, layout: str, dtype: str
) -> None:
    g = rng_for("conv", xs, ws, layout)
    a = g.uniform(-1, 1, xs).astype(dtype)
    wa = g.uniform(-1, 1, ws).astype(dtype)
    want = np_conv2d_nchw(a, wa, s, p, d, groups).astype(dtype)
    if layout == "NHWC":
        a, wa, want = (
            a.transpose(0, 2, 3, 1).copy(),
            wa.transpose(2, 3, 1, 0).copy(),
            want.transpose(0, 2, 3, 1),
        )
    x, w = placeholder(a.shape, dtype, "x"), placeholder(wa.shape, dtype, "w")
    out = topi.conv2d(x, w, stride=s, padding=p, dilation=d, groups=groups, layout=layout)
    check(run([x, w], [out], [a, wa], [want]), [want], dtype)


def test_conv2d_symbolic_batch() -> None:
    x, w = placeholder(("n", 2, 7, 7), "float32", "x"), placeholder((3, 2, 3, 3), "float32", "w")
    out = topi.conv2d(x, w, padding=1)
    g = rng_for("conv-sym")
    a, wa = g.uniform(-1, 1, (3, 2, 7, 7)).astype("float32"), g.uniform(-1, 1, (3, 2, 3, 3))
    wa = wa.astype("float32")
    want = np_conv2d_nchw(a, wa, 1, 1, 1, 1).astype("float32")
    check(run([x, w], [out], [a, wa], [want]), [want], "float32")


def np_pool(x: np.ndarray, k: int, s: int, p: int, kind: str) -> np.ndarray:
    n, c, h, w = x.shape
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    out = np.zeros((n, c, oh, ow))
    for y in range(oh):
        for z in range(ow):
            y0, z0 = y * s - p, z * s - p
            win = x[:, :, max(y0, 0) : y0 + k, max(z0, 0) : z0 + k]
            if kind == "max":
                out[:, :, y, z] = win.max(axis=(2, 3))
            elif kind == "avg":
                out[:, :, y, z] = win.mean(axis=(2, 3))
            else:
                out[:, :, y, z] = win.sum(axis=(2, 3)) / (k * k)
    return out


@pytest.mark.parametrize(
    ("xs", "k", "s", "p", "layout", "dtype"),
    [((1, 1, 1, 1), 1, 1, 0, "NCHW", "float32"), ((2, 3, 13, 7), 3, 2, 1, "NCHW", "float32"),
     ((1, 2, 7, 13), 2, 2, 1, "NHWC", "float32"), ((1, 2, 9, 9), 3, 1, 1, "NCHW", "float64")],
)  # fmt: skip
def test_pooling(xs: tuple, k: int, s: int, p: int, layout: str, dtype: str) -> None:
    g = rng_for("pool", xs, layout, dtype)
    a = g.uniform(-2, 2, xs).astype(dtype)
    wants = [np_pool(a, k, s, p, kind).astype(dtype) for kind in ("max", "avg", "avg_pad")]
    if layout == "NHWC":
        a, wants = a.transpose(0, 2, 3, 1).copy(), [w.transpose(0, 2, 3, 1) for w in wants]
    x = placeholder(a.shape, dtype, "x")
    outs = [
        topi.max_pool2d(x, k, s, p, layout=layout),
        topi.avg_pool2d(x, k, s, p, layout=layout),
        topi.avg_pool2d(x, k, s, p, layout=layout, count_include_pad=True, name="avg_pad"),
    ]
    check(run([x], outs, [a], wants), wants, dtype)


# --- transformer blocks ---------------------------------------------------------------------
def np_rotary(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, off: int) -> np.ndarray:
    s, d = x.shape[-2], x.shape[-1]
    c, sn = cos[off : off + s], sin[off : off + s]
    rot = np.concatenate([-x[..., d // 2 :], x[..., : d // 2]], axis=-1)
    return x * c + rot * sn


@pytest.mark.parametrize(
    ("xs", "off", "dtype"),
    [((1, 1, 2), 0, "float32"), ((2, 7, 8), 3, "float32"), ((1, 2, "n", 6), "var", "float32"),
     ((1, 2, 7, 8), 5, "float16")],
)  # fmt: skip
def test_rotary_embedding(xs: tuple, off: int | str, dtype: str) -> None:
    x = placeholder(xs, dtype, "x")
    d = xs[-1]
    cos, sin = placeholder((16, d), dtype, "cos"), placeholder((16, d), dtype, "sin")
    offset = tc.ir.Var("offset") if off == "var" else off
    out = topi.rotary_embedding(x, cos, sin, offset)
    g = rng_for("rope", xs, dtype)
    a = g.uniform(-1, 1, concrete(xs, 5)).astype(dtype)
    pos = np.arange(16)[:, None] / (10000 ** (np.arange(d)[None, :] % (d // 2) / d))
    ca, sa = np.cos(pos).astype(dtype), np.sin(pos).astype(dtype)
    o = 4 if off == "var" else int(off)
    ar, cr, sr = (v.astype(ref_dtype(dtype)) for v in (a, ca, sa))
    want = np_rotary(ar, cr, sr, o).astype(dtype)
    scalars = [o] if off == "var" else []
    check(run([x, cos, sin], [out], [a, ca, sa], [want], scalars), [want], dtype)


def np_causal_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    s, t, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d)
    mask = np.arange(t)[None, :] <= np.arange(s)[:, None] + (t - s)
    scores = np.where(mask, scores, -np.inf)
    return _np_softmax(scores, -1) @ v


@pytest.mark.parametrize(
    ("qs", "ks", "dtype"),
    [((1, 1, 1, 4), (1, 1, 1, 4), "float32"), ((2, 7, 8), (2, 13, 8), "float32"),
     ((1, 2, 7, 8), (1, 2, 7, 8), "float64"), ((1, 2, 5, 8), (1, 2, 7, 8), "float16")],
)  # fmt: skip
def test_causal_attention(qs: tuple, ks: tuple, dtype: str) -> None:
    q, k, v = placeholder(qs, dtype, "q"), placeholder(ks, dtype, "k"), placeholder(ks, dtype, "v")
    out = topi.causal_attention(q, k, v)
    g = rng_for("attn", qs, ks, dtype)
    qa, ka, va = (g.uniform(-1, 1, s).astype(dtype) for s in (qs, ks, ks))
    want = np_causal_attention(*(t.astype(ref_dtype(dtype)) for t in (qa, ka, va))).astype(dtype)
    check(run([q, k, v], [out], [qa, ka, va], [want]), [want], dtype)


def test_causal_attention_symbolic_sequence() -> None:
    q = placeholder((2, "n", 8), "float32", "q")
    k, v = placeholder((2, "n", 8), "float32", "k"), placeholder((2, "n", 8), "float32", "v")
    out = topi.causal_attention(q, k, v)
    g = rng_for("attn-sym")
    qa, ka, va = (g.uniform(-1, 1, (2, 6, 8)).astype("float32") for _ in range(3))
    want = np_causal_attention(qa, ka, va)
    check(run([q, k, v], [out], [qa, ka, va], [want]), [want], "float32")
