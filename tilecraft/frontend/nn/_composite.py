"""Functional ops built from several graph operators: attention and batch norm."""

from __future__ import annotations

import math
import warnings

import numpy as np

from .core import FrontendError, Tensor, constant, emit


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


class CausalBias:
    """A causal mask given as ``attn_mask`` (torch's ``torch.nn.attention.bias`` variants).

    ``causal_upper_left()`` lets query ``i`` see keys ``j <= i`` (``is_causal=True``);
    ``causal_lower_right()`` aligns the queries with the last of the keys, so query ``i`` of
    ``S`` sees keys ``j <= i + T - S`` (new tokens after a KV cache of ``T - S``).
    """

    def __init__(self, lower_right: bool) -> None:
        self.lower_right = lower_right

    def __repr__(self) -> str:
        return "causal_lower_right()" if self.lower_right else "causal_upper_left()"


def causal_upper_left() -> CausalBias:
    """The ``attn_mask`` of ``is_causal=True``: query ``i`` sees keys ``0..i``."""
    return CausalBias(lower_right=False)


def causal_lower_right() -> CausalBias:
    """An ``attn_mask`` for queries that are the last ``S`` of ``T`` keys (decode, KV cache)."""
    return CausalBias(lower_right=True)


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | CausalBias | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    **deprecated: bool,
) -> Tensor:
    """``softmax(query @ key^T * scale + mask) @ value``, as ``torch.nn.functional``'s.

    Layout and defaults are torch's: ``query`` is ``(B, Hq, S, D)``, ``key``
    ``(B, Hkv, T, D)`` and ``value`` ``(B, Hkv, T, Dv)`` (batch, heads, seq, head_dim);
    the result is ``(B, Hq, S, Dv)``. ``T`` may differ from ``S``.

    Parameters
    ----------
    query, key, value
        The per-head tensors. With ``Hq`` a multiple of ``Hkv`` (grouped-query attention)
        each key/value head serves ``Hq / Hkv`` consecutive query heads, whatever
        ``enable_gqa`` says (accepted for torch's signature).
    attn_mask
        None; a bool tensor broadcastable to ``(B, Hq, S, T)`` (True: the key takes part);
        a float tensor added to the scores; or :func:`causal_lower_right` /
        :func:`causal_upper_left`. A row with every key masked gives the mean of the values
        where torch gives NaN.
    dropout_p
        Must be 0 (inference).
    is_causal
        Mask key ``j > i`` for query ``i`` (upper-left aligned, as torch; see
        :func:`causal_lower_right` for queries at the end of a KV cache).
    scale
        Defaults to ``1 / sqrt(D)``.

    The deprecated keyword ``causal=True`` means ``attn_mask=causal_lower_right()``.
    Traced as separate graph operators, so each becomes a kernel the default rules know:
    for ``G = Hq / Hkv > 1`` a free reshape of ``query`` to ``(B, Hkv, G, S, D)`` makes the
    scores a batched matmul with ``G * S`` rows per key/value head, with no copy of ``key``.
    """
    del enable_gqa
    attn_mask = _deprecated_causal(attn_mask, deprecated)
    if dropout_p != 0.0:
        raise FrontendError(
            f"scaled_dot_product_attention: dropout_p={dropout_p} is training-only; pass 0.0"
        )
    if is_causal and attn_mask is not None:
        raise FrontendError(
            "scaled_dot_product_attention: pass is_causal=True or attn_mask, not both (as torch)"
        )
    if is_causal:
        attn_mask = causal_upper_left()
    return _sdpa(query, key, value, attn_mask, scale)


def _deprecated_causal(
    attn_mask: Tensor | CausalBias | None, deprecated: dict[str, bool]
) -> Tensor | CausalBias | None:
    """``attn_mask`` with the deprecated ``causal=`` keyword folded in."""
    unknown = sorted(set(deprecated) - {"causal"})
    if unknown:
        raise FrontendError(
            f"scaled_dot_product_attention: unknown argument {unknown[0]!r}; the parameters "
            "are (query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)"
        )
    if "causal" not in deprecated:
        return attn_mask
    warnings.warn(
        "scaled_dot_product_attention(causal=...) is deprecated: pass is_causal=True "
        "(upper-left aligned, as torch) or attn_mask=nn.functional.causal_lower_right() "
        "(queries after a KV cache, what causal=True meant)",
        DeprecationWarning,
        stacklevel=3,
    )
    if deprecated["causal"]:
        if attn_mask is not None:
            raise FrontendError("scaled_dot_product_attention: pass causal=True or attn_mask")
        return causal_lower_right()
    return attn_mask


def _sdpa(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | CausalBias | None, scale: float | None
) -> Tensor:
    """The traced attention (arguments checked by the caller)."""
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
    scores = emit("matmul", [q, k], {"transpose_b": True}) * scale
    if isinstance(mask, CausalBias):
        scores = emit("causal_mask", [scores], {"offset": None if mask.lower_right else 0})
    elif mask is not None:
        scores = _apply_mask(scores, mask, (b, hkv, g, s, t) if g > 1 else None)
    out = emit("matmul", [emit("softmax", [scores], {"axis": -1}), v])
    return out.reshape(b, hq, s, dv) if g > 1 else out


def _apply_mask(scores: Tensor, mask: Tensor, grouped: tuple[object, ...] | None) -> Tensor:
    """``scores`` with a bool (keep where True) or additive float mask applied."""
    if not isinstance(mask, Tensor):
        raise FrontendError(
            "scaled_dot_product_attention: attn_mask must be an nn tensor, "
            f"causal_lower_right() or causal_upper_left(), got {type(mask).__name__}"
        )
    if grouped is not None:  # (B|1, Hq|1, S|1, T|1) -> the grouped (B, Hkv, G, S, T) scores
        mask = _group_mask(mask, grouped)
    if mask.dtype == "bool":
        low = float(np.finfo(np.dtype(scores.dtype if scores.dtype != "bfloat16" else "f4")).min)
        return emit("where", [mask, scores, constant(low, scores.dtype)])
    if mask.dtype != scores.dtype:
        raise FrontendError(
            f"scaled_dot_product_attention: attn_mask {mask!r} must be bool or {scores.dtype} "
            f"like the scores; convert it with attn_mask.astype({scores.dtype!r})"
        )
    return scores + mask


def _group_mask(mask: Tensor, grouped: tuple[object, ...]) -> Tensor:
    """A ``(.., Hq, S, T)`` mask reshaped to the ``(B, Hkv, G, S, T)`` grouped scores."""
    _, hkv, g, s, t = grouped
    dims = (1,) * (4 - mask.ndim) + mask.shape
    if len(dims) != 4:
        raise FrontendError(
            f"scaled_dot_product_attention: attn_mask {mask!r} must broadcast to "
            f"(batch, heads, {s}, {t})"
        )
    heads = (1, 1) if dims[1] == 1 else (hkv, g)
    return mask.reshape(dims[0], *heads, dims[2], dims[3])


def attention(
    q: Tensor, k: Tensor, v: Tensor, causal: bool = True, scale: float | None = None
) -> Tensor:
    """Deprecated: use :func:`scaled_dot_product_attention` (torch's layout and defaults).

    This older form takes (batch, seq, heads, head_dim) tensors with equal query and
    key/value heads, defaults to a causal mask aligned with the last keys
    (``attn_mask=causal_lower_right()`` there) and traces the graph's ``attention`` op.
    """
    warnings.warn(
        "nn.functional.attention is deprecated: use nn.functional.scaled_dot_product_attention "
        "on (batch, heads, seq, head_dim) tensors (x.permute_dims(0, 2, 1, 3)); its is_causal "
        "defaults to False, and attn_mask=nn.functional.causal_lower_right() is this "
        "function's causal=True",
        DeprecationWarning,
        stacklevel=2,
    )
    return emit("attention", [q, k, v], {"causal": causal, "scale": scale})


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
