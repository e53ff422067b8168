"""Converters of convolution, batch normalization and pooling (1-D and 2-D, channels first).

A 1-D window (``N, C, L``) runs as the 2-D graph operator over a unit height: the input and
the weight are reshaped to ``N, C, 1, L`` and ``O, C / group, 1, K`` and the result back.
Window geometry is resolved here: ``auto_pad`` (``SAME_UPPER``, ``SAME_LOWER``, ``VALID``),
per-side pads, and pooling's ``ceil_mode`` (the last partial window as extra bottom/right
padding, dropped when it would start in the padding, as ONNX says).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...graph import TensorVar
from ._context import Context, Dim, Node, Value, dims_of
from ._ops_shape import reshape_to

Converter = Callable[[Context, Node], list[Value]]


@dataclass
class Window:
    """A 2-D window: kernel, strides, dilations and pads (top, left, bottom, right)."""

    kernel: list[int]
    strides: list[int]
    dilations: list[int]
    pads: list[int]

    def attrs(self) -> dict[str, object]:
        """Graph attributes of the window (``padding`` as four values)."""
        return {"strides": tuple(self.strides), "padding": tuple(self.pads)}


def _spatial(ctx: Context, node: Node, key: str, n: int, default: int) -> list[int]:
    v = node.attr_ints(key)
    if v is None:
        return [default] * n
    if len(v) != n:
        raise ctx.error(f"attribute {key!r} needs {n} values, got {v}")
    return v


def _same_pads(ctx: Context, n: Dim, k: int, s: int, d: int, upper: bool) -> tuple[int, int]:
    """(before, after) padding that keeps ``ceil(n / s)`` outputs."""
    span = d * (k - 1) + 1
    if s == 1:
        total = span - 1
    elif isinstance(n, int):
        total = max(0, (-(-n // s) - 1) * s + span - n)
    else:
        raise ctx.error(f"auto_pad over the symbolic extent {n} needs stride 1")
    small = total // 2
    return (small, total - small) if upper else (total - small, small)


def _ceil_extra(ctx: Context, n: Dim, k: int, s: int, before: int, after: int) -> int:
    """Extra trailing padding that turns the floor output size into ONNX's ceil_mode one."""
    if s == 1:
        return 0
    if not isinstance(n, int):
        raise ctx.error(f"ceil_mode over the symbolic extent {n} needs stride 1")
    span = n + before + after - k
    out = -(-span // s) + 1
    if (out - 1) * s >= n + before:  # the last window would start in the padding
        out -= 1
    return max(0, (out - 1) * s + k - (n + before + after))


def window(ctx: Context, node: Node, spatial: list[Dim], kernel: list[int]) -> Window:
    """The window of a Conv or pooling node over ``spatial`` extents (1 or 2 of them)."""
    nd = len(spatial)
    strides = _spatial(ctx, node, "strides", nd, 1)
    dilations = _spatial(ctx, node, "dilations", nd, 1)
    pads = node.attr_ints("pads") or [0] * (2 * nd)
    if len(pads) != 2 * nd or min(pads) < 0:
        raise ctx.error(f"attribute 'pads' needs {2 * nd} non-negative values, got {pads}")
    auto_pad = node.attrs.get("auto_pad", "NOTSET")
    before, after = pads[:nd], pads[nd:]
    if auto_pad == "VALID":
        before, after = [0] * nd, [0] * nd
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        sides = [
            _same_pads(ctx, n, k, s, d, auto_pad == "SAME_UPPER")
            for n, k, s, d in zip(spatial, kernel, strides, dilations, strict=True)
        ]
        before, after = [p[0] for p in sides], [p[1] for p in sides]
    elif auto_pad != "NOTSET":
        raise ctx.error(f"unknown auto_pad={auto_pad!r}")
    if nd == 1:
        return Window([1, *kernel], [1, *strides], [1, *dilations], [0, before[0], 0, after[0]])
    return Window(kernel, strides, dilations, [before[0], before[1], after[0], after[1]])


def _lift(ctx: Context, x: TensorVar) -> tuple[TensorVar, list[Dim]]:
    """A 3-D ``N, C, L`` tensor as ``N, C, 1, L``; its spatial extents."""
    dims = dims_of(x)
    if len(dims) == 3:
        return reshape_to(ctx, x, [dims[0], dims[1], 1, dims[2]]), dims[2:]
    if len(dims) != 4:
        raise ctx.error(f"only 1-D and 2-D windows are supported, got {x.type.describe()}")
    return x, dims[2:]


def _drop(ctx: Context, y: TensorVar, was_1d: bool) -> TensorVar:
    """The result of a lifted 1-D window back to ``N, C, L``."""
    if not was_1d:
        return y
    d = dims_of(y)
    return reshape_to(ctx, y, [d[0], d[1], d[3]])


def _channel_vector(ctx: Context, v: TensorVar, ndim: int) -> TensorVar:
    """A (C,) tensor reshaped to (C, 1, ...) to broadcast over an NC... tensor."""
    return reshape_to(ctx, v, dims_of(v) + [1] * (ndim - 2))


def _conv(ctx: Context, node: Node) -> list[Value]:
    x0, w0 = ctx.tensor(node.inputs[0]), ctx.tensor(node.inputs[1])
    x, spatial = _lift(ctx, x0)
    wd = dims_of(w0)
    if len(wd) != x0.type.ndim:
        raise ctx.error(f"weight {w0.type.describe()} does not match data {x0.type.describe()}")
    w = reshape_to(ctx, w0, [wd[0], wd[1], 1, wd[2]]) if len(wd) == 3 else w0
    kernel = [k for k in wd[2:] if isinstance(k, int)]
    if len(kernel) != len(wd) - 2:
        raise ctx.error(f"the kernel size of {w0.type.describe()} must be static")
    win = window(ctx, node, spatial, kernel)
    attrs = {**win.attrs(), "dilation": tuple(win.dilations), "groups": node.attr_int("group", 1)}
    y = ctx.emit("conv2d", [x, w], attrs)
    if len(node.inputs) > 2 and node.inputs[2]:
        y = ctx.emit("add", [y, _channel_vector(ctx, ctx.tensor(node.inputs[2]), 4)])
    return [_drop(ctx, y, x0.type.ndim == 3)]


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
        x0 = ctx.tensor(node.inputs[0])
        x, spatial = _lift(ctx, x0)
        kernel = node.attr_ints("kernel_shape") or []
        if len(kernel) != len(spatial):
            raise ctx.error(f"kernel_shape {kernel} does not match {x0.type.describe()}")
        if len(node.outputs) > 1 and node.outputs[1]:
            raise ctx.error("the Indices output is unsupported")
        win = window(ctx, node, spatial, kernel)
        if win.dilations != [1, 1]:
            raise ctx.error("pooling with dilations is unsupported")
        declared = list(win.pads)
        if node.attr_int("ceil_mode", 0):
            for i, n in enumerate(dims_of(x)[2:]):
                p = win.pads
                p[2 + i] += _ceil_extra(ctx, n, win.kernel[i], win.strides[i], p[i], p[2 + i])
        attrs = {"pool_size": tuple(win.kernel), **win.attrs()}
        if op == "avg_pool2d":
            y = _avg_pool(ctx, node, x, declared, attrs)
            return [_drop(ctx, y, x0.type.ndim == 3)]
        return [_drop(ctx, ctx.emit(op, [x], attrs), x0.type.ndim == 3)]

    return convert


def _avg_pool(
    ctx: Context, node: Node, x: TensorVar, declared: list[int], attrs: dict[str, object]
) -> TensorVar:
    """AveragePool: with count_include_pad=1 the declared pads count as zeros and the
    ceil_mode extension does not (the declared pads are applied first, explicitly)."""
    pads = list(attrs["padding"])  # type: ignore[call-overload]
    include = bool(node.attr_int("count_include_pad", 0))
    if not include or declared == pads:
        return ctx.emit("avg_pool2d", [x], {**attrs, "count_include_pad": include})
    if not any(declared):  # only the ceil_mode extension: it is not counted
        return ctx.emit("avg_pool2d", [x], {**attrs, "count_include_pad": False})
    before, after = [0, 0, declared[0], declared[1]], [0, 0, declared[2], declared[3]]
    padded = ctx.emit("pad", [x], {"pad_before": tuple(before), "pad_after": tuple(after)})
    extra = [0, 0, pads[2] - declared[2], pads[3] - declared[3]]
    return ctx.emit(
        "avg_pool2d", [padded], {**attrs, "padding": tuple(extra), "count_include_pad": False}
    )


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
