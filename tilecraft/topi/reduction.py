"""Reductions over axes with numpy's ``axis``/``keepdims`` semantics."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import TilecraftError
from ..ir import Expr, as_expr
from ..ir import op as irop
from ..te import Reducer, Tensor, compute, reduce_axis
from ..te import argmax as te_argmax
from ..te import argmin as te_argmin
from ..te import max as te_max
from ..te import min as te_min
from ..te import prod as te_prod
from ..te import sum as te_sum
from ._util import const_int, normalize_axes, normalize_axis
from ._util import prod as shape_prod

Axis = int | Sequence[int] | None


def _out_shape(x: Tensor, axes: list[int], keepdims: bool) -> tuple[Expr, ...]:
    shape: list[Expr] = []
    for d, s in enumerate(x.shape):
        if d not in axes:
            shape.append(s)
        elif keepdims:
            shape.append(as_expr(1, s.dtype))
    return tuple(shape)


def _input_index(
    x: Tensor, axes: list[int], keepdims: bool, idx: Sequence[Expr], red: Sequence[Expr]
) -> list[Expr]:
    """Indices into ``x`` for output index ``idx`` and reduction variables ``red``."""
    out, pos, r = [], 0, 0
    for d in range(x.ndim):
        if d in axes:
            out.append(red[r])
            r += 1
            pos += 1 if keepdims else 0
        else:
            out.append(idx[pos])
            pos += 1
    return out


_LOW_PRECISION = ("float16", "bfloat16")


def reduce(
    x: Tensor, reducer: Reducer, axis: Axis, keepdims: bool, name: str, acc: str | None = None
) -> Tensor:
    """Reduce ``x`` with ``reducer`` over ``axis`` (None: all axes), accumulating in ``acc``
    (None: ``x``'s dtype); the result has dtype ``acc``."""
    axes = normalize_axes(axis, x.ndim)
    raxes = [reduce_axis(x.shape[d], name=f"k{n}") for n, d in enumerate(axes)]
    dt = acc or str(x.dtype)
    if not raxes:
        return compute(x.shape, lambda *idx: irop.cast(x[idx], dt), name=name)  # type: ignore[no-any-return]
    shape = _out_shape(x, axes, keepdims)

    def body(*idx: Expr) -> object:
        value = x[tuple(_input_index(x, axes, keepdims, idx, raxes))]
        return reducer(irop.cast(value, dt), axis=raxes)

    return compute(shape, body, name=name)  # type: ignore[no-any-return]


def _accumulated(reducer: Reducer, x: Tensor, axis: Axis, keepdims: bool, name: str) -> Tensor:
    """A sum or product of a float16/bfloat16 ``x``: accumulated in float32 (stage
    ``name_acc``), then rounded to ``x``'s dtype once (stage ``name``)."""
    total = reduce(x, reducer, axis, keepdims, f"{name}_acc", acc="float32")
    return compute(total.shape, lambda *idx: irop.cast(total[idx], x.dtype), name=name)  # type: ignore[no-any-return]


def _reduction(reducer: Reducer, tag: str) -> Callable[..., Tensor]:
    def op(x: Tensor, axis: Axis = None, keepdims: bool = False, name: str = f"T_{tag}") -> Tensor:
        if tag in ("sum", "prod") and str(x.dtype) in _LOW_PRECISION and axis != ():
            return _accumulated(reducer, x, axis, keepdims, name)
        return reduce(x, reducer, axis, keepdims, name)

    op.__name__ = tag
    op.__doc__ = f"""``{tag}`` of ``x`` over ``axis`` (numpy semantics).

    Parameters
    ----------
    x
        Input tensor.
    axis
        An axis, a sequence of axes, or None for all axes (negative axes count from the end).
    keepdims
        Keep reduced axes with extent 1.
    name
        Stage name.

    Returns
    -------
    Tensor
        The reduced tensor (rank 0 when every axis is reduced without keepdims). A sum or
        product of float16/bfloat16 accumulates in float32 and is rounded once at the end.
    """
    return op


sum = _reduction(te_sum, "sum")
prod = _reduction(te_prod, "prod")
max = _reduction(te_max, "max")
min = _reduction(te_min, "min")


def mean(x: Tensor, axis: Axis = None, keepdims: bool = False, name: str = "T_mean") -> Tensor:
    """Arithmetic mean over ``axis`` (a sum stage, then a divide stage named ``name``); the
    sum of float16/bfloat16 accumulates in float32."""
    if not x.dtype.is_float:
        raise TilecraftError(f"mean: needs a floating-point tensor, got {x.dtype}")
    axes = normalize_axes(axis, x.ndim)
    acc = "float32" if str(x.dtype) in _LOW_PRECISION else str(x.dtype)
    total = reduce(x, te_sum, axes, keepdims, f"{name}_sum", acc=acc)
    count = shape_prod([x.shape[d] for d in axes])
    n = const_int(count)
    denom = as_expr(float(n), acc) if n is not None else irop.cast(count, acc)
    return compute(  # type: ignore[no-any-return]
        total.shape, lambda *idx: irop.cast(total[idx] / denom, x.dtype), name=name
    )


def _arg(reducer: Reducer, tag: str) -> Callable[..., Tensor]:
    def op(x: Tensor, axis: int = -1, keepdims: bool = False, name: str = f"T_{tag}") -> Tensor:
        ax = normalize_axis(axis, x.ndim)
        k = reduce_axis(x.shape[ax], name="k")
        shape = _out_shape(x, [ax], keepdims)

        def body(*idx: Expr) -> object:
            return reducer((k, x[tuple(_input_index(x, [ax], keepdims, idx, [k]))]), axis=k)

        index, _ = compute(shape, body, name=name)
        return index  # type: ignore[no-any-return]

    op.__name__ = tag
    op.__doc__ = f"""Index (int32) of the {tag[3:]}imum along ``axis``; the first one on ties.

    As numpy, a NaN counts as the {tag[3:]}imum: the index of the first NaN is returned. The
    stage has two outputs (index and value, buffers ``name`` and ``name_v1``); the returned
    index tensor is the first.
    """
    return op


argmax = _arg(te_argmax, "argmax")
argmin = _arg(te_argmin, "argmin")
