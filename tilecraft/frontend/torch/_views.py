"""Merged views: values whose shape merges a symbolic extent with others (``2 * s``).

A kernel's symbolic extents are bound by the shapes of its buffers, and a buffer of extent
``2 * s`` binds no ``s``: a matmul of ``(2 * s, 32)`` by ``(32, 96)`` could not be lowered.
torch's decompositions produce such shapes all the time (a linear layer on ``(b, s, 32)``
flattens to ``(b * s, 32)``, attention to ``(b * heads, s, d)``). So a reshape to a merged
shape remembers its un-merged base, and the elementwise operators, softmax and matmul that
consume merged views run on the bases instead, reshaping their result back (a reshape whose
input binds every extent). A view of a view reshapes the base directly, and reshapes that
nobody uses are dropped from the function.

The base kept for a merged view is the view itself with each merged extent split into its
factors, in the order the source's axes give them (``(8, 4 * s, 8)`` viewed from ``(8, s, 32)``
has the base ``(8, s, 4, 8)``), so a permutation of the view is a permutation of its base's
axes groups (multi-head attention in the sequence-first layout flattens ``(L, b, 32)`` to
``(L, 4 * b, 8)`` and swaps the first two axes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...graph import TensorVar
from ...ir import Expr, IntImm, Mul, Var, as_expr, structural_equal

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
    if op == "permute_dims":
        return _permute(ctx, args[0], tuple(attrs["axes"]))
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


# factorization of extents -------------------------------------------------------------------
Factors = tuple[int, tuple[str, ...]]  # constant part, sorted names of the variables


def _factors(e: Expr) -> Factors | None:
    """``e`` as a constant times shape variables; None for any other expression."""
    if isinstance(e, IntImm):
        return e.value, ()
    if isinstance(e, Var):
        return 1, (e.name,)
    if isinstance(e, Mul):
        a, b = _factors(e.a), _factors(e.b)
        if a is None or b is None:
            return None
        return a[0] * b[0], tuple(sorted(a[1] + b[1]))
    return None


def _divide(x: Factors, y: Factors) -> Factors | None:
    """``x / y`` when ``y`` divides ``x`` as a product; None otherwise."""
    if y[0] == 0 or x[0] % y[0]:
        return None
    rest = list(x[1])
    for v in y[1]:
        if v not in rest:
            return None
        rest.remove(v)
    return x[0] // y[0], tuple(rest)


def refine(src: Sequence[Expr], view: Sequence[Expr]) -> list[list[Factors]] | None:
    """Per axis of ``view``, the factors (outer first) the axes of ``src`` split it into.

    Both shapes hold the same elements in row-major order; None when an extent is not a
    product of constants and variables or an axis of one straddles two axes of the other.
    """
    a = [_factors(e) for e in src if not (isinstance(e, IntImm) and e.value == 1)]
    b = [_factors(e) for e in view]
    if any(f is None for f in a) or any(f is None for f in b):
        return None
    todo: list[Factors] = [f for f in a if f is not None]
    out: list[list[Factors]] = []
    for f in b:
        assert f is not None
        parts: list[Factors] = []
        while f != (1, ()):
            if not todo:
                return None
            head = todo[0]
            if (rest := _divide(f, head)) is not None:
                parts.append(head)
                todo.pop(0)
                f = rest
            elif (left := _divide(head, f)) is not None:
                parts.append(f)
                todo[0] = left
                f = (1, ())
            else:
                return None
        out.append(parts)
    return out if not todo else None


def unmerged(src: Sequence[Expr], view: Sequence[Expr]) -> tuple[Expr, ...] | None:
    """``view`` with each merged extent split into its factors (the base kept for it)."""
    groups = refine(src, view)
    if groups is None:
        return None
    names = {v.name: v for e in (*src, *view) for v in _vars(e)}
    out: list[Expr] = []
    for e, parts in zip(view, groups, strict=True):
        if not merged(e):
            out.append(e)
            continue
        const = 1
        for c, vs in parts:
            const *= c
            for v in vs:
                if const != 1:
                    out.append(as_expr(const))
                    const = 1
                out.append(names[v])
        if const != 1:
            out.append(as_expr(const))
    return tuple(out)


def _vars(e: Expr) -> list[Var]:
    if isinstance(e, Var):
        return [e]
    if isinstance(e, Mul):
        return _vars(e.a) + _vars(e.b)
    return []


def _permute(ctx: Context, x: TensorVar, perm: tuple[int, ...]) -> TensorVar | None:
    """A permutation of a merged view as one of its base's axis groups."""
    base = ctx.view_of[id(x)]
    groups = _axis_groups(base.type.shape, x.type.shape)
    if groups is None:
        return None
    axes = tuple(a for p in perm for a in groups[p])
    out = ctx.bb.emit("permute_dims", [base], {"axes": axes})
    return ctx.reshape(out, tuple(x.type.shape[p] for p in perm))


def _axis_groups(base: Sequence[Expr], view: Sequence[Expr]) -> list[list[int]] | None:
    """Per view axis, the base axes it merges (unit base axes go with the axis before)."""
    groups: list[list[int]] = []
    i = 0
    for e in view:
        f = _factors(e)
        if f is None:
            return None
        group: list[int] = []
        while f != (1, ()) or (group == [] and i < len(base) and _is_one(base[i])):
            if i >= len(base) or (g := _factors(base[i])) is None:
                return None
            rest = _divide(f, g)
            if rest is None:
                return None
            group.append(i)
            i += 1
            f = rest
        groups.append(group)
    while i < len(base) and _is_one(base[i]):
        groups[-1].append(i)
        i += 1
    return groups if i == len(base) and all(groups) else None


def _is_one(e: Expr) -> bool:
    return isinstance(e, IntImm) and e.value == 1
