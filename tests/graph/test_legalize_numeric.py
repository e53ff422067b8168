"""Every graph operator legalizes to topi and computes what numpy computes."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

import tilecraft as tc
from tilecraft import te, topi
from tilecraft.graph import GraphBuilder, Legalize, build_graph_module

Ref = Callable[..., np.ndarray]
RNG = np.random.default_rng(0)


def _rand(
    shape: tuple[int, ...], dtype: str = "float32", lo: float = -2.0, hi: float = 2.0
) -> np.ndarray:
    if dtype.startswith("int"):
        return RNG.integers(0, 5, shape).astype(dtype)
    return RNG.uniform(lo, hi, shape).astype(dtype)


def _np_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _np_conv(x: np.ndarray, w: np.ndarray, stride: int, pad: int, dil: int) -> np.ndarray:
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    o, _, kh, kw = w.shape
    oh = (x.shape[2] - dil * (kh - 1) - 1) // stride + 1
    ow = (x.shape[3] - dil * (kw - 1) - 1) // stride + 1
    out = np.zeros((x.shape[0], o, oh, ow))
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dil, i * dil + stride * oh, stride)
            cols = slice(j * dil, j * dil + stride * ow, stride)
            win = x[:, :, rows, cols]
            out += np.einsum("nchw,oc->nohw", win, w[:, :, i, j])
    return out


def _np_pool(x: np.ndarray, k: int, s: int, p: int, kind: str) -> np.ndarray:
    fill = -np.inf if kind == "max" else 0.0
    x = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=fill)
    oh, ow = (x.shape[2] - k) // s + 1, (x.shape[3] - k) // s + 1
    wins = np.stack(
        [x[:, :, i : i + s * oh : s, j : j + s * ow : s] for i in range(k) for j in range(k)]
    )
    return wins.max(0) if kind == "max" else wins.mean(0)


def _np_attention(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool, scale: float
) -> np.ndarray:
    s = np.einsum("bihd,bjhd->bhij", q, k) * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    return np.einsum("bhij,bjhd->bihd", _np_softmax(s, -1), v)


def _np_rotary(x: np.ndarray, theta: float) -> np.ndarray:
    _, s, _, d = x.shape
    inv = theta ** (-np.arange(0, d, 2) / d)
    ang = np.arange(s)[:, None] * inv[None, :]
    cos = np.concatenate([np.cos(ang)] * 2, -1)[None, :, None, :]
    sin = np.concatenate([np.sin(ang)] * 2, -1)[None, :, None, :]
    return x * cos + np.concatenate([-x[..., d // 2 :], x[..., : d // 2]], -1) * sin


def _np_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, eps: float) -> np.ndarray:
    if b is None:
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * w + b


_erf = np.vectorize(math.erf)
X = (2, 3, 4)
POSITIVE = {"sqrt", "rsqrt"}  # cases whose inputs are drawn from [0.1, 2)
# name: (op, input shapes/dtypes, attrs, numpy reference)
CASES: dict[str, tuple[str, list[tuple[tuple[int, ...], str]], dict[str, object], Ref]] = {
    "add": ("add", [(X, "float32"), ((3, 1), "float32")], {}, np.add),
    "subtract": ("subtract", [((3, 1), "float32"), (X, "float32")], {}, np.subtract),
    "multiply": ("multiply", [(X, "float32"), ((4,), "float32")], {}, np.multiply),
    "divide": ("divide", [(X, "float32"), ((1, 3, 1), "float32")], {}, np.divide),
    "maximum": ("maximum", [(X, "float32"), (X, "float32")], {}, np.maximum),
    "minimum": ("minimum", [(X, "float32"), ((4,), "float32")], {}, np.minimum),
    "relu": ("relu", [(X, "float32")], {}, lambda x: np.maximum(x, 0)),
    "gelu": ("gelu", [(X, "float32")], {}, lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2)))),
    "silu": ("silu", [(X, "float32")], {}, lambda x: x / (1 + np.exp(-x))),
    "sigmoid": ("sigmoid", [(X, "float32")], {}, lambda x: 1 / (1 + np.exp(-x))),
    "tanh": ("tanh", [(X, "float32")], {}, np.tanh),
    "exp": ("exp", [(X, "float32")], {}, np.exp),
    "negative": ("negative", [(X, "float32")], {}, np.negative),
    "sqrt": ("sqrt", [(X, "float32")], {}, np.sqrt),
    "rsqrt": ("rsqrt", [(X, "float32")], {}, lambda x: 1 / np.sqrt(x)),
    "sum": (
        "sum",
        [(X, "float32")],
        {"axis": (0, 2), "keepdims": True},
        lambda x: x.sum((0, 2), keepdims=True),
    ),
    "mean": ("mean", [(X, "float32")], {"axis": 1}, lambda x: x.mean(1)),
    "max": ("max", [(X, "float32")], {}, lambda x: x.max()),
    "min": ("min", [(X, "float32")], {"axis": -1}, lambda x: x.min(-1)),
    "matmul": ("matmul", [(X, "float32"), ((4, 5), "float32")], {}, np.matmul),
    "linear": (
        "linear",
        [((3, 4), "float32"), ((5, 4), "float32"), ((5,), "float32")],
        {},
        lambda x, w, b: x @ w.T + b,
    ),
    "permute_dims": (
        "permute_dims",
        [(X, "float32")],
        {"axes": (1, 0, 2)},
        lambda x: x.transpose(1, 0, 2),
    ),
    "reshape": ("reshape", [(X, "float32")], {"shape": (4, -1)}, lambda x: x.reshape(4, -1)),
    "concat": (
        "concat",
        [((2, 3), "float32"), ((2, 5), "float32"), ((2, 1), "float32")],
        {"axis": 1},
        lambda *xs: np.concatenate(xs, 1),
    ),
    "take": (
        "take",
        [((5, 3), "float32"), ((2, 4), "int32")],
        {"axis": 0},
        lambda x, i: np.take(x, i, 0),
    ),
    "astype": ("astype", [(X, "int32")], {"dtype": "float32"}, lambda x: x.astype("float32")),
    "conv2d": (
        "conv2d",
        [((1, 2, 7, 7), "float32"), ((3, 2, 3, 3), "float32")],
        {"strides": 2, "padding": 1},
        lambda x, w: _np_conv(x, w, 2, 1, 1),
    ),
    "conv2d_dilated": (
        "conv2d",
        [((1, 2, 7, 7), "float32"), ((3, 2, 3, 3), "float32")],
        {"dilation": 2},
        lambda x, w: _np_conv(x, w, 1, 0, 2),
    ),
    "max_pool2d": (
        "max_pool2d",
        [((1, 2, 7, 7), "float32")],
        {"pool_size": 3, "strides": 2, "padding": 1},
        lambda x: _np_pool(x, 3, 2, 1, "max"),
    ),
    "avg_pool2d": (
        "avg_pool2d",
        [((1, 2, 7, 7), "float32")],
        {"pool_size": 3, "strides": 2, "padding": 1},
        lambda x: _np_pool(x, 3, 2, 1, "avg"),
    ),
    "softmax": ("softmax", [(X, "float32")], {"axis": 0}, lambda x: _np_softmax(x, 0)),
    "layer_norm": (
        "layer_norm",
        [(X, "float32"), ((4,), "float32"), ((4,), "float32")],
        {"eps": 1e-5},
        lambda x, w, b: _np_norm(x, w, b, 1e-5),
    ),
    "rms_norm": (
        "rms_norm",
        [(X, "float32"), ((4,), "float32")],
        {"eps": 1e-6},
        lambda x, w: _np_norm(x, w, None, 1e-6),
    ),
    "attention_causal": (
        "attention",
        [((1, 5, 2, 4), "float32")] * 3,
        {"causal": True},
        lambda q, k, v: _np_attention(q, k, v, True, 0.5),
    ),
    "attention_scaled": (
        "attention",
        [((1, 5, 2, 4), "float32")] * 3,
        {"causal": False, "scale": 0.3},
        lambda q, k, v: _np_attention(q, k, v, False, 0.3),
    ),
    "rotary": (
        "rotary",
        [((1, 5, 2, 8), "float32")],
        {"theta": 100.0},
        lambda x: _np_rotary(x, 100.0),
    ),
}


@pytest.fixture(scope="module")
def exe() -> tc.graph.Executable:
    funcs = {}
    for name, (op, inputs, attrs, _) in CASES.items():
        bb = GraphBuilder()
        params = [bb.param(f"a{i}", shape, dt) for i, (shape, dt) in enumerate(inputs)]
        funcs[name] = bb.finish(bb.emit(op, params, attrs), name)
    return build_graph_module(Legalize()(tc.IRModule(funcs)), "cpu")


@pytest.mark.parametrize("case", sorted(CASES))
def test_operator_matches_numpy(exe: tc.graph.Executable, case: str) -> None:
    _, inputs, _, ref = CASES[case]
    lo = 0.1 if case in POSITIVE else -2.0
    args = [_rand(shape, dt, lo) for shape, dt in inputs]
    expected = ref(*(a.astype("float64") if a.dtype.kind == "f" else a for a in args))
    np.testing.assert_allclose(exe[case](*args), expected, rtol=1e-5, atol=1e-5)


def test_legalization_is_the_topi_computation() -> None:
    bb = GraphBuilder()
    x = bb.param("x", ("n", 8), "float32")
    w = bb.param("w", (8,), "float32")
    mod = Legalize()(
        tc.IRModule({"main": bb.finish(bb.emit("rms_norm", [x, w], {"eps": 1e-6}), "main")})
    )
    n = te.size_var("n")
    a = te.placeholder((n, 8), "float32", name="x")
    b = te.placeholder((8,), "float32", name="w")
    expected = te.create_prim_func([a, b, topi.rms_norm(a, b, eps=1e-6)], name="rms_norm")
    tc.ir.assert_structural_equal(mod["rms_norm"], expected)
