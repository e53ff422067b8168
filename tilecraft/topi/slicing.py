"""Strided slices and explicit broadcasts (numpy ``x[a:b:s]`` and ``np.broadcast_to``)."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import TilecraftError
from ..ir import Expr, ExprLike, as_expr
from ..te import Tensor, as_shape, compute
from ._util import add, const_int, mul, normalize_axis
from .broadcast import broadcast_index


def strided_slice(
    x: Tensor,
    axes: Sequence[int],
    begin: Sequence[ExprLike],
    extent: Sequence[ExprLike],
    strides: Sequence[int],
    name: str = "T_strided_slice",
) -> Tensor:
    """``x`` sliced along ``axes``: output index ``i`` reads ``begin + i * stride``.

    Parameters
    ----------
    x
        Input tensor.
    axes
        The sliced axes (negative counts from the end); other axes are kept whole.
    begin, extent, strides
        Per sliced axis: first source index (already in range), number of elements taken
        and step (non-zero; negative walks backwards). The caller resolves numpy's clamping
        of out-of-range bounds into these.
    name
        Stage name.

    Returns
    -------
    Tensor
        ``x``'s shape with each sliced axis replaced by its ``extent``.
    """
    if not len(axes) == len(begin) == len(extent) == len(strides):
        raise TilecraftError("strided_slice: axes, begin, extent and strides differ in length")
    plan: dict[int, tuple[Expr, int]] = {}
    shape = list(x.shape)
    for a, b, n, s in zip(axes, begin, extent, strides, strict=True):
        ax = normalize_axis(a, x.ndim)
        if s == 0 or ax in plan:
            raise TilecraftError(f"strided_slice: bad step {s} or repeated axis {a}")
        plan[ax] = (as_expr(b), s)
        shape[ax] = as_expr(n)

    def body(*idx: Expr) -> Expr:
        src: list[Expr] = []
        for d, i in enumerate(idx):
            if d in plan:
                b, s = plan[d]
                src.append(add(b, mul(i, s)) if s != 1 else add(b, i))
            else:
                src.append(i)
        return x[tuple(src)]

    return compute(shape, body, name=name)  # type: ignore[no-any-return]


def broadcast_to(x: Tensor, shape: Sequence[ExprLike], name: str = "T_broadcast_to") -> Tensor:
    """``x`` broadcast to ``shape`` (numpy ``broadcast_to``: trailing axes align, 1 stretches).

    Parameters
    ----------
    x
        Input tensor of rank at most ``len(shape)``.
    shape
        Target extents; each input extent must be 1 or the target's.
    name
        Stage name.

    Returns
    -------
    Tensor
        A tensor of ``shape`` and ``x``'s dtype.
    """
    out = as_shape(shape)
    if x.ndim > len(out):
        raise TilecraftError(f"broadcast_to: rank {x.ndim} input, rank {len(out)} target")
    for e, t in zip(reversed(x.shape), reversed(out), strict=False):
        ce, ct = const_int(e), const_int(t)
        if ce is not None and ct is not None and ce not in (1, ct):
            raise TilecraftError(f"broadcast_to: extent {ce} does not broadcast to {ct}")
    return compute(  # type: ignore[no-any-return]
        out, lambda *idx: x[tuple(broadcast_index(x, out, idx))], name=name
    )
