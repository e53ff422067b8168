"""Converters of the less common Core ATen operators: running sums, edge padding, 1-d pools,
resampling, diagonals, scatters, batch statistics and pairwise distances."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph import TensorVar
from ...ir import IntImm, as_expr
from ._context import Context, UnsupportedNodeError
from ._ops_nn import _normalize
from ._registry import handles


@handles("aten::cumsum")
def _cumsum(ctx: Context, node: Any) -> TensorVar:
    x = ctx.cast(ctx.tensor(node, 0), ctx.out_dtype(node))
    if x.type.ndim == 0:
        return x
    return ctx.emit("cumsum", [x], {"axis": int(ctx.arg(node, 1, "dim")) % x.type.ndim})


@handles(
    "aten::reflection_pad1d", "aten::reflection_pad2d", "aten::reflection_pad3d",
    "aten::replication_pad1d", "aten::replication_pad2d", "aten::replication_pad3d",
)  # fmt: skip
def _pad_edge(ctx: Context, node: Any) -> TensorVar:
    x = ctx.tensor(node, 0)
    pads = [int(p) for p in ctx.arg(node, 1, "padding")]
    if min(pads, default=0) < 0:
        raise UnsupportedNodeError("negative edge padding")
    nd = x.type.ndim
    before, after = [0] * nd, [0] * nd
    for i in range(len(pads) // 2):
        before[nd - 1 - i], after[nd - 1 - i] = pads[2 * i], pads[2 * i + 1]
    mode = "reflect" if "reflection" in node.target.name() else "replicate"
    attrs = {"pad_before": tuple(before), "pad_after": tuple(after), "mode": mode}
    return ctx.emit("pad_edge", [x], attrs)


@handles("aten::upsample_nearest2d.vec", "aten::upsample_bilinear2d.vec")
def _upsample(ctx: Context, node: Any) -> TensorVar:
    x = ctx.tensor(node, 0)
    shape = ctx.out_shape(node)
    if not all(isinstance(s, IntImm) for s in shape[2:]):
        raise UnsupportedNodeError("upsampling to a symbolic size")
    nearest = "nearest" in node.target.name()
    scales = ctx.arg(node, 2 if nearest else 3, "scale_factors", None)
    align = False if nearest else bool(ctx.arg(node, 2, "align_corners", False))
    attrs = {
        "size": tuple(s.value for s in shape[2:]),  # type: ignore[attr-defined]
        "mode": "nearest" if nearest else "bilinear",
        "align_corners": align,
        "scales": tuple(float(s) for s in scales) if scales else None,
    }
    return ctx.emit("resize2d", [x], attrs)


@handles("aten::diagonal")
def _diagonal(ctx: Context, node: Any) -> TensorVar:
    x = ctx.tensor(node, 0)
    attrs = {
        "offset": int(ctx.arg(node, 1, "offset", 0)),
        "axis1": int(ctx.arg(node, 2, "dim1", 0)) % x.type.ndim,
        "axis2": int(ctx.arg(node, 3, "dim2", 1)) % x.type.ndim,
    }
    return ctx.emit("diagonal", [x], attrs)


@handles("aten::slice_scatter", "aten::select_scatter")
def _slice_scatter(ctx: Context, node: Any) -> TensorVar:
    x, src = ctx.tensor(node, 0), ctx.tensor(node, 1, "src")
    src = ctx.cast(src, str(x.type.dtype))
    axis = int(ctx.arg(node, 2, "dim", 0)) % x.type.ndim
    n = x.type.shape[axis]
    if not isinstance(n, IntImm):
        raise UnsupportedNodeError("a scatter along a symbolic axis")
    if node.target.name() == "aten::select_scatter":
        begin, step = int(ctx.arg(node, 3, "index")), 1
        shape = list(x.type.shape)
        shape[axis] = as_expr(1)
        src = ctx.reshape(src, tuple(shape))
    else:
        start = ctx.arg(node, 3, "start", None)
        begin, step = 0 if start is None else int(start), int(ctx.arg(node, 5, "step", 1))
    begin = begin + n.value if begin < 0 else begin
    attrs = {"axis": axis, "begin": begin, "step": step}
    return ctx.emit("slice_scatter", [x, src], attrs)


@handles("aten::scatter.src", "aten::scatter.value", "aten::scatter_add",
         "aten::scatter_reduce.two")  # fmt: skip
def _scatter(ctx: Context, node: Any) -> TensorVar:
    x = ctx.tensor(node, 0)
    axis = int(ctx.arg(node, 1, "dim")) % max(x.type.ndim, 1)
    index = ctx.tensor(node, 2, "index")
    name = node.target.name()
    how = {"aten::scatter_add": "sum", "aten::scatter_reduce.two": None}.get(name, "none")
    if how is None:
        reduce = ctx.arg(node, 4, "reduce")
        how = {"sum": "sum", "amax": "amax", "amin": "amin"}.get(reduce)
        if how is None or not ctx.arg(node, 5, "include_self", True):
            raise UnsupportedNodeError(f"scatter_reduce {reduce!r} (or include_self=False)")
    dt = str(x.type.dtype)
    if name == "aten::scatter.value":
        value = ctx.arg(node, 3, "value")
        src = ctx.emit_shaped("full", [], {"value": value, "dtype": dt}, index.type.shape)
    else:
        src = ctx.cast(ctx.tensor(node, 3, "src"), dt)
    return ctx.emit("scatter", [x, index, src], {"axis": axis, "reduction": how})


@handles("aten::_native_batch_norm_legit.no_stats", "aten::_native_batch_norm_legit")
def _batch_norm_batch_stats(ctx: Context, node: Any) -> tuple[Any, ...]:
    """Batch norm with the batch's own statistics (no running statistics to read)."""
    x = ctx.tensor(node, 0, "input")
    w, b = ctx.arg(node, 1, "weight"), ctx.arg(node, 2, "bias")
    no_stats = node.target.name().endswith("no_stats")
    if not no_stats and ctx.arg(node, 5, "training", False):
        raise UnsupportedNodeError("batch norm updating running statistics (training)")
    eps = float(ctx.arg(node, 5 if no_stats else 7, "eps", 1e-5))
    y = _normalize(ctx, x, (0, *range(2, x.type.ndim)), eps)
    tail = (as_expr(1),) * (x.type.ndim - 2)
    if isinstance(w, TensorVar):
        y = ctx.emit("multiply", [y, ctx.reshape(w, (w.type.shape[0], *tail))])
    if isinstance(b, TensorVar):
        y = ctx.emit("add", [y, ctx.reshape(b, (b.type.shape[0], *tail))])
    return y, None, None


def _p_norm(ctx: Context, d: TensorVar, p: float) -> TensorVar:
    """``||d||_p`` over the last axis."""
    dt = str(d.type.dtype)
    a = ctx.emit("abs", [d])
    if p == 2.0:
        return ctx.emit("sqrt", [ctx.emit("sum", [ctx.emit("multiply", [a, a])], {"axis": (-1,)})])
    if p == 1.0:
        return ctx.emit("sum", [a], {"axis": (-1,)})
    if p == float("inf"):
        return ctx.emit("max", [a], {"axis": (-1,)})
    if p <= 0:
        raise UnsupportedNodeError(f"a p-norm with p = {p}")
    s = ctx.emit("sum", [ctx.emit("power", [a, ctx.scalar(p, dt)])], {"axis": (-1,)})
    return ctx.emit("power", [s, ctx.scalar(1.0 / p, dt)])


@handles("aten::_cdist_forward")
def _cdist(ctx: Context, node: Any) -> TensorVar:
    x1, x2 = ctx.tensor(node, 0, "x1"), ctx.tensor(node, 1, "x2")
    p = float(ctx.arg(node, 2, "p", 2.0))
    a = ctx.reshape(x1, (*x1.type.shape[:-1], as_expr(1), x1.type.shape[-1]))
    b = ctx.reshape(x2, (*x2.type.shape[:-2], as_expr(1), *x2.type.shape[-2:]))
    return _p_norm(ctx, ctx.emit("subtract", [a, b]), p)


@handles("aten::_pdist_forward")
def _pdist(ctx: Context, node: Any) -> TensorVar:
    x = ctx.tensor(node, 0)
    n = x.type.shape[0]
    if not isinstance(n, IntImm):
        raise UnsupportedNodeError("pdist over a symbolic number of rows")
    i, j = np.triu_indices(n.value, k=1)
    rows_i = ctx.emit("take", [x, ctx.const(i.astype(np.int64), "rows")], {"axis": 0})
    rows_j = ctx.emit("take", [x, ctx.const(j.astype(np.int64), "rows")], {"axis": 0})
    return _p_norm(ctx, ctx.emit("subtract", [rows_i, rows_j]), float(ctx.arg(node, 1, "p", 2.0)))


def _ranked(ctx: Context, x: TensorVar, descending: bool) -> tuple[TensorVar, TensorVar]:
    """Values and int64 indices of ``x`` sorted along its last axis, by counting ranks.

    The rank of ``x[i]`` counts the elements ordered before it (ties by index, so the sort
    is stable); position ``p`` then takes the element whose rank is ``p``. Both steps compare
    every pair: this costs the square of the axis' extent.
    """
    shape = x.type.shape
    n = shape[-1]
    if not isinstance(n, IntImm):
        raise UnsupportedNodeError("sorting along a symbolic axis")
    xi = ctx.reshape(x, (*shape, as_expr(1)))
    xj = ctx.reshape(x, (*shape[:-1], as_expr(1), n))
    lower = np.arange(n.value)[None, :] < np.arange(n.value)[:, None]  # [i, j]: j < i
    ahead = ctx.emit("greater" if descending else "less", [xj, xi])
    tie = ctx.emit("logical_and", [ctx.emit("equal", [xj, xi]), ctx.const(lower, "earlier")])
    before = ctx.cast(ctx.emit("logical_or", [ahead, tie]), "int64")
    rank = ctx.emit("sum", [before], {"axis": (-1,), "keepdims": True})  # (..., n_i, 1)
    slots = ctx.const(np.arange(n.value, dtype=np.int64)[None, :], "slots")  # (1, n_p)
    at = ctx.emit("equal", [rank, slots])  # (..., n_i, n_p)
    index = ctx.const(np.arange(n.value, dtype=np.int64)[:, None], "index")
    values = ctx.emit("where", [at, xi, ctx.scalar(0, str(x.type.dtype))])
    indices = ctx.emit("where", [at, index, ctx.scalar(0, "int64")])
    values = ctx.emit("sum", [values], {"axis": (-2,)})
    return values, ctx.emit("sum", [indices], {"axis": (-2,)})


def _along_last(ctx: Context, x: TensorVar, axis: int) -> tuple[TensorVar, tuple[int, ...]]:
    """``x`` with ``axis`` moved last, and the permutation that moves it back."""
    nd = x.type.ndim
    if axis == nd - 1:
        return x, tuple(range(nd))
    perm = (*(d for d in range(nd) if d != axis), axis)
    back = tuple(perm.index(d) for d in range(nd))
    return ctx.emit("permute_dims", [x], {"axes": perm}), back


def _moved_back(ctx: Context, t: TensorVar, back: tuple[int, ...]) -> TensorVar:
    if back == tuple(range(len(back))):
        return t
    return ctx.emit("permute_dims", [t], {"axes": back})


@handles("aten::sort", "aten::sort.stable")
def _sort(ctx: Context, node: Any) -> tuple[TensorVar, TensorVar]:
    x = ctx.tensor(node, 0)
    stable = node.target.name() == "aten::sort.stable"
    dim = ctx.arg(node, 2 if stable else 1, "dim", -1)
    descending = bool(ctx.arg(node, 3 if stable else 2, "descending", False))
    if x.type.ndim == 0:
        return x, ctx.scalar(0, "int64")
    y, back = _along_last(ctx, x, int(dim) % x.type.ndim)
    values, indices = _ranked(ctx, y, descending)
    return _moved_back(ctx, values, back), _moved_back(ctx, indices, back)


@handles("aten::topk")
def _topk(ctx: Context, node: Any) -> tuple[TensorVar, TensorVar]:
    x = ctx.tensor(node, 0)
    k = int(ctx.arg(node, 1, "k"))
    axis = int(ctx.arg(node, 2, "dim", -1)) % max(x.type.ndim, 1)
    largest = bool(ctx.arg(node, 3, "largest", True))
    y, back = _along_last(ctx, x, axis)
    values, indices = _ranked(ctx, y, largest)
    shape = (*values.type.shape[:-1], as_expr(k))
    attrs = {"axis": values.type.ndim - 1, "begin": 0, "step": 1}
    values = ctx.emit_shaped("strided_slice", [values], attrs, shape)
    indices = ctx.emit_shaped("strided_slice", [indices], attrs, shape)
    return _moved_back(ctx, values, back), _moved_back(ctx, indices, back)
