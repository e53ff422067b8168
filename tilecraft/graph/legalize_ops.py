"""Legalization of each graph operator to an operator of :mod:`tilecraft.topi`.

Each function takes the argument placeholders (named after the graph values), the call's
attributes and the inferred result type, and returns the output tensor; Legalize turns it
into a PrimFunc. The computations themselves live in topi: this module only maps the graph
operators' attributes and layouts onto topi's signatures. Shapes come from the graph types,
so symbolic extents of the graph (``n``) appear directly in the PrimFunc's buffer shapes.

Stage (block) names are topi's: ``matmul``, ``T_add``, ``T_relu``, ``T_layer_norm_sum``...
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from .. import te, topi
from ..ir import Attrs
from ._grouped_reshape import grouped_reshape
from .ir import TensorType
from .op import OPS, LegalizeFn, attr_float, attr_int, attr_optional_float, int_tuple
from .op_types import (
    BINARY,
    COMPARE,
    REDUCE,
    UNARY,
    AttentionLayout,
    attention_layout,
    causal_offset,
    padding4,
    permutation,
    reduce_axes,
    rotary_offset,
    static_extent,
    transpose_b,
)

Tensor = te.Tensor
Args = Sequence[Tensor]

_BINARY: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
    "add": topi.add,
    "subtract": topi.subtract,
    "multiply": topi.multiply,
    "divide": topi.divide,
    "maximum": topi.maximum,
    "minimum": topi.minimum,
    "equal": topi.equal,
    "not_equal": topi.not_equal,
    "less": topi.less,
    "less_equal": topi.less_equal,
    "greater": topi.greater,
    "greater_equal": topi.greater_equal,
}

_UNARY: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": topi.relu,
    "gelu": topi.gelu,
    "silu": topi.silu,
    "sigmoid": topi.sigmoid,
    "tanh": topi.tanh,
    "exp": topi.exp,
    "negative": topi.negative,
    "sqrt": topi.sqrt,
    "rsqrt": topi.rsqrt,
}

_REDUCE: dict[str, Callable[..., Tensor]] = {
    "sum": topi.sum,
    "mean": topi.mean,
    "max": topi.max,
    "min": topi.min,
}


def _binary(op: str) -> LegalizeFn:
    fn = _BINARY[op]

    def lower(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
        return fn(args[0], args[1])

    return lower


def _unary(op: str) -> LegalizeFn:
    fn = _UNARY[op]

    def lower(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
        return fn(args[0])

    return lower


def _reduce(op: str) -> LegalizeFn:
    fn = _REDUCE[op]

    def lower(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
        x = args[0]
        keep = bool(attrs.get("keepdims", False))
        return fn(x, axis=list(reduce_axes(op, attrs, x.ndim)), keepdims=keep)

    return lower


def _matmul(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    # transpose_b: the right operand is read in its stored (..., N, K) layout, so the block
    # stays an einsum C[.., i, j] += A[.., i, k] * B[.., j, k]. float16/bfloat16 products
    # accumulate in float32 (as every reduction over them does) and are rounded once: the
    # einsum then has the form tensor cores compute (fp16 operands, an fp32 accumulator).
    a, b = args[0], args[1]
    acc = topi.nn.acc_dtype(a)
    y = topi.matmul(a, b, transpose_b=transpose_b("matmul", attrs), out_dtype=acc)
    return y if acc == str(a.dtype) else topi.cast(y, a.dtype)


def _dense(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    return topi.dense(args[0], args[1], args[2] if len(args) == 3 else None)


def _permute(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    x = args[0]
    return topi.transpose(x, permutation("permute_dims", attrs, x.ndim))


def _reshape(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    # the inferred type holds the resolved target shape (-1 and names of symbolic extents);
    # splits and merges of neighbouring axes avoid dividing by symbolic extents
    return grouped_reshape(args[0], out.shape) or topi.reshape(args[0], out.shape)


def _concat(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    return topi.concat(args, axis=attr_int("concat", attrs, "axis", 0))


def _take(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    return topi.take(args[0], args[1], axis=attr_int("take", attrs, "axis", 0))


def _conv2d(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    def pair(key: str, default: int) -> tuple[int, ...]:
        return int_tuple("conv2d", attrs, key, 2, default)

    return topi.conv2d(
        args[0],
        args[1],
        stride=pair("strides", 1),
        padding=padding4("conv2d", attrs),
        dilation=pair("dilation", 1),
        groups=attr_int("conv2d", attrs, "groups", 1),
    )


def _pool(op: str) -> LegalizeFn:
    def lower(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
        kernel = int_tuple(op, attrs, "pool_size", 2, 2)
        stride = int_tuple(op, attrs, "strides", 2, kernel[0])
        padding = padding4(op, attrs)
        if op == "max_pool2d":
            return topi.max_pool2d(args[0], kernel, stride, padding)
        # by default the graph operator divides by the full window, padding included
        # (PyTorch's default); count_include_pad=False divides by the window's valid part
        include = bool(attrs.get("count_include_pad", True))
        return topi.avg_pool2d(args[0], kernel, stride, padding, count_include_pad=include)

    return lower


def _astype(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    return topi.cast(args[0], out.dtype)


def _softmax(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    return topi.softmax(args[0], axis=attr_int("softmax", attrs, "axis", -1))


def _layer_norm(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    eps = attr_float("layer_norm", attrs, "eps", 1e-5)
    return topi.layer_norm(args[0], args[1], args[2], axis=-1, eps=eps)


def _rms_norm(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    return topi.rms_norm(args[0], args[1], axis=-1, eps=attr_float("rms_norm", attrs, "eps", 1e-5))


_SWAP_SEQ_HEADS = (0, 2, 1, 3)  # (batch, seq, heads, dim) <-> (batch, heads, seq, dim)


def _attention(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    """topi works on (..., seq, dim): BSHD moves the heads axis in front of the sequence axis."""
    bshd = attention_layout("attention", attrs) is AttentionLayout.BSHD
    q, k, v = (
        topi.transpose(t, _SWAP_SEQ_HEADS, name=f"{n}_bhsd") if bshd else t
        for t, n in zip(args, "qkv", strict=True)
    )
    scale = attr_optional_float("attention", attrs, "scale")
    if scale is None:
        scale = 1.0 / math.sqrt(static_extent("attention", q.shape[-1], "head_dim"))
    o = topi.attention(q, k, v, causal=bool(attrs.get("causal", False)), scale=scale)
    return topi.transpose(o, _SWAP_SEQ_HEADS, name="T_attention") if bshd else o


def _rotary(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    """Rotate along the layout's token axis at ``positions`` (second argument) or from offset."""
    layout = attention_layout("rotary", attrs)
    return topi.rotary(
        args[0],
        args[1] if len(args) == 2 else None,
        offset=rotary_offset("rotary", attrs),
        theta=attr_float("rotary", attrs, "theta", 10000.0),
        seq_axis=layout.seq_axis,
    )


def _causal_mask(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    return topi.causal_mask(args[0], offset=causal_offset("causal_mask", attrs))


def _where(args: Args, attrs: Attrs, out: TensorType) -> Tensor:
    return topi.where(args[0], args[1], args[2])


_TABLE: dict[str, LegalizeFn] = {
    **{name: _binary(name) for name in BINARY + COMPARE},
    "where": _where,
    **{name: _unary(name) for name in UNARY},
    **{name: _reduce(name) for name in REDUCE},
    "matmul": _matmul,
    "dense": _dense,
    "linear": _dense,
    "permute_dims": _permute,
    "reshape": _reshape,
    "concat": _concat,
    "take": _take,
    "conv2d": _conv2d,
    "max_pool2d": _pool("max_pool2d"),
    "avg_pool2d": _pool("avg_pool2d"),
    "astype": _astype,
    "softmax": _softmax,
    "layer_norm": _layer_norm,
    "rms_norm": _rms_norm,
    "attention": _attention,
    "rotary": _rotary,
    "causal_mask": _causal_mask,
}

for _name, _fn in _TABLE.items():
    OPS[_name].legalize = _fn


from . import legalize_ops_ext as _legalize_ops_ext  # noqa: E402, F401  (the added operators)
