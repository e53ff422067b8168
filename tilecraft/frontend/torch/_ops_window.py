"""Converters of ATen pooling in any rank (with all of PyTorch's window options), col2im and
grid sampling, onto the graph's ``max_pool``, ``avg_pool``, ``adaptive_avg_pool``, ``col2im``
and ``grid_sample`` operators."""

from __future__ import annotations

from typing import Any

from ...graph import TensorVar
from ...ir import IntImm, as_expr
from ._context import Context, UnsupportedNodeError
from ._ops_nn import _ints
from ._registry import handles


def _window(ctx: Context, node: Any, r: int, dilation_at: int | None) -> dict[str, Any]:
    """The window attributes of a pooling node over ``r`` axes."""
    kernel = _ints(ctx.arg(node, 1, "kernel_size"), r)
    attrs: dict[str, Any] = {
        "pool_size": kernel,
        "strides": _ints(ctx.arg(node, 2, "stride", None) or kernel, r),
        "padding": _ints(ctx.arg(node, 3, "padding", 0), r),
    }
    if dilation_at is not None:
        attrs["dilation"] = _ints(ctx.arg(node, dilation_at, "dilation", 1), r)
    ceil_at = 5 if dilation_at is not None else 4
    attrs["ceil_mode"] = bool(ctx.arg(node, ceil_at, "ceil_mode", False))
    return attrs


def _rank(node: Any) -> int:
    name = node.target.name()
    return 3 if "3d" in name else 2 if "2d" in name else 1


@handles("aten::max_pool2d_with_indices", "aten::max_pool2d", "aten::max_pool3d_with_indices")
def _max_pool(ctx: Context, node: Any) -> Any:
    """Max pooling; 2-d pools without dilation or ceil_mode stay ``max_pool2d``."""
    x = ctx.tensor(node, 0)
    r = _rank(node)
    attrs = _window(ctx, node, r, 4)
    plain = r == 2 and x.type.ndim == 4 and attrs["dilation"] == (1, 1) and not attrs["ceil_mode"]
    if plain:
        keep = ("pool_size", "strides", "padding")
        out = ctx.emit("max_pool2d", [x], {k: attrs[k] for k in keep})
    else:
        out = ctx.emit("max_pool", [x], attrs)
    if not node.target.name().endswith("indices"):
        return out
    return out, ctx.emit("max_pool_index", [x], attrs)


@handles("aten::avg_pool2d", "aten::avg_pool3d", "aten::avg_pool1d")
def _avg_pool(ctx: Context, node: Any) -> TensorVar:
    """Average pooling; 2-d pools without ceil_mode or divisor_override stay ``avg_pool2d``."""
    x = ctx.tensor(node, 0)
    r = _rank(node)
    attrs = _window(ctx, node, r, None)
    attrs["count_include_pad"] = bool(ctx.arg(node, 5, "count_include_pad", True))
    override = ctx.arg(node, 6, "divisor_override") if r > 1 else None
    if override is not None:
        attrs["divisor_override"] = int(override)
    if r == 2 and x.type.ndim == 4 and override is None and not attrs["ceil_mode"]:
        del attrs["ceil_mode"]
        return ctx.emit("avg_pool2d", [x], attrs)
    return ctx.emit("avg_pool", [x], attrs)


@handles(
    "aten::_adaptive_avg_pool2d", "aten::adaptive_avg_pool2d", "aten::_adaptive_avg_pool3d",
    "aten::adaptive_avg_pool1d",
)  # fmt: skip
def _adaptive_avg_pool(ctx: Context, node: Any) -> TensorVar:
    """Adaptive average pooling: a mean for one output, windows of any size otherwise."""
    x = ctx.tensor(node, 0)
    r = _rank(node)
    out = _ints(ctx.arg(node, 1, "output_size"), r)
    if out == (1,) * r:
        axes = tuple(range(x.type.ndim - r, x.type.ndim))
        return ctx.emit("mean", [x], {"axis": axes, "keepdims": True})
    if not all(isinstance(s, IntImm) for s in x.type.shape[x.type.ndim - r :]):
        raise UnsupportedNodeError("adaptive pooling of symbolic extents")
    ns = [s.value for s in x.type.shape[x.type.ndim - r :]]  # type: ignore[attr-defined]
    if r == 2 and x.type.ndim == 4 and all(n % o == 0 for n, o in zip(ns, out, strict=True)):
        k = (ns[0] // out[0], ns[1] // out[1])  # equal windows: a plain pool
        return ctx.emit("avg_pool2d", [x], {"pool_size": k, "strides": k, "padding": (0, 0)})
    return ctx.emit("adaptive_avg_pool", [x], {"output_size": out})


@handles("aten::col2im")
def _col2im(ctx: Context, node: Any) -> TensorVar:
    cols = ctx.tensor(node, 0)
    keys = ("output_size", "kernel_size", "dilation", "padding", "stride")
    attrs = {k: _ints(ctx.arg(node, i + 1, k), 2) for i, k in enumerate(keys)}
    if cols.type.ndim == 2:  # unbatched (C * kh * kw, L)
        y = ctx.emit("col2im", [ctx.reshape(cols, (as_expr(1), *cols.type.shape))], attrs)
        return ctx.reshape(y, ctx.out_shape(node))
    return ctx.emit("col2im", [cols], attrs)


_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_PADDING = {0: "zeros", 1: "border", 2: "reflection"}


@handles("aten::grid_sampler_2d")
def _grid_sampler_2d(ctx: Context, node: Any) -> TensorVar:
    x, grid = ctx.tensor(node, 0, "input"), ctx.tensor(node, 1, "grid")
    attrs = {
        "mode": _MODES[int(ctx.arg(node, 2, "interpolation_mode"))],
        "padding_mode": _PADDING[int(ctx.arg(node, 3, "padding_mode"))],
        "align_corners": bool(ctx.arg(node, 4, "align_corners")),
    }
    if not all(isinstance(s, IntImm) for s in x.type.shape[2:]):
        raise UnsupportedNodeError("grid sampling of an image of symbolic size")
    return ctx.emit("grid_sample", [x, ctx.cast(grid, str(x.type.dtype))], attrs)
