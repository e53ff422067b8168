"""Type inference of the operators that imported models need beyond the built-in set.

``erf`` and ``power`` (elementwise), ``strided_slice`` (numpy slicing with ONNX/numpy
clamping of the bounds), ``broadcast_to`` (numpy ``broadcast_to``) and ``grouped_conv2d``
(a 2-D convolution with groups and per-side padding). ``strided_slice`` and ``broadcast_to``
take an optional second argument that is never read: it lends the names of its symbolic
extents, so a slice ``table[:n]`` or a broadcast to ``(n, n)`` can name an extent ``n`` that
the sliced tensor does not have. Registered at import; their
legalizations live in :mod:`tilecraft.graph.legalize_more`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..arith import Analyzer
from ..ir import Attrs, Expr, IntImm, as_expr
from .ir import TensorType, collect_vars_of_shape
from .op import (
    GraphError,
    attr_axes,
    attr_int,
    broadcast_shapes,
    dims_equal,
    float_dtype,
    int_tuple,
    norm_axis,
    register_op,
    same_dtype,
    shape_text,
)
from .op_types import static_extent

Types = Sequence[TensorType]

#: a slice end at or beyond this value means "to the end of the axis" (ONNX uses INT64_MAX)
END_OF_AXIS = 2**31 - 1


def _erf(op: str, ts: Types, attrs: Attrs) -> TensorType:
    float_dtype(op, ts[0])
    return ts[0]


def _power(op: str, ts: Types, attrs: Attrs) -> TensorType:
    dt = same_dtype(op, ts)
    float_dtype(op, ts[0])
    return TensorType(broadcast_shapes(op, ts[0].shape, ts[1].shape), dt)


@dataclass(frozen=True)
class SlicePlan:
    """A resolved slice: per sliced axis its first index, element count and step."""

    axes: tuple[int, ...]
    begin: tuple[Expr, ...]
    extent: tuple[Expr, ...]
    strides: tuple[int, ...]


def _clamp(v: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, v))


def _static_range(n: int, b: int, e: int, s: int) -> tuple[int, int]:
    """numpy's (start, count) of ``range(n)[b:e:s]``."""
    b, e = (b + n if b < 0 else b), (e + n if e < 0 else e)
    if s > 0:
        b, e = _clamp(b, 0, n), _clamp(e, 0, n)
        return b, max(0, -(-(e - b) // s))
    b, e = _clamp(b, -1, n - 1), _clamp(e, -1, n - 1)
    return b, max(0, -(-(b - e) // -s))


def _symbolic_range(op: str, n: Expr, b: int | Expr, e: int | Expr, s: int) -> tuple[Expr, Expr]:
    """(start, count) where the extent or a bound is symbolic: step 1, in-range bounds."""
    if s != 1:
        raise GraphError(f"{op}: a step of {s} with symbolic extents is unsupported")
    ana = Analyzer()
    start = b if isinstance(b, Expr) else ana.simplify(n + b) if b < 0 else as_expr(b)
    if isinstance(e, Expr):
        stop = e
    else:
        stop = n if e >= END_OF_AXIS else ana.simplify(n + e) if e < 0 else as_expr(e)
    count = ana.simplify(stop - start)
    if isinstance(count, IntImm) and count.value < 0:
        count = as_expr(0)
    return start, count


def shape_names(ts: Types) -> dict[str, Expr]:
    """The symbolic extents of every argument's shape, by name."""
    return {v.name: v for t in ts for v in collect_vars_of_shape(t.shape)}


def _bounds(op: str, attrs: Attrs, key: str, names: dict[str, Expr]) -> list[int | Expr]:
    spec = attrs.get(key)
    if not isinstance(spec, tuple):
        raise GraphError(f"{op}: attribute {key!r} must be a tuple, got {spec!r}")
    out: list[int | Expr] = []
    for item in spec:
        if isinstance(item, str) and item in names:
            out.append(names[item])
        elif isinstance(item, int) and not isinstance(item, bool):
            out.append(item)
        else:
            raise GraphError(
                f"{op}: bad bound {item!r} in {key} (ints or names of the arguments' extents)"
            )
    return out


def slice_plan(op: str, ts: Types, attrs: Attrs) -> SlicePlan:
    """Resolve ``axes``/``begin``/``end``/``strides`` against the sliced tensor ``ts[0]``.

    Bounds are ints (numpy semantics, ``END_OF_AXIS`` and beyond: the end) or names of
    symbolic extents of any argument (a second argument only lends its extents' names).
    """
    t, names = ts[0], shape_names(ts)
    begin, end = _bounds(op, attrs, "begin", names), _bounds(op, attrs, "end", names)
    axes = attr_axes(op, attrs, "axes") or tuple(range(len(begin)))
    strides = attr_axes(op, attrs, "strides") or (1,) * len(begin)
    if not len(axes) == len(begin) == len(end) == len(strides):
        raise GraphError(f"{op}: axes, begin, end and strides must have the same length")
    norm = tuple(norm_axis(op, a, t.ndim) for a in axes)
    if len(set(norm)) != len(norm) or 0 in strides:
        raise GraphError(f"{op}: repeated axis or zero step in {attrs!r}")
    starts: list[Expr] = []
    counts: list[Expr] = []
    for a, b, e, s in zip(norm, begin, end, strides, strict=True):
        n = t.shape[a]
        if isinstance(n, IntImm) and isinstance(b, int) and isinstance(e, int):
            lo, cnt = _static_range(n.value, b, min(e, END_OF_AXIS), s)
            starts.append(as_expr(lo))
            counts.append(as_expr(cnt))
        else:
            lo_e, cnt_e = _symbolic_range(op, n, b, e, s)
            starts.append(lo_e)
            counts.append(cnt_e)
    return SlicePlan(norm, tuple(starts), tuple(counts), strides)


def _strided_slice(op: str, ts: Types, attrs: Attrs) -> TensorType:
    plan = slice_plan(op, ts, attrs)
    shape = list(ts[0].shape)
    for a, n in zip(plan.axes, plan.extent, strict=True):
        shape[a] = n
    return TensorType(tuple(shape), ts[0].dtype)


def broadcast_target(op: str, ts: Types, attrs: Attrs) -> tuple[Expr, ...]:
    """The ``shape`` attribute: ints and names of the arguments' symbolic extents."""
    names = shape_names(ts)
    spec = attrs.get("shape")
    if not isinstance(spec, tuple):
        raise GraphError(f"{op}: attribute 'shape' must be a tuple, got {spec!r}")
    out: list[Expr] = []
    for item in spec:
        if isinstance(item, str) and item in names:
            out.append(names[item])
        elif isinstance(item, int) and not isinstance(item, bool) and item >= 0:
            out.append(as_expr(item))
        else:
            raise GraphError(
                f"{op}: bad extent {item!r} in {spec!r} (ints, or names of the symbolic "
                f"extents of {ts[0].describe()} or of the second argument)"
            )
    return tuple(out)


def _broadcast_to(op: str, ts: Types, attrs: Attrs) -> TensorType:
    target = broadcast_target(op, ts, attrs)
    got = broadcast_shapes(op, ts[0].shape, target) if ts[0].ndim <= len(target) else None
    if got is None or not all(dims_equal(a, b) for a, b in zip(got, target, strict=True)):
        raise GraphError(f"{op}: {ts[0].describe()} does not broadcast to {shape_text(target)}")
    return TensorType(target, ts[0].dtype)


def _conv_extent(op: str, n: Expr, k: int, s: int, before: int, after: int, d: int) -> Expr:
    span = d * (k - 1) + 1
    if isinstance(n, IntImm):
        out = (n.value + before + after - span) // s + 1
        if out <= 0:
            raise GraphError(f"{op}: window {span} does not fit extent {n.value}")
        return as_expr(out)
    if s != 1:
        raise GraphError(f"{op}: a symbolic spatial extent needs stride 1")
    return n + (before + after - span + 1)


def _grouped_conv2d(op: str, ts: Types, attrs: Attrs) -> TensorType:
    x, w = ts
    dt = same_dtype(op, ts)
    if x.ndim != 4 or w.ndim != 4:
        raise GraphError(f"{op}: expected NCHW data and OIHW weight, got {x.describe()}")
    groups = attr_int(op, attrs, "groups", 1)
    c = static_extent(op, x.shape[1], "input channels")
    o = static_extent(op, w.shape[0], "output channels")
    icg = static_extent(op, w.shape[1], "weight input channels")
    if groups < 1 or c != icg * groups or o % groups:
        raise GraphError(
            f"{op}: {c} input and {o} output channels do not split into {groups} groups of "
            f"weight {w.describe()}"
        )
    s, d = int_tuple(op, attrs, "strides", 2, 1), int_tuple(op, attrs, "dilation", 2, 1)
    p = int_tuple(op, attrs, "padding", 4, 0)
    kh, kw = (static_extent(op, e, "kernel size") for e in w.shape[2:])
    oh = _conv_extent(op, x.shape[2], kh, s[0], p[0], p[2], d[0])
    ow = _conv_extent(op, x.shape[3], kw, s[1], p[1], p[3], d[1])
    return TensorType((x.shape[0], w.shape[0], oh, ow), dt)


register_op("erf", (1, 1), _erf)
register_op("power", (2, 2), _power)
register_op("strided_slice", (1, 2), _strided_slice)
register_op("broadcast_to", (1, 2), _broadcast_to)
register_op("grouped_conv2d", (2, 2), _grouped_conv2d, "conv2d")
