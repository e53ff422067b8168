"""Symbolic scalars used as numbers in tensor operators: ``x * n.item()``, ``x * x.shape[0]``.

A value ``torch.export`` only knows symbolically (an ``.item()``'s ``u0`` or ``zuf0``, a
shape's ``s77``, sym arithmetic over them such as ``2.5 * ToFloat(u0)``) that a tensor
operator takes as a scalar operand becomes a 0-d tensor: the symbol's source tensor (the
``.item()``'s own tensor, as int64 or float64 like a Python int or float), with torch's
sympy expression replayed as 0-d graph operators, cast to the operator's dtype and broadcast
by it. No value goes through the host, so a function using ``.item()`` only as a number keeps
its compiled executor; a symbol that is also an extent is bound from the same tensor
(:mod:`._ops_dynamic`), so both uses read one value.

A shape variable has no tensor holding it: its number is ``sum(full((s,), 1))``, a one-loop
kernel (the graph has no shape-to-tensor operator). An expression outside the table below
is an :class:`~._context.UnsupportedNodeError` naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...graph import TensorVar
from ._context import _SYMBOLIC_NUMBERS, Context, UnsupportedNodeError

SYMBOLIC_NUMBERS = _SYMBOLIC_NUMBERS
"""The types of torch's symbolic scalars (SymInt, SymFloat, SymBool)."""


def is_symbolic_number(v: Any) -> bool:
    """Whether ``v`` is a torch SymInt / SymFloat / SymBool."""
    return type(v).__name__ in SYMBOLIC_NUMBERS


def register_source(ctx: Context, name: str, src: TensorVar, kind: str) -> None:
    """Record the tensor whose single element is the value of symbol ``name``."""
    flat = ctx.reshape(src, ()) if src.type.ndim != 0 else src
    dtype = {"SymInt": "int64", "SymFloat": "float64", "SymBool": "bool"}[kind]
    ctx.numbers[name] = ctx.cast(flat, dtype)


def number(ctx: Context, v: Any, dtype: str) -> TensorVar:
    """The symbolic scalar ``v`` as a 0-d tensor of ``dtype``."""
    expr = v.node.expr
    return ctx.cast(_replay(ctx, expr), dtype)


def _replay(ctx: Context, e: Any) -> TensorVar:
    """torch's sympy expression ``e`` as 0-d graph operators (int64, float64 or bool)."""
    if e.is_Symbol:
        return _symbol(ctx, e.name)
    if e.is_Integer:
        return ctx.scalar(int(e), "int64")
    if e.is_Number and e.is_real:  # Float, Rational: a Python float
        return ctx.scalar(float(e), "float64")
    if e.is_Boolean and not e.args:  # true / false
        return ctx.scalar(bool(e), "bool")
    kind = type(e).__name__
    rule = _RULES.get(kind)
    if rule is None:
        raise UnsupportedNodeError(f"a symbolic number {e} ({kind}) used as a tensor operand")
    return rule(ctx, [_replay(ctx, a) for a in e.args], e)


def _symbol(ctx: Context, name: str) -> TensorVar:
    """The 0-d tensor of symbol ``name``: its source, or its extent counted for a shape."""
    if name in ctx.numbers:
        return ctx.numbers[name]
    if name not in ctx.syms or name not in ctx.carriers:
        raise UnsupportedNodeError(f"the value of {name} used as a tensor operand")
    ones = ctx.emit_shaped("full", [], {"value": 1, "dtype": "int64"}, (ctx.syms[name],))
    ctx.numbers[name] = ctx.emit("sum", [ones], {"axis": None, "keepdims": False})
    return ctx.numbers[name]


def _promoted(ctx: Context, parts: list[TensorVar]) -> tuple[list[TensorVar], str]:
    """``parts`` in their common type (Python's: bool < int < float)."""
    names = {str(p.type.dtype) for p in parts}
    dt = "float64" if "float64" in names else "int64" if "int64" in names else "bool"
    return [ctx.cast(p, dt) for p in parts], dt


def _fold(op: str) -> Callable[[Context, list[TensorVar], Any], TensorVar]:
    """A rule folding ``op`` over the promoted operands (``Add``, ``Mul``, ``Max``...)."""

    def rule(ctx: Context, parts: list[TensorVar], e: Any) -> TensorVar:
        parts, _ = _promoted(ctx, parts)
        out = parts[0]
        for p in parts[1:]:
            out = ctx.emit(op, [out, p])
        return out

    return rule


def _binary(op: str, dtype: str | None = None) -> Callable[..., TensorVar]:
    """A rule applying ``op`` to two operands, both of ``dtype`` (default: promoted)."""

    def rule(ctx: Context, parts: list[TensorVar], e: Any) -> TensorVar:
        if dtype is not None:
            parts = [ctx.cast(p, dtype) for p in parts]
        else:
            parts, _ = _promoted(ctx, parts)
        return ctx.emit(op, parts)

    return rule


def _unary(op: str | None, dtype: str) -> Callable[..., TensorVar]:
    """A rule applying ``op`` (None: none) in float64, the result as ``dtype``."""

    def rule(ctx: Context, parts: list[TensorVar], e: Any) -> TensorVar:
        x = parts[0]
        if op is not None:
            x = ctx.emit(op, [ctx.cast(x, "float64")])
        return ctx.cast(x, dtype)

    return rule


def _pow(ctx: Context, parts: list[TensorVar], e: Any) -> TensorVar:
    """``a ** n``: repeated products for a positive integer exponent, else ``power``."""
    n = e.args[1]
    if n.is_Integer and 0 < int(n) <= 8:
        out = parts[0]
        for _ in range(int(n) - 1):
            out = ctx.emit("multiply", [out, parts[0]])
        return out
    if str(parts[0].type.dtype) != "float64":
        raise UnsupportedNodeError(f"a symbolic number {e} (an integer power) as a tensor operand")
    return ctx.emit("power", _promoted(ctx, parts)[0])


def _unary_bool(ctx: Context, parts: list[TensorVar], e: Any) -> TensorVar:
    """``Not(a)``."""
    return ctx.emit("logical_not", [ctx.cast(parts[0], "bool")])


def _abs(ctx: Context, parts: list[TensorVar], e: Any) -> TensorVar:
    """``Abs(a)`` in ``a``'s type."""
    return ctx.emit("abs", parts)


_RULES: dict[str, Callable[[Context, list[TensorVar], Any], TensorVar]] = {
    "Add": _fold("add"),
    "Mul": _fold("multiply"),
    "Max": _fold("maximum"),
    "Min": _fold("minimum"),
    "FloorDiv": _binary("floor_divide"),
    "PythonMod": _binary("floor_mod"),
    "Mod": _binary("floor_mod"),
    "IntTrueDiv": _binary("divide", "float64"),
    "FloatTrueDiv": _binary("divide", "float64"),
    "FloatPow": _binary("power", "float64"),
    "Pow": _pow,
    "ToFloat": _unary(None, "float64"),
    "TruncToInt": _unary("trunc", "int64"),
    "FloorToInt": _unary("floor", "int64"),
    "CeilToInt": _unary("ceil", "int64"),
    "Abs": _abs,
    "Equality": _binary("equal"),
    "Unequality": _binary("not_equal"),
    "StrictLessThan": _binary("less"),
    "LessThan": _binary("less_equal"),
    "StrictGreaterThan": _binary("greater"),
    "GreaterThan": _binary("greater_equal"),
    "And": _fold("logical_and"),
    "Or": _fold("logical_or"),
    "Not": _unary_bool,
}
