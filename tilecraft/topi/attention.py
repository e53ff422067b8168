"""Transformer building blocks: rotary position embedding and causal attention."""

from __future__ import annotations

import math

from ..errors import TilecraftError
from ..ir import Expr, ExprLike, as_expr
from ..ir import op as irop
from ..te import Tensor, compute, min_value
from ._util import add, const_int, floordiv, sub
from .nn import matmul, softmax


def rotary_embedding(
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    offset: ExprLike = 0,
    name: str = "T_rotary",
) -> Tensor:
    """Llama-style rotary embedding (half rotation) of ``x``: ``(..., S, D)``.

    ``out = x * cos[p] + rotate_half(x) * sin[p]`` with ``p = s + offset`` and
    ``rotate_half(x) = concat(-x[..., D/2:], x[..., :D/2])``. ``cos`` and ``sin`` are ``(P,
    D)`` tables with ``P >= S + offset``; ``offset`` (an int or an int32 Var, e.g. the KV-cache
    length) becomes a scalar parameter of the PrimFunc when symbolic.
    """
    if x.ndim < 2 or cos.ndim != 2 or sin.ndim != 2:
        raise TilecraftError("rotary_embedding: x needs rank >= 2 and cos/sin rank 2")
    d = x.shape[-1]
    cd = const_int(d)
    if cd is not None and cd % 2 != 0:
        raise TilecraftError(f"rotary_embedding: head dimension {cd} is odd")
    half = floordiv(d, 2)
    off = as_expr(offset)

    def body(*idx: Expr) -> Expr:
        s, j = idx[-2], idx[-1]
        pos = add(s, off)
        lead = idx[:-1]
        hi, lo = (*lead, add(j, half)), (*lead, sub(j, half))
        partner = irop.select(j < half, -x[hi], x[lo])
        return x[idx] * cos[pos, j] + partner * sin[pos, j]

    return compute(x.shape, body, name=name)  # type: ignore[no-any-return]


def causal_attention(
    q: Tensor, k: Tensor, v: Tensor, scale: float | None = None, name: str = "attention"
) -> Tensor:
    """``softmax(mask(q @ k^T * scale)) @ v`` with a causal mask.

    ``q`` is ``(..., S, D)``, ``k`` and ``v`` ``(..., T, D)`` with ``T >= S``: query ``i``
    (the last ``S`` positions of ``T``) attends to keys ``j <= i + T - S``. ``scale``
    defaults to ``1 / sqrt(D)``. Stages: ``name_scores`` (matmul), ``name_masked`` (scale
    and Select), the three softmax stages and ``name`` (matmul).
    """
    if q.dtype != k.dtype or q.dtype != v.dtype:
        raise TilecraftError("causal_attention: q, k, v must share a dtype")
    dim = const_int(q.shape[-1])
    if scale is None:
        if dim is None:
            raise TilecraftError("causal_attention: pass scale= when the head size is symbolic")
        scale = 1.0 / math.sqrt(dim)
    scores = matmul(q, k, transpose_b=True, name=f"{name}_scores")
    shift = sub(k.shape[-2], q.shape[-2])
    neg = min_value(q.dtype)

    def mask(*idx: Expr) -> Expr:
        i, j = idx[-2], idx[-1]
        return irop.select(j <= add(i, shift), scores[idx] * scale, neg)

    masked = compute(scores.shape, mask, name=f"{name}_masked")
    probs = softmax(masked, axis=-1, name=f"{name}_softmax")
    return matmul(probs, v, name=name)
