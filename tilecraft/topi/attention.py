"""Transformer building blocks: rotary position embedding, causal masking and attention."""

from __future__ import annotations

import math
from collections.abc import Callable

from ..errors import TilecraftError
from ..ir import Expr, ExprLike, as_expr, const
from ..ir import op as irop
from ..te import Tensor, compute, min_value, reduce_axis
from ..te import max as te_max
from ..te import sum as te_sum
from ._util import add, const_int, floordiv, normalize_axis, sub
from .nn import acc_dtype, matmul, softmax


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
    and Select), the four softmax stages and ``name`` (matmul).
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


EXP_FLOOR = -80.0
"""Argument of the exponential of a key the causal mask hides: ``exp(-80)`` (1.8e-35) is a
normal float32, off the vector exp's slow path, and negligible next to the row's largest
weight, 1."""


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    causal: bool = False,
    scale: float | None = None,
    name: str = "attention",
) -> Tensor:
    """``softmax(q @ k^T * scale) @ v`` (causal: masked as :func:`causal_attention`).

    The weighted sum is normalized last: ``(exp(s - max) @ v) * (1 / sum(exp(s - max)))``,
    ``S x Dv`` divisions instead of ``S x T``, and the matmul reads the exponentials as they
    are. Stages: ``name_scores`` (matmul), ``name_masked`` (scale, and the causal Select),
    ``name_softmax_maxelem``, with a causal mask ``name_softmax_arg`` (the exponentials'
    arguments, :data:`EXP_FLOOR` where masked), ``name_softmax_exp``, with a causal mask
    ``name_softmax_weight`` (``exp * select(j <= i + T - S, 1, 0)``: a hidden key weighs
    exactly 0, so a schedule may skip the keys hidden from a whole block of queries and get
    the same bits), ``name_softmax_expsum`` (in the accumulation dtype), ``name_weighted``
    (the matmul, accumulated in that dtype) and ``name`` (the normalization, in ``q``'s
    dtype). ``q`` is ``(..., S, D)``, ``k`` and ``v`` ``(..., T, D)`` and ``(..., T, Dv)``;
    ``scale`` defaults to ``1 / sqrt(D)``.
    """
    if q.dtype != k.dtype or q.dtype != v.dtype:
        raise TilecraftError("attention: q, k, v must share a dtype")
    scale = _default_scale("attention", q, scale)
    scores = matmul(q, k, transpose_b=True, name=f"{name}_scores")
    shift = sub(k.shape[-2], q.shape[-2])
    neg = min_value(q.dtype)

    def keep(idx: tuple[Expr, ...]) -> Expr:
        return idx[-1] <= add(idx[-2], shift)

    def mask(*idx: Expr) -> Expr:
        # the condition selects between constants, not loads: a vectorized loop then reads
        # the scores unconditionally instead of gathering them under a mask
        scaled = scores[idx] * scale
        return scaled + irop.select(keep(idx), as_expr(0.0, q.dtype), neg) if causal else scaled

    masked = compute(scores.shape, mask, name=f"{name}_masked")
    acc = acc_dtype(q)
    row = scores.shape[:-1]
    j = reduce_axis(scores.shape[-1], name="j")

    def row_max(*i: Expr) -> Expr:
        at = (*i, j)
        return te_max(masked[at], axis=j)  # type: ignore[no-any-return]

    mx = compute(row, row_max, name=f"{name}_softmax_maxelem")

    def shifted(*idx: Expr) -> Expr:
        diff = irop.cast(masked[idx] - mx[idx[:-1]], acc)
        if not causal:
            return diff
        # a masked key gets exp(-80) (< 2e-35 where the row's largest weight is 1), not
        # exp(-inf): vector exp takes a slow path for -inf, and the condition lives in this
        # stage, apart from the call (a loop with both is not vectorized)
        return irop.max(diff, irop.select(keep(idx), min_value(acc), as_expr(EXP_FLOOR, acc)))

    arg = compute(scores.shape, shifted, name=f"{name}_softmax_arg") if causal else None

    def exp(*idx: Expr) -> Expr:
        value = arg[idx] if arg is not None else shifted(*idx)
        return irop.cast(irop.exp(value), q.dtype)

    ex = exps = compute(scores.shape, exp, name=f"{name}_softmax_exp")
    if causal:
        # a hidden key weighs exactly 0 (exp(-80) * 0), so the sums need not visit it: the
        # CPU rule skips the keys hidden from a whole query block. A stage of its own: the
        # factor in the exp loop would keep it scalar, in the weighted sum it costs a
        # compare per product
        one, zero = as_expr(1.0, q.dtype), as_expr(0.0, q.dtype)
        ex = compute(
            scores.shape,
            lambda *idx: exps[idx] * irop.select(keep(idx), one, zero),
            name=f"{name}_softmax_weight",
        )
    j2 = reduce_axis(scores.shape[-1], name="j")

    def row_sum(*i: Expr) -> Expr:
        at = (*i, j2)
        return te_sum(irop.cast(ex[at], acc), axis=j2)  # type: ignore[no-any-return]

    total = compute(row, row_sum, name=f"{name}_softmax_expsum")
    weighted = matmul(ex, v, name=f"{name}_weighted", out_dtype=acc)

    def norm(*idx: Expr) -> Expr:
        return irop.cast(weighted[idx] * (as_expr(1.0, acc) / total[idx[:-1]]), q.dtype)

    return compute(weighted.shape, norm, name=name)  # type: ignore[no-any-return]


def _default_scale(what: str, q: Tensor, scale: float | None) -> float:
    """``scale``, or ``1 / sqrt(D)`` for a static head size ``D``."""
    if scale is not None:
        return scale
    dim = const_int(q.shape[-1])
    if dim is None:
        raise TilecraftError(f"{what}: pass scale= when the head size is symbolic")
    return 1.0 / math.sqrt(dim)


def rotary(
    x: Tensor,
    positions: Tensor | None = None,
    offset: ExprLike = 0,
    theta: float = 10000.0,
    seq_axis: int = -2,
    name: str = "T_rotary",
) -> Tensor:
    """Llama-style rotary embedding (half rotation) of ``x`` at explicit positions.

    ``out[.., s, .., j] = x * cos(p * f_j) + rotate_half(x) * sin(p * f_j)`` with
    ``f_j = theta^(-2 (j mod D/2) / D)`` over the last axis (``D``, even) and the position ``p``
    of token ``s`` (axis ``seq_axis``): ``positions[s]`` (``positions`` of shape ``(S,)``) or
    ``positions[b, s]`` (shape ``(B, S)``, ``b`` the index on axis 0), else ``s + offset``.
    The angles are computed in the kernel, in ``x``'s dtype; no tables are read.

    Parameters
    ----------
    x
        Floating-point tensor of rank >= 2; the last axis is the head dimension.
    positions
        Integer positions of the tokens, or None for ``s + offset``.
    offset
        Position of token 0 when ``positions`` is None (an int or an int expression).
    theta
        Base of the frequencies.
    seq_axis
        The token axis of ``x`` (not the last one).
    name
        Stage name.

    Returns
    -------
    Tensor
        Same shape and dtype as ``x``.
    """
    if x.ndim < 2 or not x.dtype.is_float:
        raise TilecraftError(f"rotary: x needs a floating-point rank >= 2 tensor, got {x.ndim}-d")
    sa = normalize_axis(seq_axis, x.ndim, "seq_axis")
    if sa == x.ndim - 1:
        raise TilecraftError("rotary: the token axis cannot be the head-dimension axis")
    d = const_int(x.shape[-1])
    if d is None or d % 2:
        raise TilecraftError(f"rotary: the head dimension must be static and even, got {d}")
    pos_of = _position_fn(x, positions, offset, sa)
    half = d // 2
    step = const(-2.0 * math.log(theta) / d, x.dtype)

    def body(*idx: Expr) -> Expr:
        j = idx[-1]
        angle = irop.cast(pos_of(idx), x.dtype) * irop.exp(irop.cast(j % half, x.dtype) * step)
        lead = idx[:-1]
        hi, lo = (*lead, j + half), (*lead, j - half)
        partner = irop.select(j < half, -x[hi], x[lo])
        return x[idx] * irop.cos(angle) + partner * irop.sin(angle)

    return compute(x.shape, body, name=name)  # type: ignore[no-any-return]


def _position_fn(
    x: Tensor, positions: Tensor | None, offset: ExprLike, sa: int
) -> Callable[[tuple[Expr, ...]], Expr]:
    """The position of the token at index ``idx`` of ``x`` (see :func:`rotary`)."""
    if positions is None:
        off = as_expr(offset)
        if not off.dtype.is_integer:
            raise TilecraftError(f"rotary: offset must be an integer, got {off.dtype}")
        return lambda idx: add(idx[sa], off)
    if not positions.dtype.is_integer:
        raise TilecraftError(f"rotary: positions must be integers, got {positions.dtype}")
    if positions.ndim == 1:
        _check_extent("rotary: positions", positions.shape[0], x.shape[sa])
        return lambda idx: positions[(idx[sa],)]
    if positions.ndim == 2 and sa != 0:
        _check_extent("rotary: positions", positions.shape[0], x.shape[0])
        _check_extent("rotary: positions", positions.shape[1], x.shape[sa])
        return lambda idx: positions[idx[0], idx[sa]]
    raise TilecraftError(
        f"rotary: positions must be (S,) or (B, S) with the batch on axis 0, got rank "
        f"{positions.ndim} for token axis {sa}"
    )


def _check_extent(what: str, got: Expr, want: Expr) -> None:
    g, w = const_int(got), const_int(want)
    if g is not None and w is not None and g != w:
        raise TilecraftError(f"{what}: extent {g} does not match the {w} tokens of x")


def causal_mask(
    x: Tensor, offset: ExprLike | None = None, value: float | None = None, name: str = "T_causal"
) -> Tensor:
    """Keep ``x[.., i, j]`` where key ``j <= i + offset``; elsewhere ``value``.

    ``x`` holds attention scores ``(..., S, T)`` of ``S`` queries against ``T`` keys. The
    default ``offset`` is ``T - S``: the queries are the last ``S`` of the ``T`` positions
    (bottom-right alignment, as with a KV cache of ``T - S`` entries before the new tokens).
    ``value`` defaults to the lowest value of the dtype (``-inf`` for floats), so a softmax
    gives masked keys weight 0.

    Raises
    ------
    TilecraftError
        When the extents and offset are static and query 0 would see no key (``offset < 0``).
    """
    if x.ndim < 2:
        raise TilecraftError(f"causal_mask: scores need rank >= 2, got {x.ndim}")
    off = sub(x.shape[-1], x.shape[-2]) if offset is None else as_expr(offset)
    c = const_int(off)
    if c is not None and c < 0:
        raise TilecraftError(
            f"causal_mask: offset {c} leaves query 0 with no key (fewer keys than queries?)"
        )
    fill = min_value(x.dtype) if value is None else const(value, x.dtype)

    def body(*idx: Expr) -> Expr:
        return irop.select(idx[-1] <= add(idx[-2], off), x[idx], fill)

    return compute(x.shape, body, name=name)  # type: ignore[no-any-return]
