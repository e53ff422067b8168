"""Converters of convolution, batch normalization and pooling (2-D, NCHW)."""

from __future__ import annotations

from collections.abc import Callable

from ...graph import TensorVar
from ._context import Context, Node, Value, dims_of
from ._ops_shape import reshape_to

Converter = Callable[[Context, Node], list[Value]]


def _window_attrs(ctx: Context, node: Node, x: TensorVar) -> tuple[list[int], list[int], list[int]]:
    """(strides, pads as top/left/bottom/right, dilations) of a 2-D window node."""
    if x.type.ndim != 4:
        raise ctx.error(f"only 2-D (NCHW) windows are supported, got {x.type.describe()}")
    auto_pad = node.attrs.get("auto_pad", "NOTSET")
    if auto_pad not in ("NOTSET", "VALID"):
        raise ctx.error(f"auto_pad={auto_pad!r} is unsupported; export with explicit pads")
    strides = node.attr_ints("strides") or [1, 1]
    pads = node.attr_ints("pads") or [0, 0, 0, 0]
    dilations = node.attr_ints("dilations") or [1, 1]
    if len(strides) != 2 or len(pads) != 4 or len(dilations) != 2:
        raise ctx.error("expected 2 strides, 4 pads and 2 dilations")
    return strides, pads, dilations


def _channel_vector(ctx: Context, v: TensorVar, ndim: int) -> TensorVar:
    """A (C,) tensor reshaped to (C, 1, ...) to broadcast over an NC... tensor."""
    return reshape_to(ctx, v, dims_of(v) + [1] * (ndim - 2))


def _conv(ctx: Context, node: Node) -> list[Value]:
    x, w = ctx.tensor(node.inputs[0]), ctx.tensor(node.inputs[1])
    strides, pads, dilations = _window_attrs(ctx, node, x)
    group = node.attr_int("group", 1)
    if group == 1 and pads[:2] == pads[2:]:
        attrs: dict[str, object] = {
            "strides": tuple(strides),
            "padding": tuple(pads[:2]),
            "dilation": tuple(dilations),
        }
        y = ctx.emit("conv2d", [x, w], attrs)
    else:
        attrs = {
            "strides": tuple(strides),
            "padding": tuple(pads),
            "dilation": tuple(dilations),
            "groups": group,
        }
        y = ctx.emit("grouped_conv2d", [x, w], attrs)
    if len(node.inputs) > 2 and node.inputs[2]:
        y = ctx.emit("add", [y, _channel_vector(ctx, ctx.tensor(node.inputs[2]), 4)])
    return [y]


def _batch_norm(ctx: Context, node: Node) -> list[Value]:
    """Inference form ``x * s + t``: ``s = scale / sqrt(var + eps)``, ``t = B - mean * s``.

    ``s`` and ``t`` read only weights, so a compile with bound weights computes them once.
    """
    if node.attr_int("training_mode", 0):
        raise ctx.error("training_mode=1 is unsupported (inference only)")
    x, scale, bias, mean, var = (ctx.tensor(n) for n in node.inputs[:5])
    eps = ctx.const(node.attr_float("epsilon", 1e-5), var)
    s = ctx.emit("multiply", [scale, ctx.emit("rsqrt", [ctx.emit("add", [var, eps])])])
    t = ctx.emit("subtract", [bias, ctx.emit("multiply", [mean, s])])
    nd = x.type.ndim
    y = ctx.emit("multiply", [x, _channel_vector(ctx, s, nd)])
    return [ctx.emit("add", [y, _channel_vector(ctx, t, nd)])]


def _pool(op: str) -> Converter:
    def convert(ctx: Context, node: Node) -> list[Value]:
        x = ctx.tensor(node.inputs[0])
        strides, pads, dilations = _window_attrs(ctx, node, x)
        kernel = node.attr_ints("kernel_shape") or []
        if len(kernel) != 2 or dilations != [1, 1] or node.attr_int("ceil_mode", 0):
            raise ctx.error("only 2-D kernels without dilation or ceil_mode are supported")
        if pads[:2] != pads[2:]:
            raise ctx.error(f"asymmetric pads {pads} are unsupported for pooling")
        padded = any(pads)
        if op == "avg_pool2d" and padded and not node.attr_int("count_include_pad", 0):
            raise ctx.error("padded average pooling needs count_include_pad=1")
        if len(node.outputs) > 1 and node.outputs[1]:
            raise ctx.error("the Indices output is unsupported")
        attrs = {"pool_size": tuple(kernel), "strides": tuple(strides), "padding": tuple(pads[:2])}
        return [ctx.emit(op, [x], attrs)]

    return convert


def _global_pool(op: str) -> Converter:
    def convert(ctx: Context, node: Node) -> list[Value]:
        x = ctx.tensor(node.inputs[0])
        axes = tuple(range(2, x.type.ndim))
        return [ctx.emit(op, [x], {"axis": axes, "keepdims": True})]

    return convert


CONVERTERS: dict[str, Converter] = {
    "Conv": _conv,
    "BatchNormalization": _batch_norm,
    "MaxPool": _pool("max_pool2d"),
    "AveragePool": _pool("avg_pool2d"),
    "GlobalAveragePool": _global_pool("mean"),
    "GlobalMaxPool": _global_pool("max"),
}
