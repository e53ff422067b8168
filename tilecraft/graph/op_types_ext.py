"""Type inference of the operators added for imported models (PyTorch, ONNX).

Elementwise math beyond the activations, logic (bool results; the comparisons and ``where`` are
in :mod:`tilecraft.graph.op_types`), ``clip``, more reductions, ``log_softmax``, ``gather``,
``pad``, ``flip``, and the operators whose result shape is given rather than derived:
``broadcast_to``, ``strided_slice``, ``full`` and ``arange``. Those take their result shape in
the ``shape`` attribute (ints, or text over shape variables, see
:mod:`tilecraft.graph._shape_text`); extra trailing tensor arguments may be passed only to bring
the shape variables that text names into scope.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ir import Attrs, Expr, IntImm, Var, as_expr
from ..ir import dtype as to_dtype
from ._shape_text import parse_extent
from .ir import TensorType, collect_vars_of_shape
from .op import (
    GraphError,
    attr_axes,
    attr_int,
    dims_equal,
    float_dtype,
    norm_axis,
    register_op,
)
from .op_types import _binary as binary_type  # the same rules as the core binary ops
from .op_types import _compare as compare_type
from .op_types import reduce_axes

Types = Sequence[TensorType]

# unary operators by what they accept and give: same dtype (any / float only) or bool
UNARY_ANY = ("abs", "sign", "reciprocal", "bitwise_not", "square")
UNARY_FLOAT = (
    "log", "erf", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh",
    "acosh", "atanh", "floor", "ceil", "round", "trunc", "exp2", "expm1", "log2", "log10",
    "log1p", "gelu_tanh",
)  # fmt: skip
UNARY_BOOL = ("isnan", "isinf", "isfinite", "logical_not")
BINARY_SAME = (
    "power", "floor_mod", "fmod", "atan2", "floor_divide", "bitwise_and", "bitwise_or",
    "bitwise_xor",
)  # fmt: skip
BINARY_BOOL = ("logical_and", "logical_or", "logical_xor")  # comparisons: op_types.COMPARE
REDUCE_SAME = ("prod",)
REDUCE_BOOL = ("any", "all")
ARG_REDUCE = ("argmax", "argmin")


def _unary_any(op: str, ts: Types, attrs: Attrs) -> TensorType:
    return ts[0]


def _unary_float(op: str, ts: Types, attrs: Attrs) -> TensorType:
    float_dtype(op, ts[0])
    return ts[0]


def _unary_bool(op: str, ts: Types, attrs: Attrs) -> TensorType:
    return TensorType(ts[0].shape, to_dtype("bool"))


def _clip(op: str, ts: Types, attrs: Attrs) -> TensorType:
    for key in ("min", "max"):
        v = attrs.get(key)
        if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool)):
            raise GraphError(f"{op}: attribute {key!r} must be a number or None, got {v!r}")
    return ts[0]


def _reduce_kept(op: str, ts: Types, attrs: Attrs, dt: str | None) -> TensorType:
    t = ts[0]
    axes = reduce_axes(op, attrs, t.ndim)
    keep = bool(attrs.get("keepdims", False))
    shape = [as_expr(1) if d in axes else s for d, s in enumerate(t.shape) if keep or d not in axes]
    return TensorType(tuple(shape), to_dtype(dt) if dt else t.dtype)


def _reduce_same(op: str, ts: Types, attrs: Attrs) -> TensorType:
    return _reduce_kept(op, ts, attrs, None)


def _reduce_bool(op: str, ts: Types, attrs: Attrs) -> TensorType:
    return _reduce_kept(op, ts, attrs, "bool")


def _arg_reduce(op: str, ts: Types, attrs: Attrs) -> TensorType:
    t = ts[0]
    axis = norm_axis(op, attr_int(op, attrs, "axis", -1), t.ndim)
    keep = bool(attrs.get("keepdims", False))
    shape = [as_expr(1) if d == axis else s for d, s in enumerate(t.shape) if keep or d != axis]
    return TensorType(tuple(shape), to_dtype("int64"))


def _log_softmax(op: str, ts: Types, attrs: Attrs) -> TensorType:
    float_dtype(op, ts[0])
    norm_axis(op, attr_int(op, attrs, "axis", -1), ts[0].ndim)
    return ts[0]


def _gather(op: str, ts: Types, attrs: Attrs) -> TensorType:
    data, idx = ts
    if not idx.dtype.is_integer or idx.ndim != data.ndim:
        raise GraphError(
            f"{op}: indices must be integers of the data's rank, got {idx.describe()} for "
            f"{data.describe()}"
        )
    norm_axis(op, attr_int(op, attrs, "axis", 0), data.ndim)
    return TensorType(idx.shape, data.dtype)


def _pad(op: str, ts: Types, attrs: Attrs) -> TensorType:
    t = ts[0]
    before = attr_axes(op, attrs, "pad_before") or ()
    after = attr_axes(op, attrs, "pad_after") or ()
    if len(before) != t.ndim or len(after) != t.ndim or min((*before, *after), default=0) < 0:
        raise GraphError(
            f"{op}: pad_before/pad_after need {t.ndim} non-negative ints, got {before}/{after}"
        )
    shape = tuple(_grow(s, b + a) for s, b, a in zip(t.shape, before, after, strict=True))
    return TensorType(shape, t.dtype)


def _grow(e: Expr, by: int) -> Expr:
    if by == 0:
        return e
    return as_expr(e.value + by) if isinstance(e, IntImm) else e + by


def _flip(op: str, ts: Types, attrs: Attrs) -> TensorType:
    for a in attr_axes(op, attrs, "axis") or ():
        norm_axis(op, a, ts[0].ndim)
    return ts[0]


def given_shape(op: str, ts: Types, attrs: Attrs) -> tuple[Expr, ...]:
    """The ``shape`` attribute resolved over the shape variables of all arguments."""
    names: dict[str, Var] = {}
    for t in ts:
        for v in collect_vars_of_shape(t.shape):
            names.setdefault(v.name, v)
    spec = attrs.get("shape")
    if not isinstance(spec, tuple):
        raise GraphError(f"{op}: attribute 'shape' must be a tuple, got {spec!r}")
    out: list[Expr] = []
    for item in spec:
        if isinstance(item, str):
            out.append(parse_extent(item, names))
        elif isinstance(item, int) and not isinstance(item, bool) and item >= 0:
            out.append(as_expr(item))
        else:
            raise GraphError(f"{op}: bad extent {item!r} in shape {spec!r}")
    return tuple(out)


def _broadcast_to(op: str, ts: Types, attrs: Attrs) -> TensorType:
    shape = given_shape(op, ts, attrs)
    x = ts[0]
    if x.ndim > len(shape):
        raise GraphError(f"{op}: cannot broadcast {x.describe()} to rank {len(shape)}")
    for s, d in zip(reversed(x.shape), reversed(shape), strict=False):
        if not (isinstance(s, IntImm) and s.value == 1) and not dims_equal(s, d):
            raise GraphError(f"{op}: cannot broadcast {x.describe()} to {shape!r}")
    return TensorType(shape, x.dtype)


def _strided_slice(op: str, ts: Types, attrs: Attrs) -> TensorType:
    x = ts[0]
    shape = given_shape(op, ts, attrs)
    axis = norm_axis(op, attr_int(op, attrs, "axis", 0), x.ndim)
    if attr_int(op, attrs, "step", 1) < 1 or len(shape) != x.ndim:
        raise GraphError(f"{op}: needs a step >= 1 and a result shape of rank {x.ndim}")
    begin = attrs.get("begin", 0)
    if not isinstance(begin, (int, str)) or isinstance(begin, bool):
        raise GraphError(f"{op}: attribute 'begin' must be an int or extent text, got {begin!r}")
    if isinstance(begin, str):  # its shape variables must be in scope, as the shape's are
        parse_extent(begin, {v.name: v for t in ts for v in collect_vars_of_shape(t.shape)})
    for d, (a, b) in enumerate(zip(x.shape, shape, strict=True)):
        if d != axis and not dims_equal(a, b):
            raise GraphError(f"{op}: the result differs from {x.describe()} outside axis {axis}")
    return TensorType(shape, x.dtype)


def _dtype_attr(op: str, attrs: Attrs) -> str:
    name = attrs.get("dtype")
    if not isinstance(name, str):
        raise GraphError(f"{op}: attribute 'dtype' must be a dtype name, got {name!r}")
    return name


def _full(op: str, ts: Types, attrs: Attrs) -> TensorType:
    v = attrs.get("value")
    if not isinstance(v, (int, float)):
        raise GraphError(f"{op}: attribute 'value' must be a number, got {v!r}")
    return TensorType(given_shape(op, ts, attrs), to_dtype(_dtype_attr(op, attrs)))


def _arange(op: str, ts: Types, attrs: Attrs) -> TensorType:
    shape = given_shape(op, ts, attrs)
    for key in ("start", "step"):
        v = attrs.get(key)
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise GraphError(f"{op}: attribute {key!r} must be a number, got {v!r}")
    if len(shape) != 1:
        raise GraphError(f"{op}: the result is 1-d, got shape {shape!r}")
    return TensorType(shape, to_dtype(_dtype_attr(op, attrs)))


def _register() -> None:
    for name in UNARY_ANY:
        register_op(name, (1, 1), _unary_any)
    for name in UNARY_FLOAT:
        register_op(name, (1, 1), _unary_float)
    for name in UNARY_BOOL:
        register_op(name, (1, 1), _unary_bool)
    for name in BINARY_SAME:
        register_op(name, (2, 2), binary_type)
    for name in BINARY_BOOL:
        register_op(name, (2, 2), compare_type)
    for name in REDUCE_SAME:
        register_op(name, (1, 1), _reduce_same)
    for name in REDUCE_BOOL:
        register_op(name, (1, 1), _reduce_bool)
    for name in ARG_REDUCE:
        register_op(name, (1, 1), _arg_reduce)
    register_op("clip", (1, 1), _clip)
    register_op("log_softmax", (1, 1), _log_softmax)
    register_op("gather", (2, 2), _gather)
    register_op("pad", (1, 1), _pad)
    register_op("flip", (1, 1), _flip)
    register_op("broadcast_to", (1, None), _broadcast_to)
    register_op("strided_slice", (1, None), _strided_slice)
    register_op("full", (0, None), _full)
    register_op("arange", (0, None), _arange)


_register()

from . import ops_index as _ops_index  # noqa: E402, F401  (index_put)
from . import ops_remap as _ops_remap  # noqa: E402, F401  (cumsum, edge pads, resize, scatter)
from . import ops_window as _ops_window  # noqa: E402, F401  (n-d pools, col2im, grid_sample)
