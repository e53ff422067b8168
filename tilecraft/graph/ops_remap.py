"""Operators that read their input at remapped or accumulated positions, for imported models.

Type inference and legalization of: ``cumsum`` (running sum along ``axis``), ``pad_edge``
(``mode`` ``"reflect"`` or ``"replicate"`` padding), ``resize2d`` (nearest or bilinear
resampling of the last two axes), ``diagonal``, ``slice_scatter`` (``src`` written into
``x[begin::step]`` along ``axis``) and ``scatter`` (``src[i]`` into ``x`` at ``index[i]``
along ``axis``; ``reduction`` ``"none"``, ``"sum"``, ``"amax"`` or ``"amin"``).

``cumsum`` and ``scatter`` are written as reductions over the whole axis (a position keeps
the terms whose index qualifies), so they stay plain compute definitions the rules
schedule; they cost the square of the axis' extent.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import te
from ..ir import Attrs, Expr, IntImm, as_expr, const
from ..ir import op as irop
from .ir import TensorType
from .op import OPS, GraphError, attr_axes, attr_int, dims_equal, norm_axis, register_op
from .op_types_ext import _pad as pad_type

Types = Sequence[TensorType]
Tensor = te.Tensor
Args = Sequence[Tensor]


# type inference ------------------------------------------------------------------------------
def _same(op: str, ts: Types, attrs: Attrs) -> TensorType:
    norm_axis(op, attr_int(op, attrs, "axis", 0), ts[0].ndim)
    return ts[0]


def _pad_edge(op: str, ts: Types, attrs: Attrs) -> TensorType:
    if attrs.get("mode") not in ("reflect", "replicate"):
        raise GraphError(f"{op}: mode must be 'reflect' or 'replicate', got {attrs.get('mode')!r}")
    return pad_type(op, ts, attrs)


def _resize2d(op: str, ts: Types, attrs: Attrs) -> TensorType:
    x = ts[0]
    size = attr_axes(op, attrs, "size") or ()
    if x.ndim != 4 or len(size) != 2 or attrs.get("mode") not in ("nearest", "bilinear"):
        raise GraphError(f"{op}: needs an NCHW tensor, size=(h, w), mode nearest or bilinear")
    return TensorType((*x.shape[:2], as_expr(size[0]), as_expr(size[1])), x.dtype)


def diagonal_extent(op: str, shape: Sequence[Expr], offset: int, a1: int, a2: int) -> int:
    """The length of the diagonal of axes ``a1``, ``a2`` shifted by ``offset``."""
    n1, n2 = shape[a1], shape[a2]
    if not (isinstance(n1, IntImm) and isinstance(n2, IntImm)) or a1 == a2:
        raise GraphError(f"{op}: needs two distinct axes of static extent")
    return max(0, min(n1.value + min(offset, 0), n2.value - max(offset, 0)))


def _diagonal(op: str, ts: Types, attrs: Attrs) -> TensorType:
    x = ts[0]
    a1 = norm_axis(op, attr_int(op, attrs, "axis1", 0), x.ndim)
    a2 = norm_axis(op, attr_int(op, attrs, "axis2", 1), x.ndim)
    n = diagonal_extent(op, x.shape, attr_int(op, attrs, "offset", 0), a1, a2)
    rest = [s for d, s in enumerate(x.shape) if d not in (a1, a2)]
    return TensorType((*rest, as_expr(n)), x.dtype)


def _slice_scatter(op: str, ts: Types, attrs: Attrs) -> TensorType:
    x, src = ts
    axis = norm_axis(op, attr_int(op, attrs, "axis", 0), x.ndim)
    if src.ndim != x.ndim or src.dtype != x.dtype or attr_int(op, attrs, "step", 1) < 1:
        raise GraphError(f"{op}: src {src.describe()} does not fit {x.describe()}")
    for d, (a, b) in enumerate(zip(x.shape, src.shape, strict=True)):
        if d != axis and not dims_equal(a, b):
            raise GraphError(f"{op}: src {src.describe()} differs from {x.describe()} off axis")
    return x


def _scatter(op: str, ts: Types, attrs: Attrs) -> TensorType:
    x, index, src = ts
    norm_axis(op, attr_int(op, attrs, "axis", 0), x.ndim)
    if attrs.get("reduction", "none") not in ("none", "sum", "amax", "amin"):
        raise GraphError(f"{op}: reduction must be none, sum, amax or amin")
    if not index.dtype.is_integer or index.ndim != x.ndim or src.ndim != x.ndim:
        raise GraphError(f"{op}: index and src need the rank of {x.describe()}")
    return x


# legalization --------------------------------------------------------------------------------
def _cumsum(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    x = args[0]
    axis = attr_int("cumsum", attrs, "axis", 0) % x.ndim
    k = te.reduce_axis((0, x.shape[axis]), name="k")

    def body(*idx: Expr) -> Expr:
        src = [*idx[:axis], k, *idx[axis + 1 :]]
        zero = const(0, x.dtype)
        total: Expr = te.sum(irop.select(k <= idx[axis], x[tuple(src)], zero), axis=k)
        return total

    return te.compute(out.shape, body, name="T_cumsum")  # type: ignore[no-any-return]


def _edge_index(i: Expr, before: int, n: Expr, mode: str) -> Expr:
    j = i - before
    if mode == "replicate":
        return irop.min(irop.max(j, as_expr(0, j.dtype)), n - 1)
    j = irop.abs(j)  # reflect about 0, then about n - 1
    return (n - 1) - irop.abs((n - 1) - j)


def _pad_edge_lower(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    x = args[0]
    before = list(attr_axes("pad_edge", attrs, "pad_before") or ())
    after = list(attr_axes("pad_edge", attrs, "pad_after") or ())
    mode = str(attrs.get("mode"))

    def body(*idx: Expr) -> Expr:
        src = [
            _edge_index(i, b, irop.cast(x.shape[d], i.dtype), mode) if b or a else i
            for d, (i, b, a) in enumerate(zip(idx, before, after, strict=True))
        ]
        return x[tuple(src)]

    return te.compute(out.shape, body, name="T_pad_edge")  # type: ignore[no-any-return]


def _source(i: Expr, n_in: int, n_out: int, attrs: Attrs, k: int) -> Expr:
    """The (float32) source coordinate of output index ``i`` along one resized axis."""
    scales = attrs.get("scales")
    given = scales[k] if isinstance(scales, tuple) else None
    f = irop.cast(i, "float32")
    if attrs.get("align_corners"):
        return f * const((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0, "float32")
    scale = 1.0 / given if isinstance(given, (int, float)) and given else n_in / n_out
    if attrs.get("mode") == "nearest":
        return f * const(scale, "float32")
    src = (f + const(0.5, "float32")) * const(scale, "float32") - const(0.5, "float32")
    return irop.max(src, const(0.0, "float32"))


def _resize2d_lower(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    x = args[0]
    h, w = x.shape[2], x.shape[3]
    if not (isinstance(h, IntImm) and isinstance(w, IntImm)):
        raise GraphError("resize2d: needs a static input height and width")
    oh, ow = (int(s) for s in attr_axes("resize2d", attrs, "size") or ())
    ins = (h.value, w.value)

    def lo_hi(i: Expr, k: int) -> tuple[Expr, Expr, Expr]:
        s = _source(i, ins[k], (oh, ow)[k], attrs, k)
        lo = irop.min(irop.cast(irop.floor(s), i.dtype), as_expr(ins[k] - 1, i.dtype))
        hi = irop.min(lo + 1, as_expr(ins[k] - 1, i.dtype))
        return lo, hi, s - irop.cast(lo, "float32")

    def body(n: Expr, c: Expr, i: Expr, j: Expr) -> Expr:
        (y0, y1, fy), (x0, x1, fx) = lo_hi(i, 0), lo_hi(j, 1)
        if attrs.get("mode") == "nearest":
            return x[n, c, y0, x0]

        def at(y: Expr, xx: Expr) -> Expr:
            return irop.cast(x[n, c, y, xx], "float32")

        one = const(1.0, "float32")
        top = at(y0, x0) * (one - fx) + at(y0, x1) * fx
        bottom = at(y1, x0) * (one - fx) + at(y1, x1) * fx
        return irop.cast(top * (one - fy) + bottom * fy, x.dtype)

    return te.compute(out.shape, body, name="T_resize2d")  # type: ignore[no-any-return]


def _diagonal_lower(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    x = args[0]
    a1 = attr_int("diagonal", attrs, "axis1", 0) % x.ndim
    a2 = attr_int("diagonal", attrs, "axis2", 1) % x.ndim
    off = attr_int("diagonal", attrs, "offset", 0)

    def body(*idx: Expr) -> Expr:
        rest = list(idx[:-1])
        src: list[Expr] = []
        for d in range(x.ndim):
            if d == a1:
                src.append(idx[-1] + max(-off, 0))
            elif d == a2:
                src.append(idx[-1] + max(off, 0))
            else:
                src.append(rest.pop(0))
        return x[tuple(src)]

    return te.compute(out.shape, body, name="T_diagonal")  # type: ignore[no-any-return]


def _slice_scatter_lower(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    x, src = args
    axis = attr_int("slice_scatter", attrs, "axis", 0) % x.ndim
    begin = attr_int("slice_scatter", attrs, "begin", 0)
    step = attr_int("slice_scatter", attrs, "step", 1)

    def body(*idx: Expr) -> Expr:
        i = idx[axis]
        rel = i - begin
        pos = rel // step if step != 1 else rel
        inside = (rel >= 0) & (rel < src.shape[axis] * step)
        if step != 1:
            inside = inside & (rel % step).eq(0)
        safe = irop.min(irop.max(pos, as_expr(0, i.dtype)), src.shape[axis] - 1)
        at = (*idx[:axis], safe, *idx[axis + 1 :])
        return irop.select(inside, src[at], x[idx])

    return te.compute(out.shape, body, name="T_slice_scatter")  # type: ignore[no-any-return]


def _scatter_lower(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    x, index, src = args
    axis = attr_int("scatter", attrs, "axis", 0) % x.ndim
    how = str(attrs.get("reduction", "none"))
    k = te.reduce_axis((0, index.shape[axis]), name="k")

    def hit(idx: Sequence[Expr]) -> tuple[Expr, tuple[Expr, ...]]:
        at = (*idx[:axis], k, *idx[axis + 1 :])
        cond = irop.cast(index[at], idx[axis].dtype).eq(idx[axis])
        for d in range(x.ndim):
            if d != axis:
                cond = cond & (idx[d] < index.shape[d])
        return cond, at

    def found(*idx: Expr) -> Expr:
        cond, at = hit(idx)
        red: Expr
        if how == "none":  # the last writer wins (torch leaves duplicates unspecified)
            red = te.max(irop.select(cond, k, as_expr(-1, k.dtype)), axis=k)
        elif how == "sum":
            red = te.sum(irop.select(cond, src[at], const(0, x.dtype)), axis=k)
        else:
            pick = te.max if how == "amax" else te.min
            far = te.min_value(x.dtype) if how == "amax" else te.max_value(x.dtype)
            red = pick(irop.select(cond, src[at], far), axis=k)
        return red

    red = te.compute(out.shape, found, name="T_scatter_hits")
    if how == "sum":
        return te.compute(out.shape, lambda *i: x[i] + red[i], name="T_scatter")  # type: ignore[no-any-return]
    if how in ("amax", "amin"):
        best = irop.max if how == "amax" else irop.min
        return te.compute(out.shape, lambda *i: best(x[i], red[i]), name="T_scatter")  # type: ignore[no-any-return]

    def write(*idx: Expr) -> Expr:
        last = red[idx]
        safe = irop.max(last, as_expr(0, last.dtype))
        at = (*idx[:axis], safe, *idx[axis + 1 :])
        return irop.select(last >= 0, src[at], x[idx])

    return te.compute(out.shape, write, name="T_scatter")  # type: ignore[no-any-return]


def _register() -> None:
    table = {
        "cumsum": ((1, 1), _same, _cumsum),
        "pad_edge": ((1, 1), _pad_edge, _pad_edge_lower),
        "resize2d": ((1, 1), _resize2d, _resize2d_lower),
        "diagonal": ((1, 1), _diagonal, _diagonal_lower),
        "slice_scatter": ((2, 2), _slice_scatter, _slice_scatter_lower),
        "scatter": ((3, 3), _scatter, _scatter_lower),
    }
    for name, (arity, infer, lower) in table.items():
        register_op(name, arity, infer)
        OPS[name].legalize = lower


_register()
