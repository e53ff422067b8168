"""Legalization of each graph operator to a te computation (turned into a PrimFunc).

Each function takes the argument placeholders, the call's attributes and the inferred result
type, and returns the output tensor. Shapes come from the graph types, so symbolic extents
of the graph (``n``) appear directly in the PrimFunc's buffer shapes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from .. import te
from ..ir import Attrs, Cast, Expr, IntImm, as_expr, const
from ..ir import op as irop
from .ir import TensorType
from .op import OPS
from .op_types import BINARY, UNARY, permutation, reduce_axes, reshape_target

Tensor = te.Tensor
Args = Sequence[Tensor]


def _bcast_index(t: Tensor, out_ndim: int, idx: Sequence[Expr]) -> list[Expr]:
    """Indices into ``t`` broadcast (numpy rules) to an output indexed by ``idx``."""
    off = out_ndim - t.ndim
    return [as_expr(0) if isinstance(s, IntImm) and s.value == 1 else idx[off + d]
            for d, s in enumerate(t.shape)]


_BIN: dict[str, Callable[[Expr, Expr], Expr]] = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "divide": lambda a, b: a / b,
    "maximum": irop.max,
    "minimum": irop.min,
}


def _binary(op: str) -> Callable[[Args, Attrs, TensorType], Tensor]:
    def lower(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
        a, b = args
        n = out.ndim
        return te.compute(out.shape, lambda *i: _BIN[op](a[_bcast_index(a, n, i)],
                                                         b[_bcast_index(b, n, i)]),
                          name=f"T_{op}")
    return lower


def _gelu(x: Expr) -> Expr:
    return x * as_expr(0.5, x.dtype) * (as_expr(1.0, x.dtype) +
                                        irop.erf(x * as_expr(1 / math.sqrt(2.0), x.dtype)))


_UN: dict[str, Callable[[Expr], Expr]] = {
    "relu": lambda x: irop.max(x, as_expr(0, x.dtype)),
    "gelu": _gelu,
    "silu": lambda x: x * irop.sigmoid(x),
    "sigmoid": irop.sigmoid,
    "tanh": irop.tanh,
    "exp": irop.exp,
    "negative": lambda x: -x,
    "sqrt": irop.sqrt,
    "rsqrt": irop.rsqrt,
}


def _unary(op: str) -> Callable[[Args, Attrs, TensorType], Tensor]:
    def lower(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
        x = args[0]
        return te.compute(out.shape, lambda *i: _UN[op](x[i]), name="compute")
    return lower


def _matmul(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    a, b = args
    kdim = a.shape[-1]
    k = te.reduce_axis(kdim, name="k")
    n = out.ndim

    def body(*i: Expr) -> object:
        ai = _bcast_index(a, n, (*i[:-2], i[-2], i[-1]))[:-1]
        bi = _bcast_index(b, n, (*i[:-2], i[-2], i[-1]))[:-2]
        return te.sum(a[(*ai[:-1], i[-2], k)] * b[(*bi, k, i[-1])], axis=k)
    return te.compute(out.shape, body, name="matmul")


def _dense(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    x, w = args[0], args[1]
    k = te.reduce_axis(x.shape[-1], name="k")
    y = te.compute(out.shape, lambda *i: te.sum(x[(*i[:-1], k)] * w[i[-1], k], axis=k),
                   name="matmul")
    if len(args) == 3:
        b = args[2]
        return te.compute(out.shape, lambda *i: y[i] + b[i[-1]], name="T_add")
    return y


def _permute(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    x = args[0]
    perm = permutation("permute_dims", attrs, x.ndim)
    inv = [perm.index(d) for d in range(x.ndim)]
    return te.compute(out.shape, lambda *i: x[tuple(i[inv[d]] for d in range(x.ndim))],
                      name="T_transpose")


def _unravel(flat: Expr, shape: Sequence[Expr]) -> list[Expr]:
    out: list[Expr] = []
    for d in reversed(range(len(shape))):
        s = shape[d]
        if d == 0:
            out.append(flat)
        elif isinstance(s, IntImm) and s.value == 1:
            out.append(as_expr(0))
        else:
            out.append(flat % s)
            flat = flat // s
    return list(reversed(out))


def _ravel(idx: Sequence[Expr], shape: Sequence[Expr]) -> Expr:
    flat: Expr = as_expr(0)
    for i, s in zip(idx, shape, strict=False):
        flat = i if isinstance(flat, IntImm) and flat.value == 0 else flat * s + i
    return flat


def _reshape(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    x = args[0]
    shape = reshape_target("reshape", TensorType(x.shape, x.dtype), attrs)
    return te.compute(out.shape, lambda *i: x[_unravel(_ravel(i, shape), x.shape)],
                      name="T_reshape")


def _clamp(e: Expr, hi: Expr) -> Expr:
    return irop.min(irop.max(e, as_expr(0)), hi - 1)


def _concat(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    axis = int(attrs.get("axis", 0)) % out.ndim  # type: ignore[arg-type]

    def body(*i: Expr) -> Expr:
        offsets: list[Expr] = []
        off: Expr = as_expr(0)
        for t in args:
            offsets.append(off)
            off = off + t.shape[axis]
        value: Expr | None = None
        for t, o in reversed(list(zip(args, offsets, strict=False))):
            idx = list(i)
            idx[axis] = _clamp(i[axis] - o, t.shape[axis])
            v = t[idx]
            value = v if value is None else irop.select(i[axis] < o + t.shape[axis], v, value)
        assert value is not None
        return value
    return te.compute(out.shape, body, name="T_concat")


def _take(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    data, idx = args
    axis = int(attrs.get("axis", 0)) % data.ndim  # type: ignore[arg-type]
    m = idx.ndim

    def body(*i: Expr) -> Expr:
        j = irop.cast(idx[i[axis:axis + m]], "int32")
        return data[(*i[:axis], _clamp(j, data.shape[axis]), *i[axis + m:])]
    return te.compute(out.shape, body, name="T_take")


def _pair(attrs: Attrs, key: str, default: int) -> tuple[int, int]:
    v = attrs.get(key, default)
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))  # type: ignore[index]


def _pad(x: Tensor, p: tuple[int, int], fill: Expr) -> Tensor:
    if p == (0, 0):
        return x
    h, w = x.shape[2], x.shape[3]
    shape = (x.shape[0], x.shape[1], h + 2 * p[0], w + 2 * p[1])

    def body(n: Expr, c: Expr, i: Expr, j: Expr) -> Expr:
        ii, jj = i - p[0], j - p[1]
        inside = (ii >= 0) & (ii < h) & (jj >= 0) & (jj < w)
        return irop.select(inside, x[n, c, _clamp(ii, h), _clamp(jj, w)], fill)
    return te.compute(tuple(_fold(s) for s in shape), body, name="pad_temp")


def _fold(e: Expr) -> Expr:
    from ..ir import Add, Mul

    if isinstance(e, (Add, Mul)) and isinstance(e.a, IntImm) and isinstance(e.b, IntImm):
        return as_expr(e.a.value + e.b.value if isinstance(e, Add) else e.a.value * e.b.value)
    if isinstance(e, Add):
        a, b = _fold(e.a), _fold(e.b)
        if isinstance(a, IntImm) and isinstance(b, IntImm):
            return as_expr(a.value + b.value)
        return a + b
    return e


def _conv2d(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    x, w = args
    s, p, d = _pair(attrs, "strides", 1), _pair(attrs, "padding", 0), _pair(attrs, "dilation", 1)
    xp = _pad(x, p, const(0.0, x.dtype))
    rc = te.reduce_axis(w.shape[1], name="rc")
    ry = te.reduce_axis(w.shape[2], name="ry")
    rx = te.reduce_axis(w.shape[3], name="rx")
    return te.compute(out.shape, lambda n, f, y, xx: te.sum(
        xp[n, rc, y * s[0] + ry * d[0], xx * s[1] + rx * d[1]] * w[f, rc, ry, rx],
        axis=[rc, ry, rx]), name="conv2d_nchw")


def _pool(kind: str) -> Callable[[Args, Attrs, TensorType], Tensor]:
    def lower(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
        x = args[0]
        k = _pair(attrs, "pool_size", 2)
        s = _pair(attrs, "strides", k[0])
        p = _pair(attrs, "padding", 0)
        fill = te.min_value(x.dtype) if kind == "max" else const(0.0, x.dtype)
        xp = _pad(x, p, fill)
        ry = te.reduce_axis(k[0], name="ry")
        rx = te.reduce_axis(k[1], name="rx")
        red = te.max if kind == "max" else te.sum
        pooled = te.compute(out.shape, lambda n, c, i, j: red(
            xp[n, c, i * s[0] + ry, j * s[1] + rx], axis=[ry, rx]), name=f"pool_{kind}")
        if kind == "max":
            return pooled
        area = const(float(k[0] * k[1]), x.dtype)
        return te.compute(out.shape, lambda *i: pooled[i] / area, name="pool_avg_div")
    return lower


def _reduce(kind: str) -> Callable[[Args, Attrs, TensorType], Tensor]:
    def lower(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
        x = args[0]
        axes = reduce_axes(kind, attrs, x.ndim)
        keep = bool(attrs.get("keepdims", False))
        red = {"sum": te.sum, "mean": te.sum, "max": te.max, "min": te.min}[kind]
        ks = [te.reduce_axis(x.shape[a], name=f"k{a}") for a in axes]

        def body(*i: Expr) -> object:
            idx: list[Expr] = []
            it = iter(i)
            for d in range(x.ndim):
                if d in axes:
                    idx.append(ks[axes.index(d)])
                    if keep:
                        next(it)
                else:
                    idx.append(next(it))
            return red(x[idx], axis=ks)
        r = te.compute(out.shape, body, name=f"T_{kind}" if kind != "mean" else "T_sum")
        if kind != "mean":
            return r
        count: Expr = const(1.0, x.dtype)
        for a in axes:
            count = count * Cast(x.dtype, x.shape[a])
        return te.compute(out.shape, lambda *i: r[i] / count, name="T_divide")
    return lower


def _astype(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    x = args[0]
    return te.compute(out.shape, lambda *i: irop.cast(x[i], out.dtype), name="compute")


def _softmax(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    x = args[0]
    axis = int(attrs.get("axis", -1)) % x.ndim  # type: ignore[arg-type]
    red_shape = tuple(s for d, s in enumerate(x.shape) if d != axis)

    def at(i: Sequence[Expr], k: Expr) -> list[Expr]:
        return [*i[:axis], k, *i[axis:]]
    k1 = te.reduce_axis(x.shape[axis], name="k")
    mx = te.compute(red_shape, lambda *i: te.max(x[at(i, k1)], axis=k1), name="T_softmax_maxelem")
    ex = te.compute(x.shape, lambda *i: irop.exp(x[i] - mx[(*i[:axis], *i[axis + 1:])]),
                    name="T_softmax_exp")
    k2 = te.reduce_axis(x.shape[axis], name="k")
    sm = te.compute(red_shape, lambda *i: te.sum(ex[at(i, k2)], axis=k2), name="T_softmax_expsum")
    return te.compute(x.shape, lambda *i: ex[i] / sm[(*i[:axis], *i[axis + 1:])],
                      name="T_softmax_norm")


def _norm(kind: str) -> Callable[[Args, Attrs, TensorType], Tensor]:
    def lower(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
        x = args[0]
        eps = const(float(attrs.get("eps", 1e-5)), x.dtype)  # type: ignore[arg-type]
        n = x.shape[-1]
        inv_n = const(1.0, x.dtype) / Cast(x.dtype, n)
        lead = x.shape[:-1]
        k1 = te.reduce_axis(n, name="k")
        if kind == "rms_norm":
            sq = te.compute(lead, lambda *i: te.sum(x[(*i, k1)] * x[(*i, k1)], axis=k1),
                            name="T_rms_sqsum")
            w = args[1]
            return te.compute(x.shape, lambda *i: x[i] * irop.rsqrt(sq[i[:-1]] * inv_n + eps)
                              * w[i[-1]], name="T_rms_norm")
        mean = te.compute(lead, lambda *i: te.sum(x[(*i, k1)], axis=k1), name="T_ln_sum")
        k2 = te.reduce_axis(n, name="k")

        def dev(i: Sequence[Expr], k: Expr) -> Expr:
            return x[(*i, k)] - mean[tuple(i)] * inv_n
        var = te.compute(lead, lambda *i: te.sum(dev(i, k2) * dev(i, k2), axis=k2),
                         name="T_ln_var_sum")
        g, b = args[1], args[2]
        return te.compute(x.shape, lambda *i: (x[i] - mean[i[:-1]] * inv_n)
                          * irop.rsqrt(var[i[:-1]] * inv_n + eps) * g[i[-1]] + b[i[-1]],
                          name="T_layer_norm")
    return lower


def _attention(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    q, k, v = args
    causal = bool(attrs.get("causal", False))
    head_dim = q.shape[3]
    scale_attr = attrs.get("scale")
    scale = (const(float(scale_attr), q.dtype) if scale_attr is not None  # type: ignore[arg-type]
             else irop.rsqrt(Cast(q.dtype, head_dim)))
    b, s, h, _d = q.shape
    kv_len = k.shape[1]
    shape = (b, h, s, kv_len)
    rd = te.reduce_axis(head_dim, name="d")
    score = te.compute(shape, lambda bb, hh, i, j: te.sum(
        q[bb, i, hh, rd] * k[bb, j, hh, rd], axis=rd), name="attn_score")

    def visible(i: Expr, j: Expr) -> Expr:
        return j <= i + (kv_len - s)

    def masked(bb: Expr, hh: Expr, i: Expr, j: Expr) -> Expr:
        val = score[bb, hh, i, j] * scale
        return irop.select(visible(i, j), val, te.min_value(q.dtype)) if causal else val
    j1 = te.reduce_axis(kv_len, name="j")
    mx = te.compute((b, h, s), lambda bb, hh, i: te.max(masked(bb, hh, i, j1), axis=j1),
                    name="attn_max")

    def prob(bb: Expr, hh: Expr, i: Expr, j: Expr) -> Expr:
        e = irop.exp(score[bb, hh, i, j] * scale - mx[bb, hh, i])
        return irop.select(visible(i, j), e, const(0.0, q.dtype)) if causal else e
    p = te.compute(shape, prob, name="attn_exp")
    j2 = te.reduce_axis(kv_len, name="j")
    den = te.compute((b, h, s), lambda bb, hh, i: te.sum(p[bb, hh, i, j2], axis=j2),
                     name="attn_sum")
    j3 = te.reduce_axis(kv_len, name="j")
    num = te.compute(out.shape, lambda bb, i, hh, dd: te.sum(
        p[bb, hh, i, j3] * v[bb, j3, hh, dd], axis=j3), name="attn_weighted")
    return te.compute(out.shape, lambda bb, i, hh, dd: num[bb, i, hh, dd] / den[bb, hh, i],
                      name="attn_out")


def _rotary(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    x = args[0]
    theta = float(attrs.get("theta", 10000.0))  # type: ignore[arg-type]
    dim = x.shape[3]
    assert isinstance(dim, IntImm)
    half = dim.value // 2
    dt = x.dtype

    def body(b: Expr, s: Expr, h: Expr, d: Expr) -> Expr:
        fi = Cast(dt, d % half)
        inv_freq = irop.exp(fi * const(-2.0 * math.log(theta) / dim.value, dt))
        ang = Cast(dt, s) * inv_freq
        other = x[b, s, h, (d + half) % dim.value]
        rot = irop.select(d < half, -other, other)
        return x[b, s, h, d] * irop.cos(ang) + rot * irop.sin(ang)
    return te.compute(out.shape, body, name="T_rotary")


_TABLE: dict[str, Callable[[Args, Attrs, TensorType], Tensor]] = {
    **{name: _binary(name) for name in BINARY},
    **{name: _unary(name) for name in UNARY},
    **{name: _reduce(name) for name in ("sum", "mean", "max", "min")},
    "matmul": _matmul,
    "dense": _dense,
    "linear": _dense,
    "permute_dims": _permute,
    "reshape": _reshape,
    "concat": _concat,
    "take": _take,
    "conv2d": _conv2d,
    "max_pool2d": _pool("max"),
    "avg_pool2d": _pool("avg"),
    "astype": _astype,
    "softmax": _softmax,
    "layer_norm": _norm("layer_norm"),
    "rms_norm": _norm("rms_norm"),
    "attention": _attention,
    "rotary": _rotary,
}

for _name, _fn in _TABLE.items():
    OPS[_name].legalize = _fn
