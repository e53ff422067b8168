"""Helper constructors for expressions: math intrinsics, min/max, select, cast, constants."""

from __future__ import annotations

from .dtype import DTypeLike, dtype
from .expr import (
    INTRINSICS,
    Call,
    Cast,
    Expr,
    ExprLike,
    Max,
    Min,
    Select,
    as_expr,
    const,
)

# Every intrinsic has a helper of the same name below (tests/ir/test_nodes.py checks it).
__all__ = [
    "abs", "call_intrin", "cast", "const", "if_then_else", "max", "min", "select", *INTRINSICS
]  # fmt: skip


def _pair(a: ExprLike, b: ExprLike) -> tuple[Expr, Expr]:
    if isinstance(a, Expr):
        return a, as_expr(b, a.dtype)
    if isinstance(b, Expr):
        return as_expr(a, b.dtype), b
    return as_expr(a), as_expr(b)


def min(a: ExprLike, b: ExprLike) -> Expr:
    """``min(a, b)``; for floats NaN when either is NaN (numpy's ``minimum``)."""
    x, y = _pair(a, b)
    return Min(x, y)


def max(a: ExprLike, b: ExprLike) -> Expr:
    """``max(a, b)``; for floats NaN when either is NaN (numpy's ``maximum``)."""
    x, y = _pair(a, b)
    return Max(x, y)


def select(cond: ExprLike, t: ExprLike, f: ExprLike) -> Expr:
    """``t if cond else f``; only the chosen branch is evaluated."""
    x, y = _pair(t, f)
    return Select(as_expr(cond, "bool"), x, y)


if_then_else = select


def cast(value: ExprLike, dt: DTypeLike) -> Expr:
    """Convert ``value`` to ``dt`` (no node when it already has that dtype)."""
    e = as_expr(value)
    d = dtype(dt)
    return e if e.dtype == d else Cast(d, e)


def call_intrin(op: str, *args: ExprLike) -> Expr:
    """Call intrinsic ``op`` on ``args`` (floats); the result dtype follows the arguments."""
    exprs = [as_expr(a) for a in args]
    first = next((e for e in exprs if e.dtype.is_float), exprs[0] if exprs else None)
    if first is not None:
        exprs = [as_expr(a, first.dtype) for a in args]
    intr = INTRINSICS.get(op)
    dt = exprs[0].dtype if exprs else dtype("float32")
    if intr is not None and intr.predicate:
        dt = dtype("bool").with_lanes(dt.lanes)
    return Call(dt, op, tuple(exprs))


def abs(x: ExprLike) -> Expr:
    """``|x|``: ``fabs`` for floats, ``select(x < 0, -x, x)`` for integers."""
    e = as_expr(x)
    if e.dtype.is_float:
        return call_intrin("fabs", e)
    return Select(e < as_expr(0, e.dtype), -e, e)


def exp(x: ExprLike) -> Expr:
    """``exp(x)``."""
    return call_intrin("exp", x)


def exp2(x: ExprLike) -> Expr:
    """``exp2(x)``."""
    return call_intrin("exp2", x)


def exp10(x: ExprLike) -> Expr:
    """``exp10(x)``."""
    return call_intrin("exp10", x)


def expm1(x: ExprLike) -> Expr:
    """``expm1(x)``."""
    return call_intrin("expm1", x)


def log(x: ExprLike) -> Expr:
    """``log(x)``."""
    return call_intrin("log", x)


def log2(x: ExprLike) -> Expr:
    """``log2(x)``."""
    return call_intrin("log2", x)


def log10(x: ExprLike) -> Expr:
    """``log10(x)``."""
    return call_intrin("log10", x)


def log1p(x: ExprLike) -> Expr:
    """``log1p(x)``."""
    return call_intrin("log1p", x)


def sqrt(x: ExprLike) -> Expr:
    """``sqrt(x)``."""
    return call_intrin("sqrt", x)


def rsqrt(x: ExprLike) -> Expr:
    """``rsqrt(x)``."""
    return call_intrin("rsqrt", x)


def tanh(x: ExprLike) -> Expr:
    """``tanh(x)``."""
    return call_intrin("tanh", x)


def erf(x: ExprLike) -> Expr:
    """``erf(x)``."""
    return call_intrin("erf", x)


def sigmoid(x: ExprLike) -> Expr:
    """``sigmoid(x)``."""
    return call_intrin("sigmoid", x)


def fabs(x: ExprLike) -> Expr:
    """``fabs(x)``."""
    return call_intrin("fabs", x)


def floor(x: ExprLike) -> Expr:
    """``floor(x)``."""
    return call_intrin("floor", x)


def ceil(x: ExprLike) -> Expr:
    """``ceil(x)``."""
    return call_intrin("ceil", x)


def round(x: ExprLike) -> Expr:
    """``round(x)``."""
    return call_intrin("round", x)


def trunc(x: ExprLike) -> Expr:
    """``trunc(x)``."""
    return call_intrin("trunc", x)


def sin(x: ExprLike) -> Expr:
    """``sin(x)``."""
    return call_intrin("sin", x)


def cos(x: ExprLike) -> Expr:
    """``cos(x)``."""
    return call_intrin("cos", x)


def tan(x: ExprLike) -> Expr:
    """``tan(x)``."""
    return call_intrin("tan", x)


def asin(x: ExprLike) -> Expr:
    """``asin(x)``."""
    return call_intrin("asin", x)


def acos(x: ExprLike) -> Expr:
    """``acos(x)``."""
    return call_intrin("acos", x)


def atan(x: ExprLike) -> Expr:
    """``atan(x)``."""
    return call_intrin("atan", x)


def sinh(x: ExprLike) -> Expr:
    """``sinh(x)``."""
    return call_intrin("sinh", x)


def cosh(x: ExprLike) -> Expr:
    """``cosh(x)``."""
    return call_intrin("cosh", x)


def pow(x: ExprLike, y: ExprLike) -> Expr:
    """``pow(x, y)``."""
    return call_intrin("pow", x, y)


def fmod(x: ExprLike, y: ExprLike) -> Expr:
    """``fmod(x, y)``."""
    return call_intrin("fmod", x, y)


def atan2(x: ExprLike, y: ExprLike) -> Expr:
    """``atan2(x, y)``."""
    return call_intrin("atan2", x, y)


def hypot(x: ExprLike, y: ExprLike) -> Expr:
    """``hypot(x, y)``."""
    return call_intrin("hypot", x, y)


def copysign(x: ExprLike, y: ExprLike) -> Expr:
    """``copysign(x, y)``."""
    return call_intrin("copysign", x, y)


def isnan(x: ExprLike) -> Expr:
    """``isnan(x)``."""
    return call_intrin("isnan", x)


def isinf(x: ExprLike) -> Expr:
    """``isinf(x)``."""
    return call_intrin("isinf", x)


def isfinite(x: ExprLike) -> Expr:
    """``isfinite(x)``."""
    return call_intrin("isfinite", x)
