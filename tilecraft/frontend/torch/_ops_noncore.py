"""Converters of ATen operators outside Core ATen that survive torch.export's decompositions.

They are compositions of existing graph operators: full reductions (``x.max()``), vector
norms, ``var_mean``, rounding to decimals, ``hypot``, ``copysign`` and the running
reductions ``cumprod``, ``cummax``, ``cummin`` and ``logcumsumexp``. A running reduction over
an axis of ``n`` elements is an ordinary reduction over an (n, n) lower-triangular window, as
the ``cumsum`` operator is legalized: it costs ``n`` times the input's size. ``erfinv``,
``lgamma``, ``digamma`` and ``i0`` are the float64 compositions of :mod:`._special`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...graph import TensorVar
from ...ir import IntImm, as_expr
from . import _special
from ._context import Context, UnsupportedNodeError
from ._ops_math import dims
from ._registry import handles


@handles("aten::max", "aten::min")
def _full_max(ctx: Context, node: Any) -> TensorVar:
    """``x.max()`` / ``x.min()``: the reduction over every axis."""
    op = node.target.name().removeprefix("aten::").split(".")[0]
    return ctx.emit(op, [ctx.tensor(node, 0)], {"axis": None, "keepdims": False})


def _sum_abs_pow(ctx: Context, a: TensorVar, p: float, attrs: dict[str, Any]) -> TensorVar:
    dt = str(a.type.dtype)
    if p == 1.0:
        return ctx.emit("sum", [a], attrs)
    if p == 2.0:
        return ctx.emit("sqrt", [ctx.emit("sum", [ctx.emit("multiply", [a, a])], attrs)])
    powed = ctx.emit("power", [a, ctx.scalar(p, dt)])
    return ctx.emit("power", [ctx.emit("sum", [powed], attrs), ctx.scalar(1.0 / p, dt)])


@handles("aten::linalg_vector_norm")
def _vector_norm(ctx: Context, node: Any) -> TensorVar:
    """``linalg.vector_norm`` for any ``ord``: inf/-inf are max/min of ``|x|``, 0 counts the
    non-zeros, others are ``sum(|x|**ord) ** (1/ord)``."""
    x = ctx.tensor(node, 0)
    p = float(ctx.arg(node, 1, "ord", 2))
    axes = dims(ctx.arg(node, 2, "dim"), x.type.ndim)
    attrs = {"axis": axes, "keepdims": bool(ctx.arg(node, 3, "keepdim", False))}
    dt = ctx.out_dtype(node)
    a = ctx.emit("abs", [ctx.cast(x, dt)])
    if p == float("inf"):
        return ctx.emit("max", [a], attrs)
    if p == float("-inf"):
        return ctx.emit("min", [a], attrs)
    if p == 0.0:
        nonzero = ctx.cast(ctx.emit("not_equal", [a, ctx.scalar(0.0, dt)]), dt)
        return ctx.emit("sum", [nonzero], attrs)
    return _sum_abs_pow(ctx, a, p, attrs)


@handles("aten::var_mean.correction")
def _var_mean(ctx: Context, node: Any) -> tuple[TensorVar, TensorVar]:
    """``(var, mean)`` over ``dim`` with Bessel's ``correction`` (default 1)."""
    x = ctx.tensor(node, 0)
    axes = dims(ctx.arg(node, 1, "dim"), x.type.ndim)
    ax = tuple(range(x.type.ndim)) if axes is None else axes
    c = node.kwargs.get("correction", 1)
    correction = 1 if c is None else c
    keep = bool(node.kwargs.get("keepdim", False))
    mu = ctx.emit("mean", [x], {"axis": ax, "keepdims": True})
    d = ctx.emit("subtract", [x, mu])
    s = ctx.emit("sum", [ctx.emit("multiply", [d, d])], {"axis": ax, "keepdims": keep})
    var = ctx.emit("divide", [s, _dof(ctx, x, ax, float(correction), keep)])
    mean = mu if keep else ctx.emit("mean", [x], {"axis": ax, "keepdims": False})
    return var, mean


def _dof(
    ctx: Context, x: TensorVar, ax: tuple[int, ...], correction: float, keep: bool
) -> TensorVar:
    """``max(count - correction, 0)`` for the elements over axes ``ax`` of ``x``: a constant,
    or counted at run time (a sum of trues) where an extent is symbolic."""
    dt = str(x.type.dtype)
    extents = [x.type.shape[a] for a in ax]
    if all(isinstance(n, IntImm) for n in extents):
        n = math.prod(e.value for e in extents if isinstance(e, IntImm))
        return ctx.scalar(max(n - correction, 0.0), dt)
    true = ctx.emit("logical_or", [ctx.emit("equal", [x, x]), ctx.emit("not_equal", [x, x])])
    count = ctx.emit("sum", [ctx.cast(true, dt)], {"axis": ax, "keepdims": keep})
    dof = ctx.emit("subtract", [count, ctx.scalar(correction, dt)])
    return ctx.emit("maximum", [dof, ctx.scalar(0.0, dt)])


@handles("aten::round.decimals")
def _round_decimals(ctx: Context, node: Any) -> TensorVar:
    """Round half to even at ``10**-decimals``, scaling as torch does."""
    x = ctx.tensor(node, 0)
    d = int(ctx.arg(node, 1, "decimals", 0))
    dt = str(x.type.dtype)
    if d == 0:
        return ctx.emit("round", [x])
    scale = ctx.scalar(10.0 ** abs(d), dt)
    if d > 0:
        return ctx.emit("divide", [ctx.emit("round", [ctx.emit("multiply", [x, scale])]), scale])
    return ctx.emit("multiply", [ctx.emit("round", [ctx.emit("divide", [x, scale])]), scale])


@handles("aten::hypot")
def _hypot(ctx: Context, node: Any) -> TensorVar:
    """``sqrt(a*a + b*b)``, scaled by ``max(|a|, |b|)`` so that it neither overflows nor
    underflows in between."""
    dt = ctx.out_dtype(node)
    a = ctx.emit("abs", [ctx.operand(ctx.arg(node, 0, "self"), dt)])
    b = ctx.emit("abs", [ctx.operand(ctx.arg(node, 1, "other"), dt)])
    hi, lo = ctx.emit("maximum", [a, b]), ctx.emit("minimum", [a, b])
    zero = ctx.emit("equal", [hi, ctx.scalar(0.0, dt)])
    safe = ctx.emit("where", [zero, ctx.scalar(1.0, dt), hi])
    r = ctx.emit("divide", [lo, safe])
    one_r2 = ctx.emit("add", [ctx.scalar(1.0, dt), ctx.emit("multiply", [r, r])])
    out = ctx.emit("multiply", [hi, ctx.emit("sqrt", [one_r2])])
    inf = ctx.emit("isinf", [hi])
    return ctx.emit("where", [inf, hi, out])


@handles("aten::copysign.Tensor", "aten::copysign.Scalar")
def _copysign(ctx: Context, node: Any) -> TensorVar:
    """``|a|`` with the sign bit of ``b`` (``-0.0`` counts as negative)."""
    dt = ctx.out_dtype(node)
    a = ctx.emit("abs", [ctx.operand(ctx.arg(node, 0, "self"), dt)])
    b = ctx.operand(ctx.arg(node, 1, "other"), dt)
    zero = ctx.scalar(0.0, dt)
    neg_zero = ctx.emit(
        "logical_and",
        [
            ctx.emit("equal", [b, zero]),
            ctx.emit("less", [ctx.emit("divide", [ctx.scalar(1.0, dt), b]), zero]),
        ],
    )
    neg = ctx.emit("logical_or", [ctx.emit("less", [b, zero]), neg_zero])
    return ctx.emit("where", [neg, ctx.emit("negative", [a]), a])


# running reductions ----------------------------------------------------------------------
def _window(ctx: Context, x: TensorVar, axis: int) -> tuple[TensorVar, TensorVar, int]:
    """``x`` with a length-1 axis inserted after ``axis`` (element ``[.., i, k, ..]`` is
    ``x[.., k, ..]``) and the (n, n, 1, ..) mask ``k <= i``."""
    shape = x.type.shape
    n = shape[axis]
    if not isinstance(n, IntImm):
        raise UnsupportedNodeError("a running reduction over a symbolic extent")
    xk = ctx.reshape(x, (*shape[:axis], as_expr(1), *shape[axis:]))
    tri = np.tril(np.ones((n.value, n.value), dtype=bool))
    mask = tri.reshape(tri.shape + (1,) * (x.type.ndim - axis - 1))
    return xk, ctx.const(mask, "tril"), n.value


def _axis(ctx: Context, node: Any, x: TensorVar) -> int:
    return int(ctx.arg(node, 1, "dim")) % max(x.type.ndim, 1)


@handles("aten::cumprod")
def _cumprod(ctx: Context, node: Any) -> TensorVar:
    """Running product: the product of ``where(k <= i, x[k], 1)`` over ``k``."""
    x = ctx.cast(ctx.tensor(node, 0), ctx.out_dtype(node))
    if x.type.ndim == 0:
        return x
    axis = _axis(ctx, node, x)
    xk, tri, _ = _window(ctx, x, axis)
    one = ctx.scalar(1, str(x.type.dtype))
    masked = ctx.emit("where", [tri, xk, one])
    return ctx.emit("prod", [masked], {"axis": (axis + 1,), "keepdims": False})


def _running_extreme(ctx: Context, x: TensorVar, axis: int, op: str) -> TensorVar:
    xk, tri, _ = _window(ctx, x, axis)
    dt = str(x.type.dtype)
    fill = _lowest(dt) if op == "max" else _highest(dt)
    masked = ctx.emit("where", [tri, xk, ctx.scalar(fill, dt)])
    return ctx.emit(op, [masked], {"axis": (axis + 1,), "keepdims": False})


def _lowest(dt: str) -> Any:
    if dt == "bool":
        return False
    if dt.startswith(("int", "uint")):
        return int(np.iinfo(np.dtype(dt)).min)
    return float("-inf")


def _highest(dt: str) -> Any:
    if dt == "bool":
        return True
    if dt.startswith(("int", "uint")):
        return int(np.iinfo(np.dtype(dt)).max)
    return float("inf")


@handles("aten::cummax", "aten::cummin")
def _cummax(ctx: Context, node: Any) -> tuple[TensorVar, TensorVar]:
    """Running max/min and the index of its last occurrence so far (as torch gives)."""
    x = ctx.tensor(node, 0)
    op = "max" if node.target.name().startswith("aten::cummax") else "min"
    if x.type.ndim == 0:
        return x, ctx.scalar(0, "int64")
    axis = _axis(ctx, node, x)
    values = _running_extreme(ctx, x, axis, op)
    xk, tri, n = _window(ctx, x, axis)
    vi = ctx.reshape(values, (*values.type.shape[: axis + 1], as_expr(1),
                              *values.type.shape[axis + 1 :]))  # fmt: skip
    hit = ctx.emit("logical_and", [tri, ctx.emit("equal", [xk, vi])])
    ks = np.arange(n, dtype=np.int64).reshape((n,) + (1,) * (x.type.ndim - axis - 1))
    at = ctx.emit("where", [hit, ctx.const(ks, "k"), ctx.scalar(-1, "int64")])
    return values, ctx.emit("max", [at], {"axis": (axis + 1,), "keepdims": False})


@handles("aten::logcumsumexp")
def _logcumsumexp(ctx: Context, node: Any) -> TensorVar:
    """``log(sum(exp(x[k] - m[i]) for k <= i)) + m[i]`` with ``m`` the running max (taken
    as 0 where it is infinite, so that all -inf gives -inf)."""
    x = ctx.cast(ctx.tensor(node, 0), ctx.out_dtype(node))
    if x.type.ndim == 0:
        return x
    axis = _axis(ctx, node, x)
    dt = str(x.type.dtype)
    m = _running_extreme(ctx, x, axis, "max")
    m = ctx.emit("where", [ctx.emit("isinf", [m]), ctx.scalar(0.0, dt), m])
    xk, tri, _ = _window(ctx, x, axis)
    mi = ctx.reshape(m, (*m.type.shape[: axis + 1], as_expr(1),
                         *m.type.shape[axis + 1 :]))  # fmt: skip
    e = ctx.emit("exp", [ctx.emit("subtract", [xk, mi])])
    e = ctx.emit("where", [tri, e, ctx.scalar(0.0, dt)])
    s = ctx.emit("sum", [e], {"axis": (axis + 1,), "keepdims": False})
    return ctx.emit("add", [ctx.emit("log", [s]), m])


# special functions -------------------------------------------------------------------------
_SPECIAL = {
    "aten::erfinv": _special.erfinv,
    "aten::lgamma": _special.lgamma,
    "aten::digamma": _special.digamma,
    "aten::special_i0": _special.i0,
    "aten::i0": _special.i0,
}


@handles(*_SPECIAL)
def _special_fn(ctx: Context, node: Any) -> TensorVar:
    """The functions of :mod:`._special`, evaluated in float64 and rounded to the result."""
    x = ctx.cast(ctx.tensor(node, 0), "float64")
    return ctx.cast(_SPECIAL[node.target.name()](ctx, x), ctx.out_dtype(node))


_FLOAT_BITS = {"float32": (23, -126, 3.4028234663852886e38), "float16": (10, -14, 65504.0)}


@handles("aten::nextafter")
def _nextafter(ctx: Context, node: Any) -> TensorVar:
    """The next float32/float16 after ``x`` toward ``y``, by float64 arithmetic: the step is
    ``2**(floor(log2|x|) - mantissa bits)`` (halved below an exact power of two, fixed at the
    subnormal spacing below the smallest normal exponent)."""
    dt = ctx.out_dtype(node)
    if dt not in _FLOAT_BITS:
        raise UnsupportedNodeError(f"nextafter of {dt}")
    bits, emin, fmax = _FLOAT_BITS[dt]
    o = _special.Ops(ctx)
    x = ctx.operand(ctx.arg(node, 0, "self"), "float64")
    y = ctx.operand(ctx.arg(node, 1, "other"), "float64")
    a = o("abs", x)
    e = o("maximum", o("floor", o("log2", a)), float(emin))
    up = o("exp2", o("subtract", e, float(bits)))
    at_power = o("logical_and", o("equal", a, o("exp2", e)), o("greater", e, float(emin)))
    down = ctx.emit("where", [at_power, o("multiply", up, 0.5), up])
    direction = o("sign", o("subtract", y, x))
    away = o("greater", o("multiply", direction, x), 0.0)
    out = o("add", x, o("multiply", direction, ctx.emit("where", [away, up, down])))
    from_inf = o("logical_and", o("isinf", x), o("not_equal", x, y))
    out = ctx.emit("where", [from_inf, o("multiply", o("sign", x), fmax), out])
    return ctx.cast(ctx.emit("where", [o("equal", x, y), y, out]), dt)
