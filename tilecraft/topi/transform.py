"""Data movement: transpose, reshape, concat, split, take/embedding, pad."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import TilecraftError
from ..ir import Expr, ExprLike, as_expr
from ..ir import op as irop
from ..te import Tensor, as_shape, compute
from ._util import add, const_int, floordiv, floormod, mul, normalize_axis, prod, sub


def transpose(x: Tensor, axes: Sequence[int] | None = None, name: str = "T_transpose") -> Tensor:
    """Permute axes: output axis ``d`` is input axis ``axes[d]`` (default: reversed)."""
    perm = (
        list(reversed(range(x.ndim))) if axes is None else [normalize_axis(a, x.ndim) for a in axes]
    )
    if sorted(perm) != list(range(x.ndim)):
        raise TilecraftError(f"transpose: {list(axes or [])} is not a permutation of {x.ndim} axes")
    shape = [x.shape[p] for p in perm]

    def body(*idx: Expr) -> Expr:
        src: list[Expr] = [as_expr(0)] * x.ndim
        for d, p in enumerate(perm):
            src[p] = idx[d]
        return x[tuple(src)]

    return compute(shape, body, name=name)  # type: ignore[no-any-return]


permute = transpose


def _resolve_shape(x: Tensor, newshape: Sequence[ExprLike | str]) -> list[Expr]:
    items = list(newshape)
    holes = [n for n, s in enumerate(items) if isinstance(s, int) and s == -1]
    if len(holes) > 1:
        raise TilecraftError(f"reshape: at most one -1 in {items!r}")
    known = [s for n, s in enumerate(items) if n not in holes]
    shape = list(as_shape(known))
    if holes:
        total, part = prod(x.shape), prod(shape)
        ct, cp = const_int(total), const_int(part)
        if ct is not None and cp is not None and (cp == 0 or ct % cp != 0):
            raise TilecraftError(f"reshape: cannot infer -1 reshaping {ct} elements to {items!r}")
        shape.insert(holes[0], floordiv(total, part))
    ct, cn = const_int(prod(x.shape)), const_int(prod(shape))
    if ct is not None and cn is not None and ct != cn:
        raise TilecraftError(f"reshape: {ct} elements cannot take the shape {items!r}")
    return shape


def _unflatten(flat: Expr, shape: Sequence[Expr]) -> list[Expr]:
    """Row-major multi-index of linear index ``flat`` in ``shape``."""
    out: list[Expr] = []
    stride: Expr = as_expr(1, flat.dtype)
    for d in reversed(range(len(shape))):
        q = floordiv(flat, stride)
        out.append(q if d == 0 else floormod(q, shape[d]))
        stride = mul(stride, shape[d])
    return list(reversed(out))


def reshape(x: Tensor, newshape: Sequence[ExprLike | str], name: str = "T_reshape") -> Tensor:
    """Row-major reshape (numpy ``reshape``); one entry may be -1."""
    shape = _resolve_shape(x, newshape)

    def body(*idx: Expr) -> Expr:
        flat: Expr = as_expr(0)
        for i, s in zip(idx, shape, strict=True):
            flat = add(mul(flat, s), i)
        return x[tuple(_unflatten(flat, x.shape))]

    return compute(shape, body, name=name)  # type: ignore[no-any-return]


def concat(tensors: Sequence[Tensor], axis: int = 0, name: str = "T_concat") -> Tensor:
    """Join tensors along ``axis`` (numpy ``concatenate``); other extents must agree."""
    ts = list(tensors)
    if not ts:
        raise TilecraftError("concat: needs at least one tensor")
    ax = normalize_axis(axis, ts[0].ndim)
    for t in ts:
        if t.ndim != ts[0].ndim or t.dtype != ts[0].dtype:
            raise TilecraftError("concat: tensors must share rank and dtype")
    offsets: list[Expr] = [as_expr(0)]
    for t in ts:
        offsets.append(add(offsets[-1], t.shape[ax]))
    shape = [*ts[0].shape[:ax], offsets[-1], *ts[0].shape[ax + 1 :]]

    def body(*idx: Expr) -> Expr:
        def load(n: int) -> Expr:
            src = (*idx[:ax], sub(idx[ax], offsets[n]), *idx[ax + 1 :])
            return ts[n][src]

        out = load(len(ts) - 1)
        for n in reversed(range(len(ts) - 1)):
            out = irop.select(idx[ax] < offsets[n + 1], load(n), out)
        return out

    return compute(shape, body, name=name)  # type: ignore[no-any-return]


def split(
    x: Tensor, indices_or_sections: int | Sequence[int], axis: int = 0, name: str = "T_split"
) -> list[Tensor]:
    """numpy ``split``: ``n`` equal sections or cut points; stages ``name``, ``name_1``, ..."""
    ax = normalize_axis(axis, x.ndim)
    ext = x.shape[ax]
    if isinstance(indices_or_sections, int):
        n = indices_or_sections
        size = const_int(ext)
        if size is not None and (n <= 0 or size % n != 0):
            raise TilecraftError(f"split: extent {size} does not divide into {n} sections")
        step = floordiv(ext, n)
        starts = [mul(step, s) for s in range(n)]
        ends = [*starts[1:], ext]
    else:
        cuts = list(indices_or_sections)
        starts = [as_expr(0), *(as_expr(c) for c in cuts)]
        ends = [*(as_expr(c) for c in cuts), ext]
    outs = []
    for n, (lo, hi) in enumerate(zip(starts, ends, strict=True)):
        shape = [*x.shape[:ax], sub(hi, lo), *x.shape[ax + 1 :]]
        stage = name if n == 0 else f"{name}_{n}"

        def body(*idx: Expr, lo: Expr = lo) -> Expr:
            src = (*idx[:ax], add(idx[ax], lo), *idx[ax + 1 :])
            return x[src]

        outs.append(compute(shape, body, name=stage))
    return outs


def take(x: Tensor, indices: Tensor, axis: int = 0, name: str = "T_take") -> Tensor:
    """``x`` indexed along ``axis`` by the integer tensor ``indices`` (numpy ``take``).

    Negative indices count from the end; out-of-range indices are clamped into range, so a
    bad index never reads outside the buffer.
    """
    ax = normalize_axis(axis, x.ndim)
    if not indices.dtype.is_integer:
        raise TilecraftError(f"take: indices must be integers, got {indices.dtype}")
    ext = x.shape[ax]
    r = indices.ndim
    shape = [*x.shape[:ax], *indices.shape, *x.shape[ax + 1 :]]

    def body(*idx: Expr) -> Expr:
        raw: Expr = indices[idx[ax : ax + r]]
        if raw.dtype != ext.dtype:
            raw = irop.cast(raw, ext.dtype)
        wrapped = irop.select(raw < 0, raw + ext, raw)
        pos = irop.min(irop.max(wrapped, as_expr(0, ext.dtype)), sub(ext, 1))
        src = (*idx[:ax], pos, *idx[ax + r :])
        return x[src]

    return compute(shape, body, name=name)  # type: ignore[no-any-return]


def embedding(table: Tensor, ids: Tensor, name: str = "T_embedding") -> Tensor:
    """Rows of ``table`` (``(V, D)``) picked by ``ids``: shape ``(*ids.shape, D)``."""
    return take(table, ids, axis=0, name=name)


def pad(
    x: Tensor,
    pad_before: Sequence[int],
    pad_after: Sequence[int] | None = None,
    value: float = 0.0,
    name: str = "T_pad",
) -> Tensor:
    """Constant padding: ``pad_before[d]`` / ``pad_after[d]`` elements around axis ``d``."""
    after = list(pad_after) if pad_after is not None else list(pad_before)
    before = list(pad_before)
    if len(before) != x.ndim or len(after) != x.ndim:
        raise TilecraftError(f"pad: expected {x.ndim} entries, got {before} / {after}")
    shape = [add(add(s, b), a) for s, b, a in zip(x.shape, before, after, strict=True)]

    def body(*idx: Expr) -> Expr:
        conds: list[Expr] = []
        src: list[Expr] = []
        for i, s, b, a in zip(idx, x.shape, before, after, strict=True):
            src.append(sub(i, b))
            if b:
                conds.append(i >= b)
            if a:
                conds.append(i < add(s, b))
        inner = x[tuple(src)]
        if not conds:
            return inner
        ok = conds[0]
        for c in conds[1:]:
            ok = ok & c
        return irop.select(ok, inner, as_expr(value, x.dtype))

    return compute(shape, body, name=name)  # type: ignore[no-any-return]
