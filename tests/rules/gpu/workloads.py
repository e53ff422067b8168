"""te/topi workloads for the GPU rule tests, at reduced sizes (either may be symbolic)."""

from __future__ import annotations

from collections.abc import Callable

import tilecraft as tc
from tilecraft.ir import PrimFunc, Var

Dim = int | Var
te, topi = tc.te, tc.topi


def _x(shape: tuple[Dim, ...], dtype: str) -> tc.te.Tensor:
    return te.placeholder(shape, dtype, name="X")


def softmax(rows: Dim = 4, cols: Dim = 100, dtype: str = "float32", axis: int = -1) -> PrimFunc:
    x = _x((rows, cols), dtype)
    return te.create_prim_func([x, topi.softmax(x, axis=axis)])


def softmax_nchw(dtype: str = "float32") -> PrimFunc:
    """Softmax over the channels (axis 1) of an NCHW tensor: the reduced axis is not last."""
    x = _x((2, 5, 3, 8), dtype)
    return te.create_prim_func([x, topi.softmax(x, axis=1)])


def log_softmax(rows: Dim = 3, cols: Dim = 70, dtype: str = "float32") -> PrimFunc:
    x = _x((rows, cols), dtype)
    return te.create_prim_func([x, topi.log_softmax(x)])


def logsumexp(rows: Dim = 3, cols: Dim = 64, dtype: str = "float32") -> PrimFunc:
    x = _x((rows, cols), dtype)
    mx = topi.max(x, axis=1, keepdims=True)
    k = te.reduce_axis((0, cols), name="k")
    s = te.compute((rows,), lambda i: te.sum(tc.ir.op.exp(x[i, k] - mx[i, 0]), axis=k), name="S")
    out = te.compute((rows,), lambda i: tc.ir.op.log(s[i]) + mx[i, 0], name="LSE")
    return te.create_prim_func([x, out])


def layer_norm(rows: Dim = 4, cols: Dim = 96, dtype: str = "float32") -> PrimFunc:
    x = _x((rows, cols), dtype)
    g = te.placeholder((cols,), dtype, name="G")
    b = te.placeholder((cols,), dtype, name="B")
    return te.create_prim_func([x, g, b, topi.layer_norm(x, g, b)])


def layer_norm_axis0(dtype: str = "float32") -> PrimFunc:
    """Layer norm over the first axis: every row strided."""
    x = _x((40, 6), dtype)
    return te.create_prim_func([x, topi.layer_norm(x, None, None, axis=0)])


def rms_norm(rows: Dim = 4, cols: Dim = 128, dtype: str = "float32") -> PrimFunc:
    x = _x((rows, cols), dtype)
    w = te.placeholder((cols,), dtype, name="W")
    return te.create_prim_func([x, w, topi.rms_norm(x, w)])


def group_norm(dtype: str = "float32") -> PrimFunc:
    x = _x((2, 8, 4, 4), dtype)
    g = te.placeholder((8,), dtype, name="G")
    b = te.placeholder((8,), dtype, name="B")
    return te.create_prim_func([x, g, b, topi.group_norm(x, g, b, num_groups=4)])


def reduce_sum(shape: tuple[Dim, ...], axis: int | tuple[int, ...] | None,
               dtype: str = "float32", keepdims: bool = False) -> PrimFunc:  # fmt: skip
    x = _x(shape, dtype)
    return te.create_prim_func([x, topi.sum(x, axis=axis, keepdims=keepdims)])


def reduce_mean(shape: tuple[Dim, ...], axis: int, dtype: str = "float32") -> PrimFunc:
    x = _x(shape, dtype)
    return te.create_prim_func([x, topi.mean(x, axis=axis)])


def reduce_max(shape: tuple[Dim, ...], axis: int, dtype: str = "float32") -> PrimFunc:
    x = _x(shape, dtype)
    return te.create_prim_func([x, topi.max(x, axis=axis)])


def transpose(shape: tuple[Dim, ...], axes: tuple[int, ...] | None = None,
              dtype: str = "float32") -> PrimFunc:  # fmt: skip
    x = _x(shape, dtype)
    return te.create_prim_func([x, topi.transpose(x, axes)])


def ewise_chain(shape: tuple[Dim, ...] = (6, 50), dtype: str = "float32") -> PrimFunc:
    """``relu(x * 2 + bias)`` with a broadcast bias."""
    x = _x(shape, dtype)
    b = te.placeholder((shape[-1],), dtype, name="B")
    y = te.compute(shape, lambda *i: x[i] * tc.ir.const(2.0, dtype) + b[i[-1]], name="Y")
    return te.create_prim_func([x, b, topi.relu(y)])


def argmax(dtype: str = "float32") -> PrimFunc:
    x = _x((4, 33), dtype)
    return te.create_prim_func([x, topi.argmax(x, axis=1)])


def matmul(m: int = 16, n: int = 16, k: int = 24) -> PrimFunc:
    a = te.placeholder((m, k), "float32", name="A")
    b = te.placeholder((k, n), "float32", name="B")
    return te.create_prim_func([a, b, topi.matmul(a, b)])


Make = Callable[[], PrimFunc]


def add_rms_norm(rows: Dim = 3, cols: Dim = 128, dtype: str = "float32") -> PrimFunc:
    """A residual add written out, then the RMS norm of the sum (three blocks)."""
    x = _x((rows, cols), dtype)
    r = te.placeholder((rows, cols), dtype, name="R")
    w = te.placeholder((cols,), dtype, name="W")
    s = topi.add(x, r)
    return te.create_prim_func([x, r, w, s, topi.rms_norm(s, w)])


def rms_norm_by_hand(rows: Dim = 4, cols: int = 64) -> PrimFunc:
    """RMS norm written as ``x / sqrt(mean(x * x) + eps)``: found by its math, not its name."""
    x = _x((rows, cols), "float32")
    k = te.reduce_axis((0, cols), name="k")
    ss = te.compute((rows,), lambda i: te.sum(x[i, k] * x[i, k], axis=k), name="ss")
    out = te.compute(
        (rows, cols),
        lambda i, j: x[i, j] / tc.ir.op.sqrt(ss[i] / tc.ir.const(float(cols), "float32") + 1e-6),
        name="out",
    )
    return te.create_prim_func([x, out])
