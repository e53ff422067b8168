"""Converters of ATen writes at data-given positions and bagged lookups: ``index_put``,
``masked_scatter`` and ``_embedding_bag``.

Positions that depend on the data are expressed as masks over all candidates (a bag's
offsets, a mask's running count), so each is a plain tensor program; their costs are noted
per converter.
"""

from __future__ import annotations

from functools import reduce
from typing import Any

import numpy as np

from ...graph import TensorVar
from ...graph.op import broadcast_shapes
from ...ir import Expr, IntImm, as_expr
from ._context import Context, UnsupportedNodeError
from ._ops_tensor import _broadcast
from ._registry import handles


@handles("aten::index_put")
def _index_put(ctx: Context, node: Any) -> TensorVar:
    """``x[indices] = values`` (``+=`` with ``accumulate``), torch's advanced indexing.

    Index tensors broadcast together to ``I``; when the indexed axes are adjacent the values
    take their place among ``x``'s axes, otherwise they come first (torch's rule). Where
    several positions name one element without ``accumulate``, the last one (row-major over
    ``I``) wins; torch leaves that case unspecified. Cost: ``numel(x) * numel(I)``.
    """
    x = ctx.tensor(node, 0)
    dt = str(x.type.dtype)
    indices = list(ctx.arg(node, 1, "indices"))
    values = ctx.cast(ctx.tensor(node, 2, "values"), dt)
    accumulate = bool(ctx.arg(node, 3, "accumulate", False))
    used = [(d, t) for d, t in enumerate(indices) if t is not None]
    if not all(isinstance(t, TensorVar) for _, t in used) or not used:
        raise UnsupportedNodeError("index_put without index tensors")
    if any(t.type.dtype.is_bool for _, t in used):
        return _masked_put(ctx, x, used, values, accumulate)
    axes = [d for d, _ in used]
    ishape: tuple[Expr, ...] = used[0][1].type.shape
    for _, t in used[1:]:
        ishape = broadcast_shapes("index_put", ishape, t.type.shape)
    idx = [_broadcast(ctx, t, ishape) for _, t in used]
    shape = x.type.shape
    rest = [shape[d] for d in range(x.type.ndim) if d not in axes]
    a0, m = axes[0], len(axes)
    adjacent = axes == list(range(a0, a0 + m))
    if adjacent:  # values laid out as x's axes with the indexed ones replaced by I
        vshape = (*shape[:a0], *ishape, *shape[a0 + m :])
        values = _broadcast(ctx, values, vshape)
        if a0:
            k = len(ishape)
            perm = (*range(a0, a0 + k), *range(a0), *range(a0 + k, len(vshape)))
            values = ctx.emit("permute_dims", [values], {"axes": perm})
    else:
        values = _broadcast(ctx, values, (*ishape, *rest))
    attrs = {"axes": tuple(axes), "accumulate": accumulate}
    return ctx.emit("index_put", [x, values, *idx], attrs)


def _masked_put(
    ctx: Context, x: TensorVar, used: list[tuple[int, Any]], values: TensorVar, accumulate: bool
) -> TensorVar:
    """``x[mask] = v`` for a one-element ``v``: a select, no positions needed."""
    if len(used) != 1 or values.type.static_shape() is None:
        raise UnsupportedNodeError("index_put with a boolean mask and other index tensors")
    d, mask = used[0]
    if reduce(lambda a, b: a * b, values.type.static_shape() or (1,), 1) != 1:
        raise UnsupportedNodeError(
            "index_put of several values at a boolean mask (data-dependent positions)"
        )
    tail = (as_expr(1),) * (x.type.ndim - d - mask.type.ndim)
    mask = ctx.reshape(mask, (*(as_expr(1),) * d, *mask.type.shape, *tail))
    v = ctx.reshape(values, ())
    if accumulate:
        add = ctx.emit("where", [mask, v, ctx.scalar(0, str(x.type.dtype))])
        return ctx.emit("add", [x, add])
    return ctx.emit("where", [mask, _broadcast(ctx, v, x.type.shape), x])


def _numel(shape: tuple[Expr, ...]) -> Expr:
    out: Expr = as_expr(1)
    for s in shape:
        out = s if isinstance(out, IntImm) and out.value == 1 else out * s
    return out


@handles("aten::masked_scatter")
def _masked_scatter(ctx: Context, node: Any) -> TensorVar:
    """``source``'s elements, in order, into ``x`` where the (broadcast) mask is true.

    The position read for a true element is the running count of true elements up to it, a
    ``cumsum`` over the flattened mask: this costs the square of ``x``'s size.
    """
    x = ctx.tensor(node, 0)
    shape, dt = x.type.shape, str(x.type.dtype)
    mask = _broadcast(ctx, ctx.tensor(node, 1, "mask"), shape)
    src = ctx.cast(ctx.tensor(node, 2, "source"), dt)
    n = _numel(shape)
    flat_mask = ctx.reshape(mask, (n,))
    count = ctx.emit("cumsum", [ctx.cast(flat_mask, "int64")], {"axis": 0})
    at = ctx.emit("clip", [ctx.emit("subtract", [count, ctx.scalar(1, "int64")])], {"min": 0})
    picked = ctx.emit("take", [ctx.reshape(src, (_numel(src.type.shape),)), at], {"axis": 0})
    out = ctx.emit("where", [flat_mask, picked, ctx.reshape(x, (n,))])
    return ctx.reshape(out, shape)


@handles("aten::_embedding_bag", "aten::_embedding_bag_forward_only")
def _embedding_bag(ctx: Context, node: Any) -> tuple[Any, ...]:
    """Bags of embedding rows reduced by sum (optionally weighted), mean or max.

    Bag ``b`` holds the indices in ``[offsets[b], offsets[b + 1])`` (the last bag runs to the
    end unless ``include_last_offset``); ``padding_idx`` entries are left out. The bags are a
    (bags x indices) mask, so sum and mean are one matmul and max a masked reduction: the cost
    is ``bags * indices * dim``. Empty bags give zeros, as in torch. Only the first result
    (the bags) is converted; the bookkeeping results are torch's training aids.
    """
    weight, ids = ctx.tensor(node, 0, "weight"), ctx.tensor(node, 1, "indices")
    mode = int(ctx.arg(node, 4, "mode", 0))
    psw = ctx.arg(node, 6, "per_sample_weights")
    last = bool(ctx.arg(node, 7, "include_last_offset", False))
    pad = int(ctx.arg(node, 8, "padding_idx", -1))
    inside = _bag_mask(ctx, ids, ctx.tensor(node, 2, "offsets"), last, pad)  # (B, N)
    dt = str(weight.type.dtype)
    rows = ctx.emit("take", [weight, ids], {"axis": 0})  # (N, D)
    count = ctx.emit("sum", [ctx.cast(inside, dt)], {"axis": (1,), "keepdims": True})
    if mode == 2:
        if isinstance(psw, TensorVar):
            raise UnsupportedNodeError("embedding_bag max with per_sample_weights")
        b, n = inside.type.shape
        cube = ctx.reshape(inside, (b, n, as_expr(1)))
        low = ctx.scalar(float("-inf"), dt)
        best = ctx.emit("max", [ctx.emit("where", [cube, rows, low])], {"axis": (1,)})
        some = ctx.emit("greater", [count, ctx.scalar(0, dt)])
        return ctx.emit("where", [some, best, ctx.scalar(0, dt)]), None, None, None
    one = ctx.cast(psw, dt) if isinstance(psw, TensorVar) else ctx.scalar(1, dt)
    weights = ctx.emit("where", [inside, one, ctx.scalar(0, dt)])
    out = ctx.emit("matmul", [weights, rows])
    if mode == 1:
        out = ctx.emit("divide", [out, ctx.emit("maximum", [count, ctx.scalar(1, dt)])])
    return out, None, None, None


def _bag_mask(ctx: Context, ids: TensorVar, offsets: TensorVar, last: bool, pad: int) -> TensorVar:
    """bool (bags, indices): index ``j`` belongs to bag ``b``, the last bag starting at or
    before ``j`` (so empty bags hold nothing), and ``j`` lies before the final offset when
    ``last`` (``include_last_offset``)."""
    o = offsets.type.shape[0]
    if not isinstance(o, IntImm):
        raise UnsupportedNodeError("embedding_bag with a symbolic number of bags")
    bags = o.value - 1 if last else o.value
    offs = ctx.cast(offsets, "int64")
    cut = {"axis": 0, "step": 1, "begin": 0}
    starts = ctx.emit_shaped("strided_slice", [offs], cut, (as_expr(bags),))
    n = ids.type.shape[0]
    j = ctx.emit_shaped("arange", [ids], {"start": 0, "step": 1, "dtype": "int64"}, (n,))
    began = ctx.emit("less_equal", [ctx.reshape(starts, (as_expr(bags), as_expr(1))), j])
    bag = ctx.emit("sum", [ctx.cast(began, "int64")], {"axis": (0,)})  # bags begun, (N,)
    rows = ctx.const(np.arange(1, bags + 1, dtype=np.int64)[:, None], "bag")
    inside = ctx.emit("equal", [bag, rows])
    if last:
        final = ctx.emit_shaped("strided_slice", [offs], {**cut, "begin": bags}, (as_expr(1),))
        inside = ctx.emit("logical_and", [inside, ctx.emit("less", [j, final])])
    if pad >= 0:
        real = ctx.emit("not_equal", [ids, ctx.scalar(pad, str(ids.type.dtype))])
        inside = ctx.emit("logical_and", [inside, real])
    return inside
