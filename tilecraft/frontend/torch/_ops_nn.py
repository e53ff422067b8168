"""Converters of ATen linear algebra, convolution, normalization, softmax and pooling."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph import TensorVar
from ...ir import IntImm, as_expr
from ._context import Context, UnsupportedNodeError
from ._registry import handles


@handles("aten::mm", "aten::bmm", "aten::matmul")
def _mm(ctx: Context, node: Any) -> TensorVar:
    a, b = ctx.tensor(node, 0), ctx.tensor(node, 1, "mat2")
    return ctx.emit("matmul", [a, b])


@handles("aten::addmm")
def _addmm(ctx: Context, node: Any) -> TensorVar:
    bias, a, b = ctx.tensor(node, 0), ctx.tensor(node, 1, "mat1"), ctx.tensor(node, 2, "mat2")
    beta, alpha = node.kwargs.get("beta", 1), node.kwargs.get("alpha", 1)
    dt = str(a.type.dtype)
    prod = ctx.emit("matmul", [a, b])
    if alpha != 1:
        prod = ctx.emit("multiply", [prod, ctx.scalar(alpha, dt)])
    if beta == 0:
        return prod
    if beta != 1:
        bias = ctx.emit("multiply", [bias, ctx.scalar(beta, dt)])
    return ctx.emit("add", [prod, bias])


def _ints(v: Any, n: int) -> tuple[int, ...]:
    items = [v] if isinstance(v, int) else list(v)
    if len(items) == 1:
        items = items * n
    return tuple(int(x) for x in items)


@handles("aten::convolution")
def _convolution(ctx: Context, node: Any) -> TensorVar:
    x, w = ctx.tensor(node, 0, "input"), ctx.tensor(node, 1, "weight")
    bias = ctx.arg(node, 2, "bias")
    stride, padding, dilation = (_ints(ctx.arg(node, i, k), 2) for i, k in
                                 ((3, "stride"), (4, "padding"), (5, "dilation")))  # fmt: skip
    if ctx.arg(node, 6, "transposed", False):
        raise UnsupportedNodeError("transposed convolution")
    groups = int(ctx.arg(node, 8, "groups", 1))
    one_d = x.type.ndim == 3
    if one_d:  # (N, C, L) as (N, C, 1, L)
        x = ctx.reshape(x, (*x.type.shape[:2], as_expr(1), x.type.shape[2]))
        w = ctx.reshape(w, (*w.type.shape[:2], as_expr(1), w.type.shape[2]))
        stride, padding, dilation = ((1, v[0]) for v in (stride, padding, dilation))
    elif x.type.ndim != 4:
        raise UnsupportedNodeError(f"{x.type.ndim - 2}-d convolution")
    attrs = {"strides": stride, "padding": padding, "dilation": dilation, "groups": groups}
    y = ctx.emit("conv2d", [x, w], attrs)
    if isinstance(bias, TensorVar):
        c = bias.type.shape[0]
        y = ctx.emit("add", [y, ctx.reshape(bias, (c, as_expr(1), as_expr(1)))])
    return ctx.reshape(y, ctx.out_shape(node)) if one_d else y


@handles("aten::native_layer_norm")
def _layer_norm(ctx: Context, node: Any) -> tuple[Any, ...]:
    x = ctx.tensor(node, 0, "input")
    shape = list(ctx.arg(node, 1, "normalized_shape"))
    w, b = ctx.arg(node, 2, "weight"), ctx.arg(node, 3, "bias")
    eps = float(ctx.arg(node, 4, "eps", 1e-5))
    dt = str(x.type.dtype)
    if len(shape) == 1:
        n = x.type.shape[-1]
        w = w if isinstance(w, TensorVar) else _ones(ctx, n, dt, 1.0)
        b = b if isinstance(b, TensorVar) else _ones(ctx, n, dt, 0.0)
        out = ctx.emit("layer_norm", [x, w, b], {"eps": eps})
        return out, None, None
    axes = tuple(range(x.type.ndim - len(shape), x.type.ndim))
    out = _normalize(ctx, x, axes, eps)
    if isinstance(w, TensorVar):
        out = ctx.emit("multiply", [out, w])
    if isinstance(b, TensorVar):
        out = ctx.emit("add", [out, b])
    return out, None, None


def _ones(ctx: Context, n: Any, dt: str, value: float) -> TensorVar:
    if not isinstance(n, IntImm):
        raise UnsupportedNodeError("layer_norm without weight over a symbolic extent")
    return ctx.const(np.full((n.value,), value, dtype=np.dtype(dt)), "ones" if value else "zeros")


def _normalize(ctx: Context, x: TensorVar, axes: tuple[int, ...], eps: float) -> TensorVar:
    """``(x - mean) / sqrt(var + eps)`` over ``axes`` (biased variance)."""
    dt = str(x.type.dtype)
    mu = ctx.emit("mean", [x], {"axis": axes, "keepdims": True})
    d = ctx.emit("subtract", [x, mu])
    var = ctx.emit("mean", [ctx.emit("multiply", [d, d])], {"axis": axes, "keepdims": True})
    r = ctx.emit("rsqrt", [ctx.emit("add", [var, ctx.scalar(eps, dt)])])
    return ctx.emit("multiply", [d, r])


@handles("aten::_native_batch_norm_legit_no_training")
def _batch_norm(ctx: Context, node: Any) -> tuple[Any, ...]:
    x = ctx.tensor(node, 0, "input")
    w, b = ctx.arg(node, 1, "weight"), ctx.arg(node, 2, "bias")
    mean, var = ctx.tensor(node, 3, "running_mean"), ctx.tensor(node, 4, "running_var")
    eps = float(ctx.arg(node, 6, "eps", 1e-5))
    dt = str(x.type.dtype)
    # scale = w / sqrt(var + eps), shift = b - mean * scale: parameter-only work, folded
    scale = ctx.emit("rsqrt", [ctx.emit("add", [var, ctx.scalar(eps, dt)])])
    if isinstance(w, TensorVar):
        scale = ctx.emit("multiply", [scale, w])
    shift = ctx.emit("negative", [ctx.emit("multiply", [mean, scale])])
    if isinstance(b, TensorVar):
        shift = ctx.emit("add", [shift, b])
    c = x.type.shape[1]
    tail = (as_expr(1),) * (x.type.ndim - 2)
    scale, shift = (ctx.reshape(t, (c, *tail)) for t in (scale, shift))
    return ctx.emit("add", [ctx.emit("multiply", [x, scale]), shift]), None, None


@handles("aten::native_group_norm")
def _group_norm(ctx: Context, node: Any) -> tuple[Any, ...]:
    x = ctx.tensor(node, 0, "input")
    w, b = ctx.arg(node, 1, "weight"), ctx.arg(node, 2, "bias")
    groups, eps = int(ctx.arg(node, 6, "group")), float(ctx.arg(node, 7, "eps"))
    n, c = x.type.shape[0], x.type.shape[1]
    if not isinstance(c, IntImm):
        raise UnsupportedNodeError("group_norm over symbolic channels")
    rest = x.type.shape[2:]
    g = ctx.reshape(x, (n, as_expr(groups), as_expr(c.value // groups), *rest))
    y = _normalize(ctx, g, tuple(range(2, g.type.ndim)), eps)
    y = ctx.reshape(y, x.type.shape)
    tail = (as_expr(1),) * (x.type.ndim - 2)
    if isinstance(w, TensorVar):
        y = ctx.emit("multiply", [y, ctx.reshape(w, (c, *tail))])
    if isinstance(b, TensorVar):
        y = ctx.emit("add", [y, ctx.reshape(b, (c, *tail))])
    return y, None, None


@handles("aten::_softmax", "aten::_log_softmax", "aten::softmax.int", "aten::log_softmax.int")
def _softmax(ctx: Context, node: Any) -> TensorVar:
    x = ctx.cast(ctx.tensor(node, 0), ctx.out_dtype(node))
    axis = int(ctx.arg(node, 1, "dim"))
    op = "log_softmax" if "log_softmax" in node.target.name() else "softmax"
    return ctx.emit(op, [x], {"axis": axis})
