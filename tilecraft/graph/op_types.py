"""Type inference of the built-in graph operators (registered at import)."""

from __future__ import annotations

import enum
from collections.abc import Sequence

from ..ir import Attrs, Expr, IntImm, as_expr
from ..ir import dtype as to_dtype
from ._grouped_reshape import reshape_groups
from ._shape_text import parse_extent
from .ir import TensorType, collect_vars_of_shape, dim_text
from .op import (
    GraphError,
    attr_axes,
    attr_float,
    attr_int,
    broadcast_shapes,
    dims_equal,
    float_dtype,
    int_tuple,
    norm_axis,
    product,
    register_op,
    same_dtype,
    shape_text,
)

Types = Sequence[TensorType]

BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum")
UNARY = ("relu", "gelu", "silu", "sigmoid", "tanh", "exp", "negative", "sqrt", "rsqrt")
REDUCE = ("sum", "mean", "max", "min")
COMPARE = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")


def _binary(op: str, ts: Types, attrs: Attrs) -> TensorType:
    dt = same_dtype(op, ts)
    return TensorType(broadcast_shapes(op, ts[0].shape, ts[1].shape), dt)


def _compare(op: str, ts: Types, attrs: Attrs) -> TensorType:
    same_dtype(op, ts)
    return TensorType(broadcast_shapes(op, ts[0].shape, ts[1].shape), to_dtype("bool"))


def _where(op: str, ts: Types, attrs: Attrs) -> TensorType:
    cond, a, b = ts
    if not cond.dtype.is_bool:
        raise GraphError(f"{op}: the condition must be a bool tensor, got {cond.describe()}")
    dt = same_dtype(op, ts[1:])
    shape = broadcast_shapes(op, broadcast_shapes(op, cond.shape, a.shape), b.shape)
    return TensorType(shape, dt)


def _unary(op: str, ts: Types, attrs: Attrs) -> TensorType:
    if op != "relu" and op != "negative":
        float_dtype(op, ts[0])
    return ts[0]


def transpose_b(op: str, attrs: Attrs) -> bool:
    """matmul's ``transpose_b`` attribute: the right operand is stored (..., N, K)."""
    v = attrs.get("transpose_b", False)
    if not isinstance(v, bool):
        raise GraphError(f"{op}: attribute 'transpose_b' must be a bool, got {v!r}")
    return v


def _matmul(op: str, ts: Types, attrs: Attrs) -> TensorType:
    a, b = ts
    dt = same_dtype(op, ts)
    if a.ndim < 2 or b.ndim < 2:
        raise GraphError(
            f"{op}: both operands need rank >= 2, got {a.describe()} and {b.describe()}"
        )
    tb = transpose_b(op, attrs)
    k, n = (b.shape[-1], b.shape[-2]) if tb else (b.shape[-2], b.shape[-1])
    if not dims_equal(a.shape[-1], k):
        shown = f"{b.describe()}^T" if tb else b.describe()
        raise GraphError(
            f"{op}: inner dimensions differ: {a.describe()} @ {shown} "
            f"({dim_text(a.shape[-1])} vs {dim_text(k)})"
        )
    batch = broadcast_shapes(op, a.shape[:-2], b.shape[:-2])
    return TensorType((*batch, a.shape[-2], n), dt)


def _dense(op: str, ts: Types, attrs: Attrs) -> TensorType:
    x, w = ts[0], ts[1]
    dt = same_dtype(op, ts)
    if w.ndim != 2 or x.ndim < 1:
        raise GraphError(f"{op}: weight must be (out, in), got {w.describe()}")
    if not dims_equal(x.shape[-1], w.shape[1]):
        raise GraphError(
            f"{op}: input {x.describe()} has {dim_text(x.shape[-1])} features, "
            f"weight {w.describe()} expects {dim_text(w.shape[1])}"
        )
    if len(ts) == 3 and (ts[2].ndim != 1 or not dims_equal(ts[2].shape[0], w.shape[0])):
        raise GraphError(f"{op}: bias must be ({dim_text(w.shape[0])},), got {ts[2].describe()}")
    return TensorType((*x.shape[:-1], w.shape[0]), dt)


def permutation(op: str, attrs: Attrs, ndim: int) -> tuple[int, ...]:
    """The ``axes`` attribute (default: reversed) checked to be a permutation."""
    axes = attr_axes(op, attrs, "axes")
    perm = tuple(reversed(range(ndim))) if axes is None else axes
    if sorted(norm_axis(op, a, ndim) for a in perm) != list(range(ndim)) or len(perm) != ndim:
        raise GraphError(f"{op}: axes {perm} is not a permutation of {ndim} dimensions")
    return tuple(norm_axis(op, a, ndim) for a in perm)


def _permute(op: str, ts: Types, attrs: Attrs) -> TensorType:
    perm = permutation(op, attrs, ts[0].ndim)
    return TensorType(tuple(ts[0].shape[a] for a in perm), ts[0].dtype)


def reshape_target(op: str, t: TensorType, attrs: Attrs) -> tuple[Expr, ...]:
    """The reshape's new shape: ints, ``-1`` (inferred) and names of the input's shape vars."""
    names = {v.name: v for v in collect_vars_of_shape(t.shape)}
    spec = attrs.get("shape")
    if not isinstance(spec, tuple):
        raise GraphError(f"{op}: attribute 'shape' must be a tuple, got {spec!r}")
    out: list[Expr | None] = []
    for item in spec:
        if isinstance(item, str):  # a name or an expression text over the input's names
            out.append(names[item] if item in names else parse_extent(item, names))
        elif isinstance(item, int) and not isinstance(item, bool) and item >= -1:
            out.append(None if item == -1 else as_expr(item))
        else:
            raise GraphError(f"{op}: bad extent {item!r} in shape {spec!r}")
    total = product(t.shape)
    if out.count(None) > 1:
        raise GraphError(f"{op}: at most one -1 in shape {spec!r}")
    if out.count(None) == 1:
        known = product([e for e in out if e is not None])
        if (
            total is None
            or known is None
            or known[0] == 0
            or total[0] % known[0]
            or any(total[1].count(i) < known[1].count(i) for i in known[1])
        ):
            raise GraphError(f"{op}: cannot infer -1 in {spec!r} from {t.describe()}")
        rest = list(total[1])
        for i in known[1]:
            rest.remove(i)
        if rest:
            raise GraphError(f"{op}: -1 in {spec!r} would be symbolic; name the extent instead")
        out[out.index(None)] = as_expr(total[0] // known[0])
    shape = tuple(e for e in out if e is not None)
    # element counts as monomials, or axes that pair up one by one (``n - 1`` with ``n - 1``,
    # unit axes inserted or dropped)
    if (product(shape) != total or total is None) and reshape_groups(t.shape, shape) is None:
        raise GraphError(
            f"{op}: cannot reshape {t.describe()} to {shape_text(shape)}: element counts differ"
        )
    return shape


def _reshape(op: str, ts: Types, attrs: Attrs) -> TensorType:
    return TensorType(reshape_target(op, ts[0], attrs), ts[0].dtype)


def _concat(op: str, ts: Types, attrs: Attrs) -> TensorType:
    dt = same_dtype(op, ts)
    nd = ts[0].ndim
    axis = norm_axis(op, attr_int(op, attrs, "axis", 0), nd)
    total: Expr = ts[0].shape[axis]
    for i, t in enumerate(ts[1:], 1):
        if t.ndim != nd or any(
            not dims_equal(a, b)
            for d, (a, b) in enumerate(zip(t.shape, ts[0].shape, strict=False))
            if d != axis
        ):
            raise GraphError(
                f"{op}: argument {i} {t.describe()} does not match argument 0 "
                f"{ts[0].describe()} outside axis {axis}"
            )
        total = _add_dims(total, t.shape[axis])
    shape = list(ts[0].shape)
    shape[axis] = total
    return TensorType(tuple(shape), dt)


def _add_dims(a: Expr, b: Expr) -> Expr:
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return as_expr(a.value + b.value)
    return a + b


def _take(op: str, ts: Types, attrs: Attrs) -> TensorType:
    data, idx = ts
    if not idx.dtype.is_integer:
        raise GraphError(f"{op}: indices must be integers, got {idx.describe()}")
    axis = norm_axis(op, attr_int(op, attrs, "axis", 0), data.ndim)
    shape = (*data.shape[:axis], *idx.shape, *data.shape[axis + 1 :])
    return TensorType(shape, data.dtype)


def static_extent(op: str, e: Expr, what: str) -> int:
    """The value of extent ``e``; GraphError naming ``what`` when it is symbolic."""
    if not isinstance(e, IntImm):
        raise GraphError(f"{op}: {what} must be static, got {dim_text(e)}")
    return e.value


def padding4(op: str, attrs: Attrs) -> tuple[int, int, int, int]:
    """The ``padding`` attribute as (top, left, bottom, right): an int, 2 or 4 ints."""
    v = attrs.get("padding", 0)
    n = 4 if isinstance(v, tuple) and len(v) == 4 else 2
    p = int_tuple(op, attrs, "padding", n, 0)
    if min(p) < 0:
        raise GraphError(f"{op}: padding must be non-negative, got {v!r}")
    return (p[0], p[1], p[0], p[1]) if n == 2 else (p[0], p[1], p[2], p[3])


def _window(op: str, n: Expr, k: int, s: int, p: tuple[int, int], d: int) -> Expr:
    eff, pad = d * (k - 1) + 1, p[0] + p[1]
    if isinstance(n, IntImm):
        out = (n.value + pad - eff) // s + 1
        if out <= 0:
            raise GraphError(
                f"{op}: window {k} (dilation {d}) does not fit extent {n.value} with padding {p}"
            )
        return as_expr(out)
    if s != 1:
        raise GraphError(f"{op}: a symbolic spatial extent needs stride 1")
    return n if pad + 1 == eff else n + (pad - eff + 1)


def _conv2d(op: str, ts: Types, attrs: Attrs) -> TensorType:
    x, w = ts
    dt = same_dtype(op, ts)
    if x.ndim != 4 or w.ndim != 4:
        raise GraphError(
            f"{op}: expected NCHW data and OIHW weight, got {x.describe()} and {w.describe()}"
        )
    groups = attr_int(op, attrs, "groups", 1)
    if groups < 1 or not dims_equal(x.shape[1], w.shape[1] * groups if groups > 1 else w.shape[1]):
        raise GraphError(
            f"{op}: data has {dim_text(x.shape[1])} channels, weight expects "
            f"{dim_text(w.shape[1])} x {groups} groups"
        )
    s, d = (int_tuple(op, attrs, k, 2, 1) for k in ("strides", "dilation"))
    p = padding4(op, attrs)
    kh, kw = (static_extent(op, e, "kernel size") for e in w.shape[2:])
    oh = _window(op, x.shape[2], kh, s[0], (p[0], p[2]), d[0])
    ow = _window(op, x.shape[3], kw, s[1], (p[1], p[3]), d[1])
    return TensorType((x.shape[0], w.shape[0], oh, ow), dt)


def _pool2d(op: str, ts: Types, attrs: Attrs) -> TensorType:
    x = ts[0]
    if x.ndim != 4:
        raise GraphError(f"{op}: expected NCHW data, got {x.describe()}")
    k = int_tuple(op, attrs, "pool_size", 2, 2)
    s = int_tuple(op, attrs, "strides", 2, k[0])
    p = padding4(op, attrs)
    oh = _window(op, x.shape[2], k[0], s[0], (p[0], p[2]), 1)
    ow = _window(op, x.shape[3], k[1], s[1], (p[1], p[3]), 1)
    return TensorType((x.shape[0], x.shape[1], oh, ow), x.dtype)


def reduce_axes(op: str, attrs: Attrs, ndim: int) -> tuple[int, ...]:
    """The sorted reduced axes (``axis`` None: all)."""
    axes = attr_axes(op, attrs, "axis")
    if axes is None:
        return tuple(range(ndim))
    return tuple(sorted({norm_axis(op, a, ndim) for a in axes}))


def _reduce(op: str, ts: Types, attrs: Attrs) -> TensorType:
    t = ts[0]
    axes = reduce_axes(op, attrs, t.ndim)
    keep = bool(attrs.get("keepdims", False))
    shape = [as_expr(1) if d in axes else s for d, s in enumerate(t.shape) if keep or d not in axes]
    if op == "mean":
        float_dtype(op, t)
    return TensorType(tuple(shape), t.dtype)


def _astype(op: str, ts: Types, attrs: Attrs) -> TensorType:
    name = attrs.get("dtype")
    if not isinstance(name, str):
        raise GraphError(f"{op}: attribute 'dtype' must be a dtype name, got {name!r}")
    return TensorType(ts[0].shape, to_dtype(name))


def _softmax(op: str, ts: Types, attrs: Attrs) -> TensorType:
    float_dtype(op, ts[0])
    norm_axis(op, attr_int(op, attrs, "axis", -1), ts[0].ndim)
    return ts[0]


def _norm(op: str, ts: Types, attrs: Attrs) -> TensorType:
    x = ts[0]
    float_dtype(op, x)
    same_dtype(op, ts)
    for i, p in enumerate(ts[1:], 1):
        if p.ndim != 1 or not dims_equal(p.shape[0], x.shape[-1]):
            raise GraphError(
                f"{op}: argument {i} must be ({dim_text(x.shape[-1])},) to match "
                f"the last axis of {x.describe()}, got {p.describe()}"
            )
    return x


def _attention(op: str, ts: Types, attrs: Attrs) -> TensorType:
    """BSHD (default) or ``layout="BHSD"``: (batch, heads, seq, head_dim) in and out."""
    q, k, v = ts
    dt = same_dtype(op, ts)
    float_dtype(op, q)
    layout = attention_layout(op, attrs)
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.ndim != 4:
            want = "(batch, seq, heads, head_dim)" if layout.seq_axis == 1 else layout.value
            raise GraphError(f"{op}: {name} must be {want}, got {t.describe()}")
    heads, seq = 3 - layout.seq_axis, layout.seq_axis
    ok = (
        dims_equal(q.shape[0], k.shape[0])
        and dims_equal(k.shape[0], v.shape[0])
        and dims_equal(q.shape[heads], k.shape[heads])
        and dims_equal(k.shape[heads], v.shape[heads])
        and dims_equal(q.shape[3], k.shape[3])
        and dims_equal(k.shape[seq], v.shape[seq])
    )
    if not ok:
        raise GraphError(f"{op}: incompatible q {q.describe()}, k {k.describe()}, v {v.describe()}")
    return TensorType((q.shape[0], q.shape[1], q.shape[2], v.shape[3]), dt)


class AttentionLayout(str, enum.Enum):
    """Axis order of per-head tensors: (batch, seq, heads, head_dim) or (batch, heads, ...)."""

    BSHD = "BSHD"
    BHSD = "BHSD"

    @property
    def seq_axis(self) -> int:
        """The token axis."""
        return 1 if self is AttentionLayout.BSHD else 2


def attention_layout(op: str, attrs: Attrs) -> AttentionLayout:
    """The ``layout`` attribute (default BSHD)."""
    v = attrs.get("layout", AttentionLayout.BSHD.value)
    try:
        return AttentionLayout(v)
    except ValueError:
        known = [m.value for m in AttentionLayout]
        raise GraphError(f"{op}: attribute 'layout' must be one of {known}, got {v!r}") from None


def rotary_offset(op: str, attrs: Attrs) -> int:
    """The ``offset`` attribute of rotary: position of token 0 (a non-negative int)."""
    off = attr_int(op, attrs, "offset", 0)
    if off < 0:
        raise GraphError(f"{op}: attribute 'offset' must be >= 0, got {off}")
    return off


def _rotary(op: str, ts: Types, attrs: Attrs) -> TensorType:
    x = ts[0]
    float_dtype(op, x)
    layout = attention_layout(op, attrs)
    if x.ndim != 4:
        raise GraphError(f"{op}: expected a 4-d {layout.value} tensor, got {x.describe()}")
    d = static_extent(op, x.shape[3], "head_dim")
    if d % 2:
        raise GraphError(f"{op}: head_dim must be even, got {d}")
    offset = rotary_offset(op, attrs)
    attr_float(op, attrs, "theta", 10000.0)
    if len(ts) == 2:
        _check_positions(op, ts[1], x, layout.seq_axis, offset)
    return x


def _check_positions(op: str, pos: TensorType, x: TensorType, seq_axis: int, offset: int) -> None:
    """``positions`` is an integer (S,) or (B, S) tensor matching ``x``'s batch and tokens."""
    if not pos.dtype.is_integer:
        raise GraphError(f"{op}: positions must be integers, got {pos.describe()}")
    if offset:
        raise GraphError(f"{op}: give either positions or a nonzero offset, not both")
    full = (x.shape[0], x.shape[seq_axis])
    want = full[2 - pos.ndim :] if pos.ndim in (1, 2) else None
    if want is None or not all(dims_equal(a, b) for a, b in zip(pos.shape, want, strict=True)):
        raise GraphError(
            f"{op}: positions must be {shape_text(full[1:])} or {shape_text(full)} for x "
            f"{x.describe()}, got {pos.describe()}"
        )


def causal_offset(op: str, attrs: Attrs) -> int | None:
    """The ``offset`` attribute of causal_mask (None: keys minus queries)."""
    v = attrs.get("offset")
    if v is None:
        return None
    return attr_int(op, attrs, "offset", 0)


def _causal_mask(op: str, ts: Types, attrs: Attrs) -> TensorType:
    x = ts[0]
    float_dtype(op, x)
    if x.ndim < 2:
        raise GraphError(f"{op}: expected scores (..., queries, keys), got {x.describe()}")
    offset = causal_offset(op, attrs)
    s, t = x.shape[-2], x.shape[-1]
    if offset is None and isinstance(s, IntImm) and isinstance(t, IntImm):
        offset = t.value - s.value
    if offset is not None and offset < 0:
        raise GraphError(
            f"{op}: query 0 would see no key in {x.describe()} (offset {offset}); a causal "
            "mask needs at least as many keys as queries"
        )
    return x


for _name in BINARY:
    register_op(_name, (2, 2), _binary)
for _name in UNARY:
    register_op(_name, (1, 1), _unary)
for _name in REDUCE:
    register_op(_name, (1, 1), _reduce)
for _name in COMPARE:
    register_op(_name, (2, 2), _compare)
register_op("where", (3, 3), _where)
register_op("matmul", (2, 2), _matmul)
register_op("dense", (2, 2), _dense)
register_op("linear", (2, 3), _dense)
register_op("permute_dims", (1, 1), _permute, "transpose")
register_op("reshape", (1, 1), _reshape)
register_op("concat", (1, None), _concat, "concatenate")
register_op("take", (2, 2), _take)
register_op("conv2d", (2, 2), _conv2d)
register_op("max_pool2d", (1, 1), _pool2d)
register_op("avg_pool2d", (1, 1), _pool2d)
register_op("astype", (1, 1), _astype, "cast")
register_op("softmax", (1, 1), _softmax)
register_op("layer_norm", (3, 3), _norm)
register_op("rms_norm", (2, 2), _norm)
register_op("attention", (3, 3), _attention)
register_op("rotary", (1, 2), _rotary, "rotary_embedding")
register_op("causal_mask", (1, 1), _causal_mask)


from . import op_types_ext as _op_types_ext  # noqa: E402, F401  (registers the added operators)
