"""Converters of ATen view, layout, creation and indexing operators."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph import TensorVar
from ...ir import Expr, IntImm, as_expr
from ._context import Context, UnsupportedNodeError
from ._numbers import is_symbolic_number
from ._ops_dynamic import boolean_index
from ._registry import handles


@handles(
    "aten::view", "aten::_unsafe_view", "aten::reshape", "aten::squeeze.dim",
    "aten::squeeze.dims", "aten::squeeze", "aten::unsqueeze", "aten::flatten.using_ints",
)  # fmt: skip
def _view(ctx: Context, node: Any) -> TensorVar:
    return ctx.reshape(ctx.tensor(node, 0), ctx.out_shape(node))


@handles("aten::clone", "aten::alias", "aten::lift_fresh_copy", "aten::contiguous")
def _identity(ctx: Context, node: Any) -> TensorVar:
    return ctx.tensor(node, 0)


@handles("aten::_to_copy")
def _to_copy(ctx: Context, node: Any) -> TensorVar:
    return ctx.cast(ctx.tensor(node, 0), ctx.out_dtype(node))


@handles("aten::copy")
def _copy(ctx: Context, node: Any) -> TensorVar:
    src = ctx.cast(ctx.tensor(node, 1, "src"), ctx.out_dtype(node))
    return _broadcast(ctx, src, ctx.out_shape(node))


def _broadcast(ctx: Context, x: TensorVar, shape: tuple[Expr, ...]) -> TensorVar:
    if x.type.ndim == len(shape) and all(
        a is b or (isinstance(a, IntImm) and isinstance(b, IntImm) and a.value == b.value)
        for a, b in zip(x.type.shape, shape, strict=True)
    ):
        return x
    return ctx.emit_shaped("broadcast_to", [x], {}, shape)


@handles("aten::expand")
def _expand(ctx: Context, node: Any) -> TensorVar:
    return _broadcast(ctx, ctx.tensor(node, 0), ctx.out_shape(node))


@handles("aten::permute")
def _permute(ctx: Context, node: Any) -> TensorVar:
    x = ctx.tensor(node, 0)
    perm = tuple(int(d) % x.type.ndim for d in ctx.arg(node, 1, "dims"))
    if perm == tuple(range(x.type.ndim)):
        return x
    return ctx.emit("permute_dims", [x], {"axes": perm})


@handles("aten::t", "aten::transpose.int")
def _transpose(ctx: Context, node: Any) -> TensorVar:
    x = ctx.tensor(node, 0)
    n = x.type.ndim
    if n < 2:
        return x
    a, b = (0, 1) if len(node.args) < 2 else (int(node.args[1]) % n, int(node.args[2]) % n)
    perm = list(range(n))
    perm[a], perm[b] = perm[b], perm[a]
    return ctx.emit("permute_dims", [x], {"axes": tuple(perm)})


@handles("aten::cat")
def _cat(ctx: Context, node: Any) -> TensorVar:
    parts = [p for p in ctx.arg(node, 0, "tensors") if isinstance(p, TensorVar)]
    dt = ctx.out_dtype(node)
    parts = [ctx.cast(p, dt) for p in parts if not _is_empty_1d(p)]
    axis = int(ctx.arg(node, 1, "dim", 0)) % max(parts[0].type.ndim, 1)
    return parts[0] if len(parts) == 1 else ctx.emit("concat", parts, {"axis": axis})


def _is_empty_1d(t: TensorVar) -> bool:
    s = t.type.static_shape()
    return s == (0,)


@handles("aten::slice.Tensor")
def _slice(ctx: Context, node: Any) -> TensorVar:
    x = ctx.tensor(node, 0)
    axis = int(ctx.arg(node, 1, "dim", 0)) % x.type.ndim
    start = ctx.arg(node, 2, "start", None)
    step = int(ctx.arg(node, 4, "step", 1))
    shape = ctx.out_shape(node)
    begin = _start(ctx, start, x.type.shape[axis])
    if (
        isinstance(begin, int)
        and begin == 0
        and step == 1
        and _same(shape[axis], x.type.shape[axis])
    ):
        return x
    return _strided(ctx, x, axis, begin, step, shape)


def _same(a: Expr, b: Expr) -> bool:
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return a.value == b.value
    return a is b


def _start(ctx: Context, start: Any, extent: Expr) -> int | Expr:
    """The clamped start index of a slice (torch clamps; negative counts from the end)."""
    if start is None:
        return 0
    if isinstance(start, int):
        if isinstance(extent, IntImm):
            n = extent.value
            return min(max(start + n if start < 0 else start, 0), n)
        if start >= 0:
            return start
        return extent + start
    return ctx.expr(start)


def _strided(
    ctx: Context, x: TensorVar, axis: int, begin: int | Expr, step: int, shape: tuple[Expr, ...]
) -> TensorVar:
    b: int | str = begin if isinstance(begin, int) else ctx.shape_attr([begin])[0]
    attrs = {"axis": axis, "begin": b, "step": step}
    uses = () if isinstance(begin, int) else (begin,)
    return ctx.emit_shaped("strided_slice", [x], attrs, shape, uses)


@handles("aten::select.int")
def _select(ctx: Context, node: Any) -> TensorVar:
    x = ctx.tensor(node, 0)
    axis = int(ctx.arg(node, 1, "dim")) % x.type.ndim
    index = ctx.arg(node, 2, "index")
    begin = _start(ctx, index, x.type.shape[axis])
    shape = list(x.type.shape)
    shape[axis] = as_expr(1)
    one = _strided(ctx, x, axis, begin, 1, tuple(shape))
    return ctx.reshape(one, ctx.out_shape(node))


@handles("aten::split_with_sizes", "aten::split.Tensor")
def _split(ctx: Context, node: Any) -> tuple[TensorVar, ...]:
    x = ctx.tensor(node, 0)
    axis = int(ctx.arg(node, 2, "dim", 0)) % x.type.ndim
    outs: list[TensorVar] = []
    begin: Any = 0
    for val in node.meta["val"]:
        shape = ctx.out_shape(node, val)
        outs.append(_strided(ctx, x, axis, begin, 1, shape))
        begin = (
            begin + shape[axis]
            if not isinstance(shape[axis], IntImm)
            else (begin + shape[axis].value)  # type: ignore[attr-defined]
        )
    return tuple(outs)


@handles("aten::full", "aten::scalar_tensor", "aten::empty.memory_format", "aten::zeros",
         "aten::ones", "aten::empty_strided", "aten::new_zeros", "aten::new_ones",
         "aten::new_empty", "aten::new_full")  # fmt: skip
def _full(ctx: Context, node: Any) -> TensorVar:
    name = node.target.name()
    if name == "aten::scalar_tensor":
        value = ctx.arg(node, 0, "s")
    elif name in ("aten::full", "aten::new_full"):
        value = ctx.arg(node, 1 if name == "aten::full" else 2, "fill_value")
    else:
        value = 1 if "ones" in name else 0
    return _fill(ctx, node, value)


def _fill(ctx: Context, node: Any, value: Any) -> TensorVar:
    if isinstance(value, (TensorVar, Expr)):
        raise UnsupportedNodeError("a fill value that is not a constant")
    shape, dt = ctx.out_shape(node), ctx.out_dtype(node)
    if is_symbolic_number(value):  # full(..., v.item()): the 0-d value broadcast
        return ctx.emit_shaped("broadcast_to", [ctx.operand(value, dt)], {}, shape)
    if all(isinstance(s, IntImm) for s in shape):
        data = np.full(tuple(s.value for s in shape), value, dtype=np.dtype(dt))  # type: ignore[attr-defined]
        return ctx.const(data, "full")
    return ctx.emit_shaped("full", [], {"value": value, "dtype": dt}, shape)


@handles("aten::full_like", "aten::zeros_like", "aten::ones_like", "aten::empty_like",
         "aten::fill.Scalar")  # fmt: skip
def _full_like(ctx: Context, node: Any) -> TensorVar:
    name = node.target.name()
    if name in ("aten::full_like", "aten::fill.Scalar"):
        value = ctx.arg(node, 1, "fill_value" if name == "aten::full_like" else "value")
    else:
        value = 1 if "ones" in name else 0
    return _fill(ctx, node, value)


@handles("aten::arange.start_step", "aten::arange.start", "aten::arange")
def _arange(ctx: Context, node: Any) -> TensorVar:
    args = [ctx.value(a) for a in node.args]
    start, step = (0, 1) if len(args) == 1 else (args[0], args[2] if len(args) > 2 else 1)
    if any(isinstance(v, Expr) for v in (start, step)):
        raise UnsupportedNodeError("arange with a symbolic start or step")
    return ctx.emit_shaped(
        "arange",
        [],
        {"start": start, "step": step, "dtype": ctx.out_dtype(node)},
        ctx.out_shape(node),
    )


@handles("aten::embedding")
def _embedding(ctx: Context, node: Any) -> TensorVar:
    weight, ids = ctx.tensor(node, 0, "weight"), ctx.tensor(node, 1, "indices")
    return ctx.emit("take", [weight, ids], {"axis": 0})


@handles("aten::index_select")
def _index_select(ctx: Context, node: Any) -> TensorVar:
    x, idx = ctx.tensor(node, 0), ctx.tensor(node, 2, "index")
    axis = int(ctx.arg(node, 1, "dim")) % x.type.ndim
    return ctx.emit("take", [x, idx], {"axis": axis})


@handles("aten::index.Tensor")
def _index(ctx: Context, node: Any) -> TensorVar:
    x = ctx.tensor(node, 0)
    indices = ctx.arg(node, 1, "indices")
    used = [(d, t) for d, t in enumerate(indices) if t is not None]
    if len(used) != 1 or not isinstance(used[0][1], TensorVar):
        raise UnsupportedNodeError("index with more than one index tensor")
    d, t = used[0]
    if t.type.dtype.is_bool:  # a data-dependent count of rows
        return boolean_index(ctx, node, x, d, t)
    return ctx.emit("take", [x, t], {"axis": d})


@handles("aten::gather")
def _gather(ctx: Context, node: Any) -> TensorVar:
    x, idx = ctx.tensor(node, 0), ctx.tensor(node, 2, "index")
    return ctx.emit("gather", [x, idx], {"axis": int(ctx.arg(node, 1, "dim")) % x.type.ndim})


@handles("aten::flip")
def _flip(ctx: Context, node: Any) -> TensorVar:
    x = ctx.tensor(node, 0)
    return ctx.emit("flip", [x], {"axis": tuple(int(d) for d in ctx.arg(node, 1, "dims"))})


@handles("aten::repeat")
def _repeat(ctx: Context, node: Any) -> TensorVar:
    x = ctx.tensor(node, 0)
    reps = [ctx.expr(r) for r in ctx.arg(node, 1, "repeats")]
    shape = (as_expr(1),) * (len(reps) - x.type.ndim) + tuple(x.type.shape)
    inter: list[Expr] = []
    wide: list[Expr] = []
    for r, s in zip(reps, shape, strict=True):
        inter += [as_expr(1), s]
        wide += [r, s]
    y = ctx.reshape(x, tuple(inter))
    y = _broadcast(ctx, y, tuple(wide))
    return ctx.reshape(y, ctx.out_shape(node))


@handles("aten::constant_pad_nd")
def _pad(ctx: Context, node: Any) -> TensorVar:
    x = ctx.tensor(node, 0)
    pads = [int(p) for p in ctx.arg(node, 1, "pad")]
    value = ctx.arg(node, 2, "value", 0)
    before, after = [0] * x.type.ndim, [0] * x.type.ndim
    for i in range(len(pads) // 2):
        before[x.type.ndim - 1 - i], after[x.type.ndim - 1 - i] = pads[2 * i], pads[2 * i + 1]
    if min(pads, default=0) < 0:
        x = _crop(ctx, x, before, after)
        before, after = [max(b, 0) for b in before], [max(a, 0) for a in after]
    if not any(before) and not any(after):
        return x
    attrs = {"pad_before": tuple(before), "pad_after": tuple(after), "value": float(value)}
    return ctx.emit("pad", [x], attrs)


def _crop(ctx: Context, x: TensorVar, before: list[int], after: list[int]) -> TensorVar:
    """``x`` without the elements negative padding removes (torch's cropping pads)."""
    for d, (b, a) in enumerate(zip(before, after, strict=True)):
        if min(b, a) >= 0:
            continue
        shape = list(x.type.shape)
        n = shape[d]
        if not isinstance(n, IntImm):
            raise UnsupportedNodeError("cropping (negative padding) of a symbolic axis")
        shape[d] = as_expr(n.value + min(b, 0) + min(a, 0))
        x = _strided(ctx, x, d, -min(b, 0), 1, tuple(shape))
    return x
