"""Functional ops built from several graph operators: constants, attention, batch norm."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from ...graph import Binding, Constant, TensorType, TensorVar
from ...ir import dtype as to_dtype
from .core import FrontendError, Tensor, builder, emit


def constant(value: ArrayLike, dtype: str = "float32") -> Tensor:
    """A tensor known at export time (``value`` converted to ``dtype``; a scalar is 0-d)."""
    dt = to_dtype(dtype)
    arr = np.asarray(value, dtype=np.dtype(dt.numpy_name()))
    b = builder()
    t = TensorType(arr.shape, dt)
    var = TensorVar(b.fresh("const"), t)
    b.bindings.append(Binding(var, Constant(t, arr)))
    return Tensor(var)


def _static(what: str, value: object) -> int:
    if not isinstance(value, int):
        raise FrontendError(f"scaled_dot_product_attention: {what} must be static, got {value}")
    return value


def _check_qkv(q: Tensor, k: Tensor, v: Tensor) -> tuple[int, int]:
    """(query heads, key/value heads) after checking ranks, heads and head dims."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.ndim != 4:
            raise FrontendError(
                f"scaled_dot_product_attention: {name} must be (batch, heads, seq, head_dim), "
                f"got {t!r}"
            )
    hq = _static("the number of query heads", q.shape[1])
    hkv = _static("the number of key/value heads", k.shape[1])
    if v.shape[1] != hkv or (isinstance(k.shape[2], int) and v.shape[2] != k.shape[2]):
        raise FrontendError(
            f"scaled_dot_product_attention: k {k!r} and v {v!r} need the same heads and keys"
        )
    if hkv == 0 or hq % hkv:
        raise FrontendError(
            f"scaled_dot_product_attention: {hq} query heads are not a multiple of "
            f"{hkv} key/value heads"
        )
    if isinstance(q.shape[3], int) and q.shape[3] != k.shape[3]:
        raise FrontendError(
            f"scaled_dot_product_attention: q head_dim {q.shape[3]} != k head_dim {k.shape[3]}"
        )
    return hq, hkv


def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, causal: bool = False, scale: float | None = None
) -> Tensor:
    """``softmax(q @ k^T * scale [+ causal mask]) @ v`` on (batch, heads, seq, head_dim).

    ``q`` is ``(B, Hq, S, D)``, ``k`` ``(B, Hkv, T, D)`` and ``v`` ``(B, Hkv, T, Dv)``:
    ``T`` may differ from ``S`` (keys of a KV cache plus the new tokens), and grouped-query
    attention shares each key/value head among ``Hq / Hkv`` consecutive query heads (``Hq``
    a multiple of ``Hkv``). With ``causal`` the queries are the last ``S`` of the ``T``
    positions (:func:`causal_mask`). ``scale`` defaults to ``1 / sqrt(D)``.

    Traced as separate graph operators, so each becomes a kernel the default rules know:
    for ``G = Hq / Hkv > 1`` a free reshape of ``q`` to ``(B, Hkv, G, S, D)`` (and ``k``,
    ``v`` to ``(B, Hkv, 1, T, .)``) makes the scores a batched matmul with ``G * S`` rows
    per key/value head, with no copy of ``k`` per query head; then the scale, the mask, the
    softmax, the matmul with ``v`` and the reshape back to ``(B, Hq, S, Dv)``.
    """
    hq, hkv = _check_qkv(q, k, v)
    b, _, s, d = q.shape
    t, dv = k.shape[2], v.shape[3]
    if scale is None:
        scale = 1.0 / math.sqrt(_static("head_dim (or pass scale=)", d))
    g = hq // hkv
    if g > 1:
        q = q.reshape(b, hkv, g, s, d)
        k = k.reshape(b, hkv, 1, t, d)
        v = v.reshape(b, hkv, 1, t, dv)
    scores = emit("matmul", [q, k], {"transpose_b": True})
    scores = scores * constant(scale, q.dtype)
    if causal:
        scores = emit("causal_mask", [scores], {"offset": None})
    out = emit("matmul", [emit("softmax", [scores], {"axis": -1}), v])
    return out.reshape(b, hq, s, dv) if g > 1 else out


def batch_norm(
    x: Tensor,
    weight: Tensor,
    bias: Tensor,
    running_mean: Tensor,
    running_var: Tensor,
    eps: float = 1e-5,
    axis: int = 1,
) -> Tensor:
    """Inference-mode batch normalization over ``axis`` with per-channel statistics.

    ``x * s + (bias - running_mean * s)`` with ``s = weight / sqrt(running_var + eps)``. The
    per-channel ``s`` and shift depend on parameters only: bound with the default pipeline's
    ``params=``, they are computed once at compile time and ``x`` sees one multiply-add.
    """
    if not -x.ndim <= axis < x.ndim:
        raise FrontendError(f"batch_norm: axis {axis} is out of range for {x!r}")
    axis %= x.ndim
    c = x.shape[axis]
    for name, p in (("weight", weight), ("bias", bias), ("mean", running_mean)):
        if p.shape != (c,):
            raise FrontendError(f"batch_norm: {name} must have shape ({c},), got {p!r}")
    if running_var.shape != (c,):
        raise FrontendError(f"batch_norm: running_var must have shape ({c},), got {running_var!r}")
    s = weight * emit("rsqrt", [running_var + constant(eps, x.dtype)])
    shift = bias - running_mean * s
    shape = tuple(c if d == axis else 1 for d in range(x.ndim))
    return x * s.reshape(shape) + shift.reshape(shape)
