"""Merged views: values whose shape merges a symbolic extent with others (``2 * s``).

A kernel's symbolic extents are bound by the shapes of its buffers, and a buffer of extent
``2 * s`` binds no ``s``: a matmul of ``(2 * s, 32)`` by ``(32, 96)`` could not be lowered.
torch's decompositions produce such shapes all the time (a linear layer on ``(b, s, 32)``
flattens to ``(b * s, 32)``, attention to ``(b * heads, s, d)``). So a reshape to a merged
shape remembers its un-merged base, and the elementwise operators, softmax and matmul that
consume merged views run on the bases instead, reshaping their result back (a reshape whose
input binds every extent). A view of a view reshapes the base directly, and reshapes that
nobody uses are dropped from the function.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...graph import TensorVar
from ...ir import Expr, IntImm, Var, structural_equal

if TYPE_CHECKING:
    from ._context import Context

ELEMENTWISE = {
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "floor_mod", "fmod",
    "atan2", "floor_divide", "equal", "not_equal", "less", "less_equal", "greater",
    "greater_equal", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
    "bitwise_xor", "where", "clip", "astype", "relu", "gelu", "gelu_tanh", "silu", "sigmoid",
    "tanh", "exp", "negative", "sqrt", "rsqrt", "abs", "sign", "reciprocal", "log", "erf",
    "sin", "cos", "isnan", "isinf", "logical_not", "floor", "ceil", "round", "trunc",
}  # fmt: skip
LAST_AXIS = {"softmax", "log_softmax"}


def merged(e: Expr) -> bool:
    """True for an extent that is neither a constant nor a single shape variable."""
    return not isinstance(e, (IntImm, Var))


def same_dim(a: Expr, b: Expr) -> bool:
    """Provably the same extent (constants by value, expressions structurally)."""
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return a.value == b.value
    return a is b or structural_equal(a, b)


def same_shape(a: Sequence[Expr], b: Sequence[Expr]) -> bool:
    """Same rank and the same extents."""
    return len(a) == len(b) and all(same_dim(x, y) for x, y in zip(a, b, strict=True))


def _kept(flat: Sequence[Expr], base: Sequence[Expr]) -> int:
    """How many trailing axes the view leaves as they are in its base."""
    n = 0
    while n < min(len(flat), len(base)) and same_dim(flat[-1 - n], base[-1 - n]):
        n += 1
    return n


def lift(ctx: Context, op: str, args: list[TensorVar], attrs: dict[str, Any]) -> TensorVar | None:
    """``op`` on the bases of merged views, reshaped back; None where that does not apply."""
    views = [a for a in args if id(a) in ctx.view_of]
    if not views:
        return None
    if op == "matmul":
        return _matmul(ctx, args)
    if op not in ELEMENTWISE and op not in LAST_AXIS:
        return None
    flat, base = views[0].type.shape, ctx.view_of[id(views[0])].type.shape
    kept = _kept(flat, base)
    new: list[TensorVar] = []
    for a in args:
        if id(a) in ctx.view_of:
            b = ctx.view_of[id(a)]
            if not same_shape(a.type.shape, flat) or not same_shape(b.type.shape, base):
                return None
            new.append(b)
        elif a.type.ndim <= kept:
            new.append(a)
        else:
            return None
    if op in LAST_AXIS and (int(attrs.get("axis", -1)) % len(flat)) < len(flat) - kept:
        return None
    out = ctx.bb.emit(op, new, attrs)
    return ctx.reshape(out, flat)


def _matmul(ctx: Context, args: list[TensorVar]) -> TensorVar | None:
    a, b = args
    va, vb = ctx.view_of.get(id(a)), ctx.view_of.get(id(b))
    if (
        va is not None
        and _kept(a.type.shape, va.type.shape) < 2
        and not (vb is None and b.type.ndim == 2 and _kept(a.type.shape, va.type.shape) >= 1)
    ):
        return None
    if vb is not None:
        if va is None or _kept(b.type.shape, vb.type.shape) < 2:
            return None
        if not same_shape(va.type.shape[:-2], vb.type.shape[:-2]):
            return None
    base_a = va if va is not None else a
    base_b = vb if vb is not None else b
    if vb is None and b.type.ndim > 2:
        return None
    out = ctx.bb.emit("matmul", [base_a, base_b], {})
    flat = (*a.type.shape[:-1], b.type.shape[-1]) if b.type.ndim == 2 else None
    if flat is None:
        flat = (*a.type.shape[:-2], a.type.shape[-2], b.type.shape[-1])
    return ctx.reshape(out, flat)
