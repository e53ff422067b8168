"""Operator functions usable inside ``forward`` (each traces one graph operator)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._composite import attention as attention
from ._composite import batch_norm as batch_norm
from ._composite import causal_lower_right as causal_lower_right
from ._composite import causal_upper_left as causal_upper_left
from ._composite import scaled_dot_product_attention as scaled_dot_product_attention
from .core import Operand, Tensor, emit
from .core import constant as constant


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` with broadcast batch dimensions."""
    return emit("matmul", [a, b])


def add(a: Tensor, b: Operand) -> Tensor:
    """Broadcasting ``a + b`` (``b`` may be a Python scalar, taking ``a``'s dtype)."""
    return a + b


def subtract(a: Tensor, b: Operand) -> Tensor:
    """Broadcasting ``a - b``."""
    return a - b


def multiply(a: Tensor, b: Operand) -> Tensor:
    """Broadcasting ``a * b``."""
    return a * b


def divide(a: Tensor, b: Operand) -> Tensor:
    """Broadcasting ``a / b`` (integers: truncating division)."""
    return a / b


def maximum(a: Tensor, b: Tensor) -> Tensor:
    """Broadcasting elementwise maximum."""
    return emit("maximum", [a, b])


def minimum(a: Tensor, b: Tensor) -> Tensor:
    """Broadcasting elementwise minimum."""
    return emit("minimum", [a, b])


def negative(x: Tensor) -> Tensor:
    """``-x``."""
    return emit("negative", [x])


def exp(x: Tensor) -> Tensor:
    """``e ** x``."""
    return emit("exp", [x])


def sqrt(x: Tensor) -> Tensor:
    """Square root."""
    return emit("sqrt", [x])


def rsqrt(x: Tensor) -> Tensor:
    """``1 / sqrt(x)``."""
    return emit("rsqrt", [x])


def astype(x: Tensor, dtype: str) -> Tensor:
    """``x`` converted to ``dtype`` (same as ``x.astype(dtype)``)."""
    return x.astype(dtype)


def equal(a: Tensor, b: Operand) -> Tensor:
    """Broadcasting ``a == b`` as a bool tensor (``a.eq(b)``)."""
    return a.eq(b)


def not_equal(a: Tensor, b: Operand) -> Tensor:
    """Broadcasting ``a != b`` as a bool tensor (``a.ne(b)``)."""
    return a.ne(b)


def less(a: Tensor, b: Operand) -> Tensor:
    """Broadcasting ``a < b`` as a bool tensor."""
    return a < b


def less_equal(a: Tensor, b: Operand) -> Tensor:
    """Broadcasting ``a <= b`` as a bool tensor."""
    return a <= b


def greater(a: Tensor, b: Operand) -> Tensor:
    """Broadcasting ``a > b`` as a bool tensor."""
    return a > b


def greater_equal(a: Tensor, b: Operand) -> Tensor:
    """Broadcasting ``a >= b`` as a bool tensor."""
    return a >= b


def where(cond: Tensor, a: Operand, b: Operand) -> Tensor:
    """``a`` where the bool tensor ``cond`` holds, else ``b`` (broadcasting all three).

    One of ``a`` and ``b`` may be a Python scalar: it takes the other one's dtype.
    """
    if not isinstance(a, Tensor) and isinstance(b, Tensor):
        a = b._operand(a, "where")
    elif isinstance(a, Tensor):
        b = a._operand(b, "where")
    return emit("where", [cond, a, b])  # type: ignore[list-item]


def relu(x: Tensor) -> Tensor:
    """``max(x, 0)``."""
    return emit("relu", [x])


def gelu(x: Tensor) -> Tensor:
    """GELU (erf form)."""
    return emit("gelu", [x])


def silu(x: Tensor) -> Tensor:
    """``x * sigmoid(x)``."""
    return emit("silu", [x])


def sigmoid(x: Tensor) -> Tensor:
    """Logistic function."""
    return emit("sigmoid", [x])


def tanh(x: Tensor) -> Tensor:
    """Hyperbolic tangent."""
    return emit("tanh", [x])


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """Softmax along ``axis``."""
    return emit("softmax", [x], {"axis": axis})


def reshape(x: Tensor, shape: Sequence[Any]) -> Tensor:
    """Reshape (ints, -1, or symbolic extents of ``x``)."""
    return x.reshape(tuple(shape))


def permute_dims(x: Tensor, axes: Sequence[int] | None = None) -> Tensor:
    """Reorder dimensions (default: reverse)."""
    return emit("permute_dims", [x], {"axes": tuple(axes) if axes is not None else None})


def concat(xs: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Concatenate along ``axis``."""
    return emit("concat", list(xs), {"axis": axis})


def take(data: Tensor, indices: Tensor, axis: int = 0) -> Tensor:
    """Gather slices of ``data`` along ``axis`` at ``indices``."""
    return emit("take", [data, indices], {"axis": axis})


def sum(x: Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
    """Sum over ``axis`` (all when None)."""
    return emit(
        "sum",
        [x],
        {"axis": axis if not isinstance(axis, list) else tuple(axis), "keepdims": keepdims},
    )


def mean(x: Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
    """Mean over ``axis`` (all when None)."""
    return emit(
        "mean",
        [x],
        {"axis": axis if not isinstance(axis, list) else tuple(axis), "keepdims": keepdims},
    )


def max_pool2d(
    x: Tensor, pool_size: int = 2, strides: int | None = None, padding: int = 0
) -> Tensor:
    """Max pooling of NCHW data."""
    return emit(
        "max_pool2d",
        [x],
        {"pool_size": pool_size, "strides": strides or pool_size, "padding": padding},
    )


def avg_pool2d(
    x: Tensor, pool_size: int = 2, strides: int | None = None, padding: int = 0
) -> Tensor:
    """Average pooling of NCHW data."""
    return emit(
        "avg_pool2d",
        [x],
        {"pool_size": pool_size, "strides": strides or pool_size, "padding": padding},
    )


def rotary(
    x: Tensor,
    theta: float = 10000.0,
    *,
    positions: Tensor | None = None,
    offset: int = 0,
    layout: str = "BSHD",
) -> Tensor:
    """Rotary position embedding of a 4-d per-head tensor (rotate-half form).

    ``layout`` is ``"BSHD"`` (batch, seq, heads, head_dim) or ``"BHSD"``. Token ``s`` sits at
    position ``positions[s]`` (an integer ``(S,)`` or ``(B, S)`` tensor) or, without
    ``positions``, at ``s + offset`` (e.g. ``offset`` = the length of a KV cache).
    """
    args = [x] if positions is None else [x, positions]
    return emit("rotary", args, {"theta": theta, "offset": offset, "layout": layout})


def causal_mask(x: Tensor, offset: int | None = None) -> Tensor:
    """Scores ``(..., S, T)`` with key ``j > i + offset`` set to ``-inf`` for query ``i``.

    The default ``offset`` is ``T - S`` (the queries are the last ``S`` of ``T`` positions).
    """
    return emit("causal_mask", [x], {"offset": offset})
