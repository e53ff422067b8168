"""``index_put``: values written (or added) into a tensor at positions given per axis.

``x`` is indexed along ``axes`` by index tensors of one common shape ``I``; ``values`` has
shape ``I + rest``, ``rest`` the extents of the other axes of ``x`` in order. Each output
element looks through every index position for the ones naming it (a reduction over ``I``),
so the cost is ``numel(x) * numel(I)``: right for the small index sets of models (fold,
masked updates), not for large scatters.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import TilecraftError
from ..ir import Expr, const
from ..ir import op as irop
from ..te import Tensor, compute, reduce_axis
from ..te import max as te_max
from ..te import sum as te_sum


def index_put(
    x: Tensor,
    values: Tensor,
    indices: Sequence[Tensor],
    axes: Sequence[int],
    accumulate: bool = False,
    name: str = "T_index_put",
) -> Tensor:
    """``x`` with ``values`` put at ``x[..., indices[0], ..., indices[1], ...]`` (per ``axes``).

    With ``accumulate`` every value naming a position is added to it; otherwise, where
    several index positions name the same element, the last one (row-major over ``I``) wins.
    Negative indices count from the end of their axis.
    """
    if not indices or len(indices) != len(axes) or len(set(axes)) != len(axes):
        raise TilecraftError("index_put: needs one index tensor per distinct axis")
    ishape = indices[0].shape
    rest = [d for d in range(x.ndim) if d not in axes]
    if values.ndim != len(ishape) + len(rest):
        raise TilecraftError(f"index_put: values need rank {len(ishape) + len(rest)}")
    rs = [reduce_axis(e, f"ri{d}") for d, e in enumerate(ishape)]

    def names(idx: Sequence[Expr]) -> Expr:
        hit: Expr | None = None
        for t, a in zip(indices, axes, strict=True):
            i = irop.cast(t[tuple(rs)], "int64")
            n = irop.cast(x.shape[a], "int64")
            i = irop.select(i < const(0, "int64"), i + n, i)
            ok = i.eq(irop.cast(idx[a], "int64"))
            hit = ok if hit is None else hit & ok
        assert hit is not None
        return hit

    def keep(idx: Sequence[Expr]) -> list[Expr]:
        return [idx[d] for d in rest]

    if accumulate:

        def add(*idx: Expr) -> Expr:
            key = (*rs, *keep(idx))
            v = values[key]
            zero = const(0, x.dtype)
            total: Expr = te_sum(irop.select(names(idx), irop.cast(v, x.dtype), zero), axis=rs)
            return total

        added = compute(x.shape, add, name=f"{name}_sum")
        return compute(x.shape, lambda *i: x[i] + added[i], name=name)  # type: ignore[no-any-return]

    def last(*idx: Expr) -> Expr:
        flat: Expr = const(0, "int64")
        for r, e in zip(rs, ishape, strict=True):
            flat = flat * irop.cast(e, "int64") + irop.cast(r, "int64")
        out: Expr = te_max(irop.select(names(idx), flat, const(-1, "int64")), axis=rs)
        return out

    winner = compute(x.shape, last, name=f"{name}_last")

    def write(*idx: Expr) -> Expr:
        k = irop.max(winner[idx], const(0, "int64"))
        at: list[Expr] = []
        for e in reversed(ishape):
            ext = irop.cast(e, "int64")
            at.insert(0, irop.cast(k % ext, e.dtype))
            k = k // ext
        key = (*at, *keep(idx))
        v = irop.cast(values[key], x.dtype)
        return irop.select(winner[idx] >= const(0, "int64"), v, x[idx])

    return compute(x.shape, write, name=name)  # type: ignore[no-any-return]
