"""Constant integer bounds of index expressions, used to emit plain ``/`` and ``%``."""

from __future__ import annotations

from ..ir import Add, Cast, Expr, FloorDiv, FloorMod, IntImm, Max, Min, Mul, Sub, Var

Bound = tuple[int | None, int | None]  # inclusive (lo, hi); None = unbounded
UNKNOWN: Bound = (None, None)


def _add(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def _mul(a: Bound, b: Bound) -> Bound:
    vals = [a[0], a[1]]
    if None in vals or None in (b[0], b[1]):
        if a[0] is not None and b[0] is not None and a[0] >= 0 and b[0] >= 0:
            return (a[0] * b[0], None)
        return UNKNOWN
    prods = [x * y for x in (a[0], a[1]) for y in (b[0], b[1])]  # type: ignore[operator]
    return (min(prods), max(prods))


def const_int_bound(e: Expr, env: dict[int, Bound]) -> Bound:
    """Inclusive bounds of integer expression ``e``; ``env`` maps ``id(var)`` to its bounds."""
    if isinstance(e, IntImm):
        return (e.value, e.value)
    if isinstance(e, Var):
        return env.get(id(e), UNKNOWN)
    if isinstance(e, Cast) and e.value.dtype.is_integer:
        return const_int_bound(e.value, env)
    if isinstance(e, (Add, Sub, Mul, FloorDiv, FloorMod, Min, Max)):
        a, b = const_int_bound(e.a, env), const_int_bound(e.b, env)
        if isinstance(e, Add):
            return (_add(a[0], b[0]), _add(a[1], b[1]))
        if isinstance(e, Sub):
            neg = (None if b[1] is None else -b[1], None if b[0] is None else -b[0])
            return (_add(a[0], neg[0]), _add(a[1], neg[1]))
        if isinstance(e, Mul):
            return _mul(a, b)
        if isinstance(e, FloorDiv):
            if a[0] is not None and a[0] >= 0 and b[0] is not None and b[0] > 0:
                return (0, None if a[1] is None else a[1] // b[0])
            return UNKNOWN
        if isinstance(e, FloorMod):
            if b[0] is not None and b[0] > 0:
                return (0, None if b[1] is None else b[1] - 1)
            return UNKNOWN
        los = [x for x in (a[0], b[0]) if x is not None]
        his = [x for x in (a[1], b[1]) if x is not None]
        if isinstance(e, Min):  # min(a, b) <= each hi; >= the smaller lo
            return (min(los) if len(los) == 2 else None, min(his) if his else None)
        return (max(los) if los else None, max(his) if len(his) == 2 else None)
    return UNKNOWN


def non_negative(e: Expr, env: dict[int, Bound]) -> bool:
    """True when ``e >= 0`` provably."""
    lo = const_int_bound(e, env)[0]
    return lo is not None and lo >= 0


def positive(e: Expr, env: dict[int, Bound]) -> bool:
    """True when ``e > 0`` provably."""
    lo = const_int_bound(e, env)[0]
    return lo is not None and lo > 0


def positive_factors(e: Expr, env: dict[int, Bound]) -> list[Var]:
    """Variables that are ``>= 1`` whenever ``e >= 1`` holds (``e`` a loop's extent).

    A variable is; so is each factor of a product of non-negative factors, the numerator of
    a floor division of a non-negative value by a positive constant, and each side of a
    ``min``.
    """
    if isinstance(e, Var):
        return [e]
    if isinstance(e, Cast) and e.value.dtype.is_integer:
        return positive_factors(e.value, env)
    if isinstance(e, Mul) and non_negative(e.a, env) and non_negative(e.b, env):
        return positive_factors(e.a, env) + positive_factors(e.b, env)
    if isinstance(e, FloorDiv) and isinstance(e.b, IntImm) and e.b.value > 0:
        return positive_factors(e.a, env) if non_negative(e.a, env) else []
    if isinstance(e, Min):
        return positive_factors(e.a, env) + positive_factors(e.b, env)
    return []


def assume_positive(extent: Expr, env: dict[int, Bound]) -> dict[int, Bound]:
    """Raise to 1 in ``env`` the lower bounds that ``extent >= 1`` proves (inside a loop body).

    A symbolic extent ``s * 12`` or ``s // 8`` runs its body only when ``s >= 1``, so a
    division by ``s`` there is a plain ``/`` (the C compiler then hoists it out of the inner
    loop; the branching helper it cannot hoist cost 20x in a transpose). Returns the previous
    bounds of the variables raised: ``env.update(saved)`` after the body restores them.
    """
    saved: dict[int, Bound] = {}
    for v in positive_factors(extent, env):
        old = env.get(id(v), UNKNOWN)
        if old[0] is not None and old[0] >= 0 and (old[1] is None or old[1] >= 1):
            saved.setdefault(id(v), old)
            env[id(v)] = (max(old[0], 1), old[1])
    return saved
