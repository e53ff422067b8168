"""Neural-network operators: matmul, dense, softmax, log_softmax and normalizations."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import TilecraftError
from ..ir import Expr, as_expr
from ..ir import op as irop
from ..te import Tensor, compute, reduce_axis
from ..te import max as te_max
from ..te import sum as te_sum
from ._util import const_int, floordiv, mul, normalize_axes, normalize_axis, prod
from .broadcast import add, broadcast_index, broadcast_shape


def _check_k(what: str, ka: Expr, kb: Expr) -> None:
    ca, cb = const_int(ka), const_int(kb)
    if ca is not None and cb is not None and ca != cb:
        raise TilecraftError(f"{what}: reduction extents differ: {ca} vs {cb}")


def matmul(
    a: Tensor,
    b: Tensor,
    transpose_a: bool = False,
    transpose_b: bool = False,
    name: str = "matmul",
    out_dtype: str | None = None,
) -> Tensor:
    """``a @ b`` over the last two axes, broadcasting leading (batch) axes as numpy does.

    Parameters
    ----------
    a, b
        Tensors of rank >= 2 and one dtype: ``(..., M, K)`` and ``(..., K, N)`` (``(..., K,
        M)`` / ``(..., N, K)`` when transposed).
    transpose_a, transpose_b
        Use the transpose of the last two axes of ``a`` / ``b``.
    name
        Stage name.
    out_dtype
        Dtype of the result and the accumulation (``"float32"`` for fp16 operands on tensor
        cores); each operand is cast to it before the product. None: the operands' dtype.

    Returns
    -------
    Tensor
        ``(*broadcast(batch_a, batch_b), M, N)``, accumulated in ``out_dtype``.
    """
    if a.ndim < 2 or b.ndim < 2:
        raise TilecraftError(f"matmul: operands need rank >= 2, got {a.ndim} and {b.ndim}")
    if a.dtype != b.dtype:
        raise TilecraftError(f"matmul: operand dtypes differ: {a.dtype} vs {b.dtype}")
    m, ka = (a.shape[-1], a.shape[-2]) if transpose_a else (a.shape[-2], a.shape[-1])
    kb, n = (b.shape[-1], b.shape[-2]) if transpose_b else (b.shape[-2], b.shape[-1])
    _check_k("matmul", ka, kb)
    batch = broadcast_shape(a.shape[:-2], b.shape[:-2])
    k = reduce_axis(ka, name="k")
    nb = len(batch)

    def body(*idx: Expr) -> object:
        bi, i, j = idx[:nb], idx[nb], idx[nb + 1]
        ia = [*broadcast_index_prefix(a, batch, bi), *((k, i) if transpose_a else (i, k))]
        ib = [*broadcast_index_prefix(b, batch, bi), *((j, k) if transpose_b else (k, j))]
        x: Expr = a[tuple(ia)]
        y: Expr = b[tuple(ib)]
        if out_dtype is not None and str(out_dtype) != str(a.dtype):
            x, y = irop.cast(x, out_dtype), irop.cast(y, out_dtype)
        return te_sum(x * y, axis=k)

    return compute((*batch, m, n), body, name=name)  # type: ignore[no-any-return]


def broadcast_index_prefix(t: Tensor, batch: Sequence[Expr], bidx: Sequence[Expr]) -> list[Expr]:
    """Batch indices of ``t`` (all axes but the last two) for broadcast batch index ``bidx``."""
    off = len(batch) - (t.ndim - 2)
    out: list[Expr] = []
    for d in range(t.ndim - 2):
        ext = t.shape[d]
        if const_int(ext) == 1 and const_int(batch[off + d]) != 1:
            out.append(as_expr(0, bidx[off + d].dtype))
        else:
            out.append(bidx[off + d])
    return out


def dense(x: Tensor, weight: Tensor, bias: Tensor | None = None, name: str = "dense") -> Tensor:
    """``x @ weight^T + bias``: ``x`` is ``(..., K)``, ``weight`` ``(N, K)``, ``bias`` ``(N,)``.

    With a bias the result is a second stage ``T_add`` over the ``name`` stage.
    """
    if weight.ndim != 2:
        raise TilecraftError(f"dense: weight must have rank 2, got {weight.ndim}")
    if x.dtype != weight.dtype:
        raise TilecraftError(f"dense: dtypes differ: {x.dtype} vs {weight.dtype}")
    _check_k("dense", x.shape[-1], weight.shape[1])
    k = reduce_axis(x.shape[-1], name="k")
    lead = x.ndim - 1

    def body(*idx: Expr) -> object:
        src = (*idx[:lead], k)
        return te_sum(x[src] * weight[idx[lead], k], axis=k)

    out = compute((*x.shape[:-1], weight.shape[0]), body, name=name)
    return out if bias is None else add(out, bias)


def _axis_stats(x: Tensor, axes: list[int]) -> tuple[tuple[Expr, ...], Expr]:
    """Shape with ``axes`` removed and the number of reduced elements."""
    return tuple(s for d, s in enumerate(x.shape) if d not in axes), prod(
        [x.shape[d] for d in axes]
    )


def _split_index(
    x: Tensor, axes: list[int], idx: Sequence[Expr], red: Sequence[Expr]
) -> list[Expr]:
    """Full index of ``x`` from the kept-axes index ``idx`` and reduced indices ``red``."""
    it, rt = iter(idx), iter(red)
    return [next(rt) if d in axes else next(it) for d in range(x.ndim)]


def _kept(x: Tensor, axes: list[int], idx: Sequence[Expr]) -> tuple[Expr, ...]:
    return tuple(i for d, i in enumerate(idx) if d not in axes)


def _reduce_stage(x: Tensor, axes: list[int], f, reducer, name: str) -> Tensor:  # type: ignore[no-untyped-def]
    """``out[kept] = reducer(f(x[full], kept), over axes)``."""
    shape, _ = _axis_stats(x, axes)
    raxes = [reduce_axis(x.shape[d], name=f"k{n}") for n, d in enumerate(axes)]

    def body(*idx: Expr) -> object:
        return reducer(f(x[tuple(_split_index(x, axes, idx, raxes))], idx), axis=raxes)

    return compute(shape, body, name=name)  # type: ignore[no-any-return]


def _as_float(value: Expr, x: Tensor) -> Expr:
    """``value`` (an element count) in the accumulation dtype of ``x``."""
    n = const_int(value)
    return as_expr(float(n), acc_dtype(x)) if n is not None else irop.cast(value, acc_dtype(x))


def acc_dtype(x: Tensor) -> str:
    """The dtype reductions over ``x`` accumulate in: float32 for float16 and bfloat16 (their
    sums lose the small addends once large, and overflow past 65504), else ``x``'s own."""
    dt = str(x.dtype)
    return "float32" if dt in ("float16", "bfloat16") else dt


def _up(v: Expr, x: Tensor) -> Expr:
    """``v`` in the accumulation dtype of ``x``."""
    return irop.cast(v, acc_dtype(x))


def _down(v: Expr, x: Tensor) -> Expr:
    """``v`` back in the dtype of ``x``."""
    return irop.cast(v, x.dtype)


def softmax(x: Tensor, axis: int = -1, name: str = "T_softmax") -> Tensor:
    """``exp(x - max) * (1 / sum(exp(x - max)))`` along ``axis``.

    Four stages (``name`` prefixes them all): ``T_softmax_maxelem`` (max), ``T_softmax_exp``
    (``exp(x - max)``, in the accumulation dtype), ``T_softmax_expsum`` (its sum) and
    ``T_softmax_norm`` (the result). Each exponential is computed once: the sum and the
    result both read ``T_softmax_exp``, which a schedule keeps per row (in cache). The result
    multiplies by the reciprocal of the sum (invariant along the row: the C compiler hoists
    the division out of the row's loop), as PyTorch does.
    """
    ax = normalize_axis(axis, x.ndim)
    mx = _reduce_stage(x, [ax], lambda v, _: v, te_max, f"{name}_maxelem")

    def exp(*idx: Expr) -> Expr:
        return irop.exp(_up(x[idx] - mx[_kept(x, [ax], idx)], x))

    ex = compute(x.shape, exp, name=f"{name}_exp")
    es = _reduce_stage(ex, [ax], lambda v, _: v, te_sum, f"{name}_expsum")

    def norm(*idx: Expr) -> Expr:
        return _down(ex[idx] * (as_expr(1.0, acc_dtype(x)) / es[_kept(x, [ax], idx)]), x)

    return compute(x.shape, norm, name=f"{name}_norm")  # type: ignore[no-any-return]


def log_softmax(x: Tensor, axis: int = -1, name: str = "T_log_softmax") -> Tensor:
    """``x - max - log(sum(exp(x - max)))`` along ``axis`` (stages as in :func:`softmax`)."""
    ax = normalize_axis(axis, x.ndim)
    mx = _reduce_stage(x, [ax], lambda v, _: v, te_max, f"{name}_maxelem")
    es = _reduce_stage(
        x, [ax], lambda v, idx: irop.exp(_up(v - mx[idx], x)), te_sum, f"{name}_expsum"
    )

    def norm(*idx: Expr) -> Expr:
        kept = _kept(x, [ax], idx)
        return _down(_up(x[idx] - mx[kept], x) - irop.log(es[kept]), x)

    return compute(x.shape, norm, name=f"{name}_norm")  # type: ignore[no-any-return]


def _param_index(p: Tensor, x: Tensor, axes: list[int], idx: Sequence[Expr]) -> tuple[Expr, ...]:
    """Index of a per-feature parameter shaped like ``x.shape[axes]`` (or broadcastable)."""
    sub = [idx[d] for d in axes]
    shape = [x.shape[d] for d in axes]
    return tuple(broadcast_index(p, shape, sub))


def layer_norm(
    x: Tensor,
    gamma: Tensor | None,
    beta: Tensor | None,
    axis: int | Sequence[int] = -1,
    eps: float = 1e-5,
    name: str = "T_layer_norm",
) -> Tensor:
    """``(x - mean) / sqrt(var + eps) * gamma + beta`` over ``axis`` (biased variance).

    ``gamma`` and ``beta`` have the shape of the normalized axes (None skips them). Stages:
    ``name_sum`` (sum), ``name_var`` (sum of squared deviations) and ``name``.
    """
    axes = normalize_axes(axis, x.ndim)
    _, count = _axis_stats(x, axes)
    n = _as_float(count, x)
    total = _reduce_stage(x, axes, lambda v, _: _up(v, x), te_sum, f"{name}_sum")

    def dev2(v: Expr, idx: Sequence[Expr]) -> Expr:
        d = _up(v, x) - total[tuple(idx)] / n
        return d * d

    var = _reduce_stage(x, axes, dev2, te_sum, f"{name}_var")

    def body(*idx: Expr) -> Expr:
        kept = _kept(x, axes, idx)
        out = (_up(x[idx], x) - total[kept] / n) * irop.rsqrt(var[kept] / n + eps)
        if gamma is not None:
            out = out * _up(gamma[_param_index(gamma, x, axes, idx)], x)
        if beta is not None:
            out = out + _up(beta[_param_index(beta, x, axes, idx)], x)
        return _down(out, x)

    return compute(x.shape, body, name=name)  # type: ignore[no-any-return]


def rms_norm(
    x: Tensor,
    weight: Tensor | None,
    axis: int | Sequence[int] = -1,
    eps: float = 1e-5,
    name: str = "T_rms_norm",
) -> Tensor:
    """``x / sqrt(mean(x^2) + eps) * weight`` over ``axis`` (stages ``name_sqsum``, ``name``)."""
    axes = normalize_axes(axis, x.ndim)
    _, count = _axis_stats(x, axes)
    n = _as_float(count, x)
    sq = _reduce_stage(x, axes, lambda v, _: _up(v, x) * _up(v, x), te_sum, f"{name}_sqsum")

    def body(*idx: Expr) -> Expr:
        out = _up(x[idx], x) * irop.rsqrt(sq[_kept(x, axes, idx)] / n + eps)
        if weight is not None:
            out = out * _up(weight[_param_index(weight, x, axes, idx)], x)
        return _down(out, x)

    return compute(x.shape, body, name=name)  # type: ignore[no-any-return]


def group_norm(
    x: Tensor,
    gamma: Tensor | None,
    beta: Tensor | None,
    num_groups: int,
    eps: float = 1e-5,
    axis: int = 1,
    name: str = "T_group_norm",
) -> Tensor:
    """Group normalization: channels (``axis``, default 1 as in NCHW) split in ``num_groups``.

    Mean and biased variance are taken over each group's channels and every axis after the
    batch axis 0 other than ``axis``; ``gamma``/``beta`` are per channel, shape ``(C,)``.
    """
    ax = normalize_axis(axis, x.ndim)
    if ax == 0:
        raise TilecraftError("group_norm: the channel axis cannot be the batch axis 0")
    c = x.shape[ax]
    cg = floordiv(c, num_groups)
    if const_int(c) is not None and const_int(c) % num_groups != 0:  # type: ignore[operator]
        raise TilecraftError(f"group_norm: {const_int(c)} channels not divisible by {num_groups}")
    rest = [d for d in range(1, x.ndim) if d != ax]
    count = _as_float(mul(cg, prod([x.shape[d] for d in rest])), x)
    stat_shape = (x.shape[0], as_expr(num_groups, c.dtype))

    def group_sum(f, stage: str) -> Tensor:  # type: ignore[no-untyped-def]
        rc = reduce_axis(cg, name="rc")
        rr = [reduce_axis(x.shape[d], name=f"k{n}") for n, d in enumerate(rest)]

        def body(b: Expr, g: Expr) -> object:
            it = iter(rr)
            full = [b if d == 0 else g * cg + rc if d == ax else next(it) for d in range(x.ndim)]
            return te_sum(f(x[tuple(full)], b, g), axis=[rc, *rr])

        return compute(stat_shape, body, name=stage)  # type: ignore[no-any-return]

    total = group_sum(lambda v, b, g: _up(v, x), f"{name}_sum")

    def dev2(v: Expr, b: Expr, g: Expr) -> Expr:
        d = _up(v, x) - total[b, g] / count
        return d * d

    var = group_sum(dev2, f"{name}_var")

    def body(*idx: Expr) -> Expr:
        b, ch = idx[0], idx[ax]
        g = floordiv(ch, cg)
        out = (_up(x[idx], x) - total[b, g] / count) * irop.rsqrt(var[b, g] / count + eps)
        if gamma is not None:
            out = out * _up(gamma[ch], x)
        if beta is not None:
            out = out + _up(beta[ch], x)
        return _down(out, x)

    return compute(x.shape, body, name=name)  # type: ignore[no-any-return]
