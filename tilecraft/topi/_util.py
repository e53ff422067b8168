"""Shape arithmetic shared by the operators: constant folding, axes, broadcasting helpers."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import TilecraftError
from ..ir import Expr, ExprLike, IntImm, as_expr


def const_int(e: ExprLike) -> int | None:
    """The value of ``e`` if it is an integer constant, else None."""
    if isinstance(e, int) and not isinstance(e, bool):
        return e
    if isinstance(e, IntImm):
        return e.value
    return None


def _like(a: ExprLike, b: ExprLike) -> tuple[Expr, Expr]:
    if isinstance(a, Expr):
        return a, as_expr(b, a.dtype)
    if isinstance(b, Expr):
        return as_expr(a, b.dtype), b
    return as_expr(a), as_expr(b)


def add(a: ExprLike, b: ExprLike) -> Expr:
    """``a + b`` folded when both are constants or one is zero."""
    x, y = _like(a, b)
    cx, cy = const_int(x), const_int(y)
    if cx is not None and cy is not None:
        return as_expr(cx + cy, x.dtype)
    if cx == 0:
        return y
    if cy == 0:
        return x
    return x + y


def sub(a: ExprLike, b: ExprLike) -> Expr:
    """``a - b`` folded when both are constants or ``b`` is zero."""
    x, y = _like(a, b)
    cx, cy = const_int(x), const_int(y)
    if cx is not None and cy is not None:
        return as_expr(cx - cy, x.dtype)
    if cy == 0:
        return x
    return x - y


def mul(a: ExprLike, b: ExprLike) -> Expr:
    """``a * b`` folded when both are constants or one is 0 or 1."""
    x, y = _like(a, b)
    cx, cy = const_int(x), const_int(y)
    if cx is not None and cy is not None:
        return as_expr(cx * cy, x.dtype)
    if cx == 1:
        return y
    if cy == 1:
        return x
    if cx == 0 or cy == 0:
        return as_expr(0, x.dtype)
    return x * y


def floordiv(a: ExprLike, b: ExprLike) -> Expr:
    """``a // b`` folded when both are constants or ``b`` is 1."""
    x, y = _like(a, b)
    cx, cy = const_int(x), const_int(y)
    if cx is not None and cy is not None:
        return as_expr(cx // cy, x.dtype)
    if cy == 1:
        return x
    return x // y


def floormod(a: ExprLike, b: ExprLike) -> Expr:
    """``a % b`` folded when both are constants or ``b`` is 1."""
    x, y = _like(a, b)
    cx, cy = const_int(x), const_int(y)
    if cx is not None and cy is not None:
        return as_expr(cx % cy, x.dtype)
    if cy == 1:
        return as_expr(0, x.dtype)
    return x % y


def prod(values: Sequence[ExprLike]) -> Expr:
    """Product of ``values`` (1 for an empty sequence)."""
    out: Expr = as_expr(1)
    for v in values:
        out = mul(out, v)
    return out


def same_extent(a: Expr, b: Expr) -> bool:
    """True when two extents are known to be equal (same constant or same expression object)."""
    ca, cb = const_int(a), const_int(b)
    if ca is not None and cb is not None:
        return ca == cb
    return a is b


def normalize_axis(axis: int, ndim: int, what: str = "axis") -> int:
    """``axis`` in ``[0, ndim)``; negative values count from the end."""
    if not -ndim <= axis < ndim:
        raise TilecraftError(f"{what} {axis} is out of range for a tensor of rank {ndim}")
    return axis % ndim


def normalize_axes(axis: int | Sequence[int] | None, ndim: int) -> list[int]:
    """Sorted distinct axes; None means every axis."""
    if axis is None:
        return list(range(ndim))
    items = [axis] if isinstance(axis, int) else list(axis)
    out = sorted({normalize_axis(a, ndim) for a in items})
    if len(out) != len(items):
        raise TilecraftError(f"repeated axis in {axis!r}")
    return out


def pair(value: int | Sequence[int], what: str) -> tuple[int, int]:
    """An int or a pair as a pair."""
    if isinstance(value, int):
        return value, value
    items = tuple(value)
    if len(items) != 2:
        raise TilecraftError(f"{what}: expected an int or a pair, got {value!r}")
    return items[0], items[1]


def padding4(padding: int | Sequence[int]) -> tuple[int, int, int, int]:
    """``(top, left, bottom, right)`` from an int, a pair ``(ph, pw)`` or four values."""
    if isinstance(padding, int):
        return padding, padding, padding, padding
    items = tuple(padding)
    if len(items) == 2:
        return items[0], items[1], items[0], items[1]
    if len(items) == 4:
        return items[0], items[1], items[2], items[3]
    raise TilecraftError(f"padding: expected 1, 2 or 4 values, got {padding!r}")
