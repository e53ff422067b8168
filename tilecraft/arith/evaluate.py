"""Reference evaluation of expressions under an assignment of their variables.

Semantics: integers are exact Python ints (no overflow wrap, except :class:`Cast` to an integer
dtype, which wraps like C); integer ``Div`` truncates toward zero; ``FloorDiv``/``FloorMod`` round
toward negative infinity (Python's ``//`` and ``%``); an integer division of any kind by zero
gives 0 (numpy's result, which generated code reproduces); comparisons and logic give ``bool``;
float arithmetic is done in double precision; intrinsic calls use :mod:`math`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import TilecraftError
from ..ir import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    Buffer,
    BufferLoad,
    Call,
    Cast,
    Div,
    Expr,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    Not,
    Or,
    Select,
    Sub,
    Var,
)
from ._form import wrap_int

Value = int | float | bool


class EvaluationError(TilecraftError):
    """An expression could not be evaluated (unbound variable or buffer, non-finite cast)."""


def _int_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def _safe(fn: Callable[..., float]) -> Callable[..., float]:
    def call(*args: float) -> float:
        try:
            return fn(*args)
        except (ValueError, OverflowError):
            return math.nan if not isinstance(args[0], float) or math.isfinite(args[0]) else args[0]

    return call


_INTRIN: dict[str, Callable[..., Any]] = {
    "exp": _safe(math.exp), "exp2": _safe(lambda x: 2.0**x), "exp10": _safe(lambda x: 10.0**x),
    "expm1": _safe(math.expm1), "log": _safe(math.log), "log2": _safe(math.log2),
    "log10": _safe(math.log10), "log1p": _safe(math.log1p), "sqrt": _safe(math.sqrt),
    "rsqrt": _safe(lambda x: 1.0 / math.sqrt(x)), "tanh": math.tanh, "erf": math.erf,
    "sigmoid": _safe(_sigmoid), "fabs": math.fabs, "floor": _safe(lambda x: float(math.floor(x))),
    "ceil": _safe(lambda x: float(math.ceil(x))), "round": _safe(lambda x: float(round(x))),
    "trunc": _safe(lambda x: float(math.trunc(x))), "sin": _safe(math.sin),
    "cos": _safe(math.cos), "tan": _safe(math.tan), "asin": _safe(math.asin),
    "acos": _safe(math.acos), "atan": math.atan, "sinh": _safe(math.sinh),
    "cosh": _safe(math.cosh), "pow": _safe(math.pow), "fmod": _safe(math.fmod),
    "atan2": math.atan2, "hypot": math.hypot, "copysign": math.copysign,
    "isnan": math.isnan, "isinf": math.isinf, "isfinite": math.isfinite,
}  # fmt: skip


def _arith(e: Expr, a: Value, b: Value) -> Value:
    cls = type(e)
    if cls is Add:
        return a + b
    if cls is Sub:
        return a - b
    if cls is Mul:
        return a * b
    if cls is Min or cls is Max:
        if isinstance(a, float) and a != a:  # NaN propagates (numpy's minimum/maximum)
            return a
        if isinstance(b, float) and b != b:
            return b
        return min(a, b) if cls is Min else max(a, b)
    if cls is Div:
        if e.dtype.is_float:
            return a / b if b != 0 else math.copysign(math.inf, a) if a != 0 else math.nan
        return _int_div(int(a), int(b)) if b != 0 else 0
    if b == 0:  # numpy's result for an integer zero divisor (C would trap)
        return 0
    return int(a) // int(b) if cls is FloorDiv else int(a) % int(b)


_CMP: dict[type, Callable[[Value, Value], bool]] = {
    LT: lambda x, y: x < y, LE: lambda x, y: x <= y, GT: lambda x, y: x > y,
    GE: lambda x, y: x >= y, EQ: lambda x, y: x == y, NE: lambda x, y: x != y,
}  # fmt: skip
_ARITH = (Add, Sub, Mul, Div, FloorDiv, FloorMod, Min, Max)


def evaluate(expr: Expr, assignment: Mapping[Any, Any] | None = None) -> Value:
    """The value of ``expr`` when each variable takes its value in ``assignment``.

    Parameters
    ----------
    expr
        The expression.
    assignment
        Maps each :class:`~tilecraft.ir.Var` to a Python number (or bool); a
        :class:`~tilecraft.ir.Buffer` may map to a numpy array for loads.

    Returns
    -------
    int, float or bool
        ``int`` for integer dtypes, ``float`` for floats, ``bool`` for bool.

    Raises
    ------
    EvaluationError
        For an unbound variable or buffer, or a value it cannot compute.
    """
    env: Mapping[Any, Any] = assignment or {}
    return _eval(expr, env)


def _eval(e: Expr, env: Mapping[Any, Any]) -> Value:
    cls = type(e)
    if cls is IntImm:
        return bool(e.value) if e.dtype.is_bool else e.value  # type: ignore[attr-defined]
    if cls is FloatImm:
        return e.value  # type: ignore[attr-defined, no-any-return]
    if cls is Var:
        if e not in env:
            raise EvaluationError(f"evaluate: variable {e.name!r} has no value in the assignment")  # type: ignore[attr-defined]
        v = env[e]
        if e.dtype.is_float:
            return float(v)
        return bool(v) if e.dtype.is_bool else int(v)
    if cls in _ARITH:
        return _arith(e, _eval(e.a, env), _eval(e.b, env))  # type: ignore[attr-defined]
    cmp = _CMP.get(cls)
    if cmp is not None:
        return cmp(_eval(e.a, env), _eval(e.b, env))  # type: ignore[attr-defined]
    if cls is And:
        return bool(_eval(e.a, env)) and bool(_eval(e.b, env))  # type: ignore[attr-defined]
    if cls is Or:
        return bool(_eval(e.a, env)) or bool(_eval(e.b, env))  # type: ignore[attr-defined]
    if cls is Not:
        return not _eval(e.a, env)  # type: ignore[attr-defined]
    if cls is Select:
        t, f = _eval(e.true_value, env), _eval(e.false_value, env)  # type: ignore[attr-defined]
        return t if _eval(e.condition, env) else f  # type: ignore[attr-defined]
    if cls is Cast:
        return _cast(e, _eval(e.value, env))  # type: ignore[attr-defined]
    if cls is Call:
        fn = _INTRIN[e.op]  # type: ignore[attr-defined]
        return fn(*(float(_eval(a, env)) for a in e.args))  # type: ignore[no-any-return, attr-defined]
    if cls is BufferLoad:
        return _load(e, env)
    raise EvaluationError(f"evaluate: cannot evaluate a {cls.__name__}")


def _cast(e: Expr, v: Value) -> Value:
    dt = e.dtype
    if dt.is_bool:
        return bool(v)
    if dt.is_float:
        return float(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise EvaluationError(f"evaluate: cannot cast {v} to {dt}")
        v = math.trunc(v)
    return wrap_int(int(v), dt)


def _load(e: Expr, env: Mapping[Any, Any]) -> Value:
    buf: Buffer = e.buffer  # type: ignore[attr-defined]
    if buf not in env:
        raise EvaluationError(f"evaluate: buffer {buf.name!r} has no array in the assignment")
    idx = tuple(int(_eval(i, env)) for i in e.indices)  # type: ignore[attr-defined]
    value = env[buf][idx]
    if e.dtype.is_float:
        return float(value)
    return bool(value) if e.dtype.is_bool else int(value)
