"""Legalization of the operators of :mod:`tilecraft.graph.op_types_ext` to topi and te.

Trailing arguments that only bring shape variables into scope (``full``, ``arange``,
``broadcast_to``, ``strided_slice``) are not read: the result shape comes from the inferred
type, whose symbolic extents are the graph's own variables.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .. import te, topi
from ..ir import Attrs, Expr, Var, as_expr, collect_vars, const
from ..ir import op as irop
from ..topi.broadcast import broadcast_index
from ._shape_text import parse_extent
from .ir import TensorType
from .op import OPS, LegalizeFn, attr_axes, attr_int, attr_optional_float
from .op_types import reduce_axes
from .op_types_ext import (
    ARG_REDUCE,
    BINARY_BOOL,
    BINARY_SAME,
    REDUCE_BOOL,
    REDUCE_SAME,
    UNARY_ANY,
    UNARY_BOOL,
    UNARY_FLOAT,
)

Tensor = te.Tensor
Args = Sequence[Tensor]
Fn = Callable[[Expr], Expr]


def _num(v: Expr, value: float) -> Expr:
    return as_expr(value, v.dtype)


def _round_half_even(v: Expr) -> Expr:
    r = irop.floor(v + _num(v, 0.5))
    tie = (r - v).eq(_num(v, 0.5)) & irop.fmod(r, _num(v, 2.0)).ne(_num(v, 0.0))
    return irop.select(tie, r - _num(v, 1.0), r)


def _sign(v: Expr) -> Expr:
    zero = as_expr(0, v.dtype)
    one = as_expr(1, v.dtype)
    return irop.select(v > zero, one, irop.select(v < zero, zero - one, zero))


def _abs(v: Expr) -> Expr:
    return irop.fabs(v) if v.dtype.is_float else irop.select(v < as_expr(0, v.dtype), -v, v)


def _bitwise_not(v: Expr) -> Expr:
    return v.eq(as_expr(False, v.dtype)) if v.dtype.is_bool else as_expr(-1, v.dtype) - v


_UNARY: dict[str, Fn] = {
    "abs": _abs,
    "sign": _sign,
    "reciprocal": lambda v: as_expr(1, v.dtype) / v,
    "bitwise_not": _bitwise_not,
    "square": lambda v: v * v,
    "log": irop.log,
    "erf": irop.erf,
    "sin": irop.sin,
    "cos": irop.cos,
    "tan": irop.tan,
    "asin": irop.asin,
    "acos": irop.acos,
    "atan": irop.atan,
    "sinh": irop.sinh,
    "cosh": irop.cosh,
    "asinh": lambda v: irop.log(v + irop.sqrt(v * v + _num(v, 1.0))),
    "acosh": lambda v: irop.log(v + irop.sqrt(v * v - _num(v, 1.0))),
    "atanh": lambda v: _num(v, 0.5) * irop.log((_num(v, 1.0) + v) / (_num(v, 1.0) - v)),
    "floor": irop.floor,
    "ceil": irop.ceil,
    "round": _round_half_even,
    "trunc": irop.trunc,
    "exp2": irop.exp2,
    "expm1": irop.expm1,
    "log2": irop.log2,
    "log10": irop.log10,
    "log1p": irop.log1p,
    "isnan": irop.isnan,
    "isinf": irop.isinf,
    "isfinite": irop.isfinite,
    "logical_not": lambda v: v.eq(as_expr(0, v.dtype)),
}


_BINARY: dict[str, Callable[[Expr, Expr], Expr]] = {
    "power": irop.pow,
    "fmod": lambda a, b: irop.fmod(a, b) if a.dtype.is_float else a - (a / b) * b,
    "atan2": irop.atan2,
    "bitwise_and": lambda a, b: a & b,
    "bitwise_or": lambda a, b: a | b,
    "bitwise_xor": lambda a, b: (a | b) & ~(a & b) if not a.dtype.is_bool else a.ne(b),
    "logical_and": lambda a, b: _truth(a) & _truth(b),
    "logical_or": lambda a, b: _truth(a) | _truth(b),
    "logical_xor": lambda a, b: _truth(a).ne(_truth(b)),
}

_BINARY_TOPI: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
    "floor_mod": topi.floor_mod,
    "floor_divide": topi.floor_divide,
}


def _truth(v: Expr) -> Expr:
    return v if v.dtype.is_bool else v.ne(as_expr(0, v.dtype))


def _unary(op: str) -> LegalizeFn:
    def lower(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
        if op == "gelu_tanh":
            return topi.gelu(args[0], approximate="tanh")
        return topi.unary(args[0], _UNARY[op], f"T_{op}")

    return lower


def _binary(op: str) -> LegalizeFn:
    def lower(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
        if op in _BINARY_TOPI:
            return _BINARY_TOPI[op](args[0], args[1])
        return topi.elementwise([args[0], args[1]], _BINARY[op], f"T_{op}")

    return lower


def _clip(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    lo, hi = attr_optional_float("clip", attrs, "min"), attr_optional_float("clip", attrs, "max")

    def bound(b: float, v: Expr) -> Expr:  # an integer tensor clips at whole bounds
        return as_expr(b if v.dtype.is_float else int(b), v.dtype)

    def body(v: Expr) -> Expr:
        if lo is not None:
            v = irop.max(v, bound(lo, v))
        if hi is not None:
            v = irop.min(v, bound(hi, v))
        return v

    return topi.unary(args[0], body, "T_clip")


def _reduce(op: str) -> LegalizeFn:
    def lower(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
        x = args[0]
        axes = list(reduce_axes(op, attrs, x.ndim))
        keep = bool(attrs.get("keepdims", False))
        if op == "prod":
            return topi.prod(x, axis=axes, keepdims=keep)
        flags = topi.unary(x, lambda v: irop.cast(_truth(v), "int8"), f"T_{op}_flag")
        red = (
            topi.max(flags, axis=axes, keepdims=keep)
            if op == "any"
            else topi.min(flags, axis=axes, keepdims=keep)
        )
        return topi.unary(red, lambda v: v.ne(as_expr(0, v.dtype)), f"T_{op}")

    return lower


def _arg_reduce(op: str) -> LegalizeFn:
    fn = topi.argmax if op == "argmax" else topi.argmin

    def lower(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
        axis = attr_int(op, attrs, "axis", -1)
        idx = fn(args[0], axis=axis, keepdims=bool(attrs.get("keepdims", False)))
        return topi.cast(idx, "int64")

    return lower


def _log_softmax(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    return topi.log_softmax(args[0], axis=attr_int("log_softmax", attrs, "axis", -1))


def _gather(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    data, index = args
    axis = attr_int("gather", attrs, "axis", 0) % data.ndim

    def body(*idx: Expr) -> Expr:
        pos = irop.cast(index[idx], idx[axis].dtype)
        src = [*idx[:axis], pos, *idx[axis + 1 :]]
        return data[tuple(src)]

    return te.compute(out.shape, body, name="T_gather")  # type: ignore[no-any-return]


def _pad(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    before = list(attr_axes("pad", attrs, "pad_before") or ())
    after = list(attr_axes("pad", attrs, "pad_after") or ())
    value = attr_optional_float("pad", attrs, "value") or 0.0
    return topi.pad(args[0], before, after, value=value)


def _flip(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    x = args[0]
    axes = {a % x.ndim for a in attr_axes("flip", attrs, "axis") or ()}

    def body(*idx: Expr) -> Expr:
        src = [x.shape[d] - 1 - i if d in axes else i for d, i in enumerate(idx)]
        return x[tuple(src)]

    return te.compute(x.shape, body, name="T_flip")  # type: ignore[no-any-return]


def _broadcast_to(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    x = args[0]
    return te.compute(  # type: ignore[no-any-return]
        out.shape, lambda *idx: x[tuple(broadcast_index(x, out.shape, idx))], name="T_broadcast_to"
    )


def _names(args: Args) -> dict[str, Var]:
    names: dict[str, Var] = {}
    for t in args:
        for s in t.shape:
            for v in collect_vars(s):
                names.setdefault(v.name, v)
    return names


def _strided_slice(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    x = args[0]
    axis = attr_int("strided_slice", attrs, "axis", 0) % x.ndim
    step = attr_int("strided_slice", attrs, "step", 1)
    begin = attrs.get("begin", 0)
    start = parse_extent(begin, _names(args)) if isinstance(begin, str) else as_expr(int(begin))  # type: ignore[arg-type]

    def body(*idx: Expr) -> Expr:
        i = idx[axis]
        pos = irop.cast(start, i.dtype) + (i * step if step != 1 else i)
        src = [*idx[:axis], pos, *idx[axis + 1 :]]
        return x[tuple(src)]

    return te.compute(out.shape, body, name="T_strided_slice")  # type: ignore[no-any-return]


def _full(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    value = attrs.get("value")
    assert isinstance(value, (int, float))
    return te.compute(  # type: ignore[no-any-return]
        out.shape, lambda *idx: const(value, out.dtype), name="T_full"
    )


def _arange(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    start, step = attrs.get("start"), attrs.get("step")
    assert isinstance(start, (int, float))
    assert isinstance(step, (int, float))

    def body(i: Expr) -> Expr:
        k = irop.cast(i, out.dtype)
        return as_expr(start, out.dtype) + k * as_expr(step, out.dtype)

    return te.compute(out.shape, body, name="T_arange")  # type: ignore[no-any-return]


_TABLE: dict[str, LegalizeFn] = {
    **{name: _unary(name) for name in (*UNARY_ANY, *UNARY_FLOAT, *UNARY_BOOL)},
    **{name: _binary(name) for name in (*BINARY_SAME, *BINARY_BOOL)},
    **{name: _reduce(name) for name in (*REDUCE_SAME, *REDUCE_BOOL)},
    **{name: _arg_reduce(name) for name in ARG_REDUCE},
    "clip": _clip,
    "log_softmax": _log_softmax,
    "gather": _gather,
    "pad": _pad,
    "flip": _flip,
    "broadcast_to": _broadcast_to,
    "strided_slice": _strided_slice,
    "full": _full,
    "arange": _arange,
}

for _name, _fn in _TABLE.items():
    OPS[_name].legalize = _fn
