"""Converters of non-Core ATen operators that survive torch's default decompositions: sorted
search (``searchsorted``, ``bucketize``), order statistics (``median``, ``kthvalue``) and
histograms (``histc``).

They are built from comparisons counted over a broadcast axis and from the rank-counting sort
of :mod:`._ops_more`, so each costs the product of the two extents it compares.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph import TensorVar
from ...ir import IntImm, as_expr
from ._context import Context, UnsupportedNodeError
from ._ops_dynamic import _bounds, _numel, _range_upper, _symbol
from ._ops_math import compute_dtype
from ._ops_more import _along_last, _moved_back, _ranked
from ._registry import handles


def _count_below(ctx: Context, seq: TensorVar, v: TensorVar, right: bool) -> TensorVar:
    """``sum(seq < v)`` (``seq <= v`` when ``right``) over ``seq``'s last axis, per value.

    ``seq`` is 1-d, or ``(*batch, m)`` with ``v`` of shape ``(*batch, k)``. Every value is
    compared with every element of the sequence: O(m * k), not a binary search.
    """
    scalar = v.type.ndim == 0
    if scalar:
        v = ctx.reshape(v, (as_expr(1),))
    if seq.type.ndim > 1:
        seq = ctx.reshape(seq, (*seq.type.shape[:-1], as_expr(1), seq.type.shape[-1]))
    vc = ctx.reshape(v, (*v.type.shape, as_expr(1)))
    below = ctx.emit("less_equal" if right else "less", [seq, vc])
    count = ctx.emit("sum", [ctx.cast(below, "int64")], {"axis": (-1,)})
    return ctx.reshape(count, ()) if scalar else count


@handles("aten::searchsorted.Tensor", "aten::searchsorted.Scalar")
def _searchsorted(ctx: Context, node: Any) -> TensorVar:
    """The insertion points of values into a sorted sequence, by counting (see
    :func:`_count_below`: O(m * k) comparisons)."""
    seq, v = ctx.tensor(node, 0, "sorted_sequence"), ctx.arg(node, 1, "self")
    dt = compute_dtype(ctx, node, seq, v)
    seq, v = ctx.cast(seq, dt), ctx.operand(v, dt)
    side = ctx.arg(node, 4, "side", None)
    right = bool(ctx.arg(node, 3, "right", False)) if side is None else side == "right"
    sorter = ctx.arg(node, 5, "sorter", None)
    if isinstance(sorter, TensorVar):
        seq = ctx.emit("gather", [seq, sorter], {"axis": seq.type.ndim - 1})
    if seq.type.ndim > 1 and seq.type.ndim != v.type.ndim:
        raise UnsupportedNodeError("searchsorted with unmatched leading dimensions")
    return ctx.cast(_count_below(ctx, seq, v, right), ctx.out_dtype(node))


@handles("aten::bucketize.Tensor", "aten::bucketize.Scalar")
def _bucketize(ctx: Context, node: Any) -> TensorVar:
    """The bucket of each value among 1-d boundaries: ``sum(boundaries < x)``
    (``<=`` when ``right``), O(n * m) comparisons rather than a binary search."""
    x, bounds = ctx.arg(node, 0, "self"), ctx.tensor(node, 1, "boundaries")
    dt = compute_dtype(ctx, node, x, bounds)
    x, bounds = ctx.operand(x, dt), ctx.cast(bounds, dt)
    right = bool(ctx.arg(node, 3, "right", False))
    return ctx.cast(_count_below(ctx, bounds, x, right), ctx.out_dtype(node))


def _order_stat(
    ctx: Context, x: TensorVar, k: int, axis: int, keepdim: bool
) -> tuple[TensorVar, TensorVar]:
    """The ``k``-th smallest value (0-based) along ``axis`` and its index, from the stable
    rank-counting sort (O(n^2) comparisons along the axis); a NaN makes the value NaN."""
    y, back = _along_last(ctx, x, axis)
    n = y.type.shape[-1]
    if not isinstance(n, IntImm):
        raise UnsupportedNodeError("an order statistic along a symbolic axis")
    if not 0 <= k < n.value:
        raise UnsupportedNodeError(f"order statistic {k + 1} of {n.value} elements")
    values, indices = _ranked(ctx, y, False)
    shape = (*values.type.shape[:-1], as_expr(1))
    attrs = {"axis": values.type.ndim - 1, "begin": k, "step": 1}
    values = ctx.emit_shaped("strided_slice", [values], attrs, shape)
    indices = ctx.emit_shaped("strided_slice", [indices], attrs, shape)
    if y.type.dtype.is_float:
        nan = ctx.emit("any", [ctx.emit("isnan", [y])], {"axis": (-1,), "keepdims": True})
        values = ctx.emit("where", [nan, ctx.scalar(float("nan"), str(y.type.dtype)), values])
    values, indices = _moved_back(ctx, values, back), _moved_back(ctx, indices, back)
    if not keepdim:
        out = tuple(s for d, s in enumerate(x.type.shape) if d != axis)
        values, indices = ctx.reshape(values, out), ctx.reshape(indices, out)
    return values, indices


def _extent(x: TensorVar, axis: int) -> int:
    n = x.type.shape[axis]
    if not isinstance(n, IntImm):
        raise UnsupportedNodeError("an order statistic along a symbolic axis")
    return n.value


@handles("aten::median")
def _median_all(ctx: Context, node: Any) -> TensorVar:
    """The lower median of all elements (torch's: element ``(n - 1) // 2`` in order)."""
    x = ctx.tensor(node, 0)
    n = 1
    for s in x.type.shape:
        if not isinstance(s, IntImm):
            raise UnsupportedNodeError("the median of a symbolic number of elements")
        n *= s.value
    flat = ctx.reshape(x, (as_expr(n),))
    return _order_stat(ctx, flat, (n - 1) // 2, 0, False)[0]


@handles("aten::median.dim")
def _median_dim(ctx: Context, node: Any) -> tuple[TensorVar, TensorVar]:
    x = ctx.tensor(node, 0)
    keepdim = bool(ctx.arg(node, 2, "keepdim", False))
    if x.type.ndim == 0:
        return x, ctx.scalar(0, "int64")
    axis = int(ctx.arg(node, 1, "dim")) % x.type.ndim
    return _order_stat(ctx, x, (_extent(x, axis) - 1) // 2, axis, keepdim)


@handles("aten::kthvalue")
def _kthvalue(ctx: Context, node: Any) -> tuple[TensorVar, TensorVar]:
    x = ctx.tensor(node, 0)
    k = ctx.arg(node, 1, "k")
    if not isinstance(k, int):
        raise UnsupportedNodeError("kthvalue with a symbolic k")
    keepdim = bool(ctx.arg(node, 3, "keepdim", False))
    if x.type.ndim == 0:
        return x, ctx.scalar(0, "int64")
    axis = int(ctx.arg(node, 2, "dim", -1)) % x.type.ndim
    return _order_stat(ctx, x, k - 1, axis, keepdim)


@handles("aten::histc")
def _histc(ctx: Context, node: Any) -> TensorVar:
    """Counts of the elements in ``bins`` equal bins over ``[min, max]`` (the data's range
    when both are equal; that widened by 1 each way when it is one value). Bin ``floor((x -
    min) * bins / (max - min))``, ``max`` itself in the last bin, elements outside (and NaN)
    ignored, as torch's. Each element is compared with each bin: O(n * bins)."""
    x = ctx.tensor(node, 0)
    dt = str(x.type.dtype)
    bins = int(ctx.arg(node, 1, "bins", 100))
    lo, hi = ctx.arg(node, 2, "min", 0), ctx.arg(node, 3, "max", 0)
    if not all(isinstance(v, (int, float)) for v in (lo, hi)):
        raise UnsupportedNodeError("histc with symbolic bounds")
    n = as_expr(1)
    for s in x.type.shape:
        n = n * s
    flat = ctx.reshape(x, (n,))
    if lo == hi:
        left = ctx.emit("min", [flat], {"axis": (0,)})
        right = ctx.emit("max", [flat], {"axis": (0,)})
        same = ctx.emit("equal", [left, right])
        one = ctx.scalar(1, dt)
        left = ctx.emit("where", [same, ctx.emit("subtract", [left, one]), left])
        right = ctx.emit("where", [same, ctx.emit("add", [right, one]), right])
    else:
        left, right = ctx.scalar(lo, dt), ctx.scalar(hi, dt)
    inside = ctx.emit(
        "logical_and",
        [ctx.emit("greater_equal", [flat, left]), ctx.emit("less_equal", [flat, right])],
    )
    scaled = ctx.emit("multiply", [ctx.emit("subtract", [flat, left]), ctx.scalar(bins, dt)])
    pos = ctx.emit("divide", [scaled, ctx.emit("subtract", [right, left])])
    pos = ctx.emit(
        "minimum", [ctx.cast(ctx.emit("floor", [pos]), "int64"), ctx.scalar(bins - 1, "int64")]
    )
    pos = ctx.emit("where", [inside, pos, ctx.scalar(-1, "int64")])
    slots = ctx.const(np.arange(bins, dtype=np.int64)[None, :], "bins")
    hit = ctx.emit("equal", [ctx.reshape(pos, (n, as_expr(1))), slots])
    return ctx.cast(ctx.emit("sum", [ctx.cast(hit, "int64")], {"axis": (0,)}), dt)


@handles("aten::mode")
def _mode(ctx: Context, node: Any) -> tuple[TensorVar, TensorVar]:
    """The most frequent value along ``dim`` (the smallest of those tied) and the index of its
    last occurrence, as torch's; each element is compared with every other (O(n^2))."""
    x = ctx.tensor(node, 0)
    keepdim = bool(ctx.arg(node, 2, "keepdim", False))
    if x.type.ndim == 0:
        return x, ctx.scalar(0, "int64")
    axis = int(ctx.arg(node, 1, "dim", -1)) % x.type.ndim
    y, back = _along_last(ctx, x, axis)
    n = _extent(y, -1)
    shape = y.type.shape
    xi = ctx.reshape(y, (*shape, as_expr(1)))
    xj = ctx.reshape(y, (*shape[:-1], as_expr(1), shape[-1]))
    count = ctx.emit("sum", [ctx.cast(ctx.emit("equal", [xi, xj]), "int64")], {"axis": (-1,)})
    best = ctx.emit("max", [count], {"axis": (-1,), "keepdims": True})
    top = ctx.emit("max", [y], {"axis": (-1,), "keepdims": True})
    tied = ctx.emit("where", [ctx.emit("equal", [count, best]), y, top])
    value = ctx.emit("min", [tied], {"axis": (-1,), "keepdims": True})
    index = ctx.const(np.arange(n, dtype=np.int64), "index")
    at = ctx.emit("where", [ctx.emit("equal", [y, value]), index, ctx.scalar(-1, "int64")])
    last = ctx.emit("max", [at], {"axis": (-1,), "keepdims": True})
    value, last = _moved_back(ctx, value, back), _moved_back(ctx, last, back)
    if not keepdim:
        out = tuple(s for d, s in enumerate(x.type.shape) if d != axis)
        value, last = ctx.reshape(value, out), ctx.reshape(last, out)
    return value, last


@handles("aten::bincount")
def _bincount(ctx: Context, node: Any) -> TensorVar:
    """Counts (or summed weights) of each value of a 1-d non-negative integer tensor.

    The length, ``max(max(x) + 1, minlength)``, depends on the values: it is computed, bound
    as a shape variable (``bind_symbol``, checked against torch's bounds), and the counts are
    a scatter-add into zeros of that length. ``x`` must have at least one element.
    """
    x = ctx.tensor(node, 0)
    weights = ctx.arg(node, 1, "weights", None)
    minlength = ctx.arg(node, 2, "minlength", 0)
    if x.type.ndim != 1 or not isinstance(minlength, int):
        raise UnsupportedNodeError("bincount of a non-1-d tensor or with a symbolic minlength")
    if isinstance(x.type.shape[0], IntImm) and x.type.shape[0].value == 0:
        raise UnsupportedNodeError("bincount of an empty tensor")
    xi = ctx.cast(x, "int64")
    length = ctx.meta(node).shape[0]
    if isinstance(length, int):
        n: Any = as_expr(length)
    else:
        top = ctx.emit("max", [xi], {"axis": (0,), "keepdims": True})
        size = ctx.emit("add", [top, ctx.scalar(1, "int64")])
        size = ctx.emit("maximum", [size, ctx.scalar(minlength, "int64")])
        n = _symbol(ctx, length, "bincount")
        lo, hi = _bounds(ctx, node, n.name, _range_upper(length))
        ctx.carriers[n.name] = ctx.bb.emit_bind_symbol(size, n, lo, hi)
    dt = ctx.out_dtype(node)
    zeros = ctx.emit_shaped("full", [], {"value": 0, "dtype": dt}, (n,))
    if isinstance(weights, TensorVar):
        src = ctx.cast(weights, dt)
    else:
        src = ctx.emit_shaped("full", [], {"value": 1, "dtype": dt}, x.type.shape)
    return ctx.emit("scatter", [zeros, xi, src], {"axis": 0, "reduction": "sum"})


@handles("aten::_unique2")
def _unique2(ctx: Context, node: Any) -> tuple[TensorVar, TensorVar, TensorVar]:
    """The distinct values of ``x`` in ascending order (torch sorts them on the CPU whatever
    ``sorted`` says), the position of each element among them, and their counts.

    An element is its value's representative when no earlier element equals it; its rank
    counts the representatives below it; the count of representatives is the length, bound
    as a shape variable; values and counts are scatters by rank. Every pair of elements is
    compared: O(n^2).
    """
    x = ctx.tensor(node, 0)
    vals = node.meta["val"]
    if x.type.ndim == 0:
        x = ctx.reshape(x, (as_expr(1),))
    shape, k = x.type.shape, x.type.ndim
    unit = (as_expr(1),) * k
    xi, xj = ctx.reshape(x, (*shape, *unit)), ctx.reshape(x, (*unit, *shape))
    twin = ctx.emit("logical_and", [ctx.emit("equal", [xi, xj]), _earlier(ctx, x)])
    j_axes = tuple(range(k, 2 * k))
    rep = ctx.emit("logical_not", [ctx.emit("any", [twin], {"axis": j_axes})])
    below = ctx.emit("logical_and", [ctx.emit("less", [xj, xi]), ctx.reshape(rep, (*unit, *shape))])
    rank = ctx.emit("sum", [ctx.cast(below, "int64")], {"axis": j_axes})
    size = ctx.emit("sum", [ctx.cast(rep, "int64")], {"axis": tuple(range(k))})
    size = ctx.reshape(size, (as_expr(1),))
    n = _numel(shape)
    flat, rank_flat = ctx.reshape(x, (n,)), ctx.reshape(rank, (n,))
    length = vals[0].shape[0]
    u = _symbol(ctx, length, "unique")
    lo, hi = _bounds(ctx, node, u.name, _range_upper(length))
    ctx.carriers[u.name] = ctx.bb.emit_bind_symbol(size, u, lo, hi)
    dt = str(x.type.dtype)
    zeros = ctx.emit_shaped("full", [], {"value": 0, "dtype": dt}, (u,))
    values = ctx.emit("scatter", [zeros, rank_flat, flat], {"axis": 0, "reduction": "none"})
    empty = ctx.emit_shaped("full", [], {"value": 0, "dtype": "int64"}, (as_expr(0),))
    inverse = empty
    if bool(ctx.arg(node, 2, "return_inverse", False)):
        inverse = ctx.reshape(rank, tuple(ctx.out_shape(node, vals[1])))
    counts = empty
    if bool(ctx.arg(node, 3, "return_counts", False)):
        ones = ctx.emit_shaped("full", [x], {"value": 1, "dtype": "int64"}, shape)
        zeros = ctx.emit_shaped("full", [], {"value": 0, "dtype": "int64"}, (u,))
        src = ctx.reshape(ones, (n,))
        counts = ctx.emit("scatter", [zeros, rank_flat, src], {"axis": 0, "reduction": "sum"})
    return values, inverse, counts


def _earlier(ctx: Context, x: TensorVar) -> TensorVar:
    """``[*i, *j]``: element ``j`` of ``x`` comes before element ``i`` in row-major order
    (compared axis by axis, so no flat index over a product of symbolic extents is built)."""
    shape, k = x.type.shape, x.type.ndim
    steps: list[tuple[TensorVar, TensorVar]] = []  # (j before i, j level with i) per axis
    for d in range(k):
        a = ctx.emit_shaped("arange", [x], {"start": 0, "step": 1, "dtype": "int64"}, (shape[d],))
        at_i = [as_expr(1)] * (2 * k)
        at_j = list(at_i)
        at_i[d], at_j[k + d] = shape[d], shape[d]
        ai, aj = ctx.reshape(a, tuple(at_i)), ctx.reshape(a, tuple(at_j))
        steps.append((ctx.emit("less", [aj, ai]), ctx.emit("equal", [aj, ai])))
    out, same = steps[0]
    for lt, eq in steps[1:]:
        out = ctx.emit("logical_or", [out, ctx.emit("logical_and", [same, lt])])
        same = ctx.emit("logical_and", [same, eq])
    return out
