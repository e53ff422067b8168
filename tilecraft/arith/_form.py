"""The compact internal form of integer expressions used by the analyzer.

An integer expression is a :class:`Lin`: ``c + sum(coef * atom)``. An atom is either a
:class:`~tilecraft.ir.Var` (hashed by identity) or an :class:`Atom` (a non-affine piece such as
``floordiv(lin, 16)``), interned per analyzer by a structural key so that equal pieces are the
same object and dictionaries of terms compare by content.

Terms are sorted by :func:`atom_order`, which never looks at object identity: variables by
name, then dtype, then the order in which the analyzer first met them (:data:`VarKeys`), so
the canonical form is the same in every run and process, and alpha-equivalent inputs (given
alpha-equivalent analyzer histories) give alpha-equivalent results.

Integers are mathematical integers here: the analyzer assumes index arithmetic does not
overflow its dtype.
"""

from __future__ import annotations

import math

from ..ir import DataType, Expr, FloatImm, IntImm, Var
from ..ir.expr import _INT_RANGES

NEG_INF = -math.inf
POS_INF = math.inf

Num = int | float  # an int, or one of the float sentinels -inf / +inf
Bound = tuple[Num, Num]


class Atom:
    """A non-affine integer term, interned per analyzer (identity equality is content equality).

    ``kind`` is one of ``fd`` (floordiv by a positive constant), ``fm`` (floormod by a positive
    constant), ``mul`` (product of atoms), ``min``/``max``, ``sel``, ``div`` (truncating),
    ``fd2``/``fm2`` (floordiv/floormod by a non-constant), ``cast`` and ``x`` (opaque).
    """

    __slots__ = ("_order", "args", "dt", "expr", "kind", "seq")

    def __init__(self, kind: str, args: tuple[object, ...], dt: DataType, seq: int) -> None:
        self.kind = kind
        self.args = args
        self.dt = dt
        self.seq = seq
        self.expr: Expr | None = None
        self._order: tuple[object, ...] | None = None

    def order(self, keys: VarKeys) -> tuple[object, ...]:
        """A content-based sort key (opaque atoms fall back to creation order)."""
        if self._order is None:
            k = self.kind
            if k in ("fd", "fm"):
                self._order = (1, k, lin_order(self.args[0], keys), self.args[1])  # type: ignore[arg-type]
            elif k == "mul":
                self._order = (1, k, tuple(sorted(atom_order(f, keys) for f in self.args)))  # type: ignore[arg-type]
            elif k in ("min", "max", "div", "fd2", "fm2"):
                self._order = (1, k, lin_order(self.args[0], keys), lin_order(self.args[1], keys))  # type: ignore[arg-type]
            else:
                self._order = (2, k, self.seq)
        return self._order


AtomT = Var | Atom
VarKeys = dict[Var, tuple[object, ...]]
"""The sort key of each variable an analyzer has met, ``(0, name, dtype, n)`` where ``n``
counts the variables met before it; keys never change once given."""


def var_key(v: Var, keys: VarKeys) -> tuple[object, ...]:
    """The sort key of ``v``, given on first sight."""
    k = keys.get(v)
    if k is None:
        k = keys[v] = (0, v.name, str(v.dtype), len(keys))
    return k


def atom_order(a: AtomT, keys: VarKeys) -> tuple[object, ...]:
    """Sort key of an atom: variables (by name, dtype, first sight) first, then compound atoms."""
    if type(a) is Var:
        k = keys.get(a)
        return k if k is not None else var_key(a, keys)
    return a.order(keys)  # type: ignore[union-attr]


class Lin:
    """``c + sum(coef * atom for atom, coef in t.items())`` of dtype ``dt``; never mutated."""

    __slots__ = ("c", "dt", "t")

    def __init__(self, c: int, t: dict[AtomT, int], dt: DataType) -> None:
        self.c = c
        self.t = t
        self.dt = dt

    def key(self) -> tuple[int, frozenset[tuple[AtomT, int]]]:
        """Hashable structural key."""
        return (self.c, frozenset(self.t.items()))

    def is_const(self) -> bool:
        """True when there are no terms."""
        return not self.t

    def single(self) -> AtomT | None:
        """The atom when this is exactly ``1 * atom + 0``."""
        if self.c == 0 and len(self.t) == 1:
            ((a, k),) = self.t.items()
            if k == 1:
                return a
        return None


def lin_order(x: Lin, keys: VarKeys) -> tuple[object, ...]:
    """Content-based sort key of a Lin."""
    return (tuple(sorted((atom_order(a, keys), k) for a, k in x.t.items())), x.c)


def lconst(c: int, dt: DataType) -> Lin:
    """The constant ``c``."""
    return Lin(c, {}, dt)


def lvar(a: AtomT, dt: DataType) -> Lin:
    """The single term ``1 * a``."""
    return Lin(0, {a: 1}, dt)


def ladd(a: Lin, b: Lin, sign: int = 1) -> Lin:
    """``a + sign * b``."""
    if not b.t:
        return Lin(a.c + sign * b.c, a.t, a.dt)
    t = dict(a.t)
    for k, v in b.t.items():
        nv = t.get(k, 0) + sign * v
        if nv:
            t[k] = nv
        else:
            del t[k]
    return Lin(a.c + sign * b.c, t, a.dt)


def lscale(a: Lin, k: int) -> Lin:
    """``k * a``."""
    if k == 1:
        return a
    if k == 0:
        return Lin(0, {}, a.dt)
    return Lin(a.c * k, {x: v * k for x, v in a.t.items()}, a.dt)


def lgcd(a: Lin) -> int:
    """The gcd of the term coefficients (0 when there are no terms)."""
    g = 0
    for v in a.t.values():
        g = math.gcd(g, v)
        if g == 1:
            break
    return g


def dtype_bound(dt: DataType) -> Bound:
    """The value range of an integer dtype."""
    lo, hi = _INT_RANGES.get(str(dt), (NEG_INF, POS_INF))
    return (lo, hi)


def wrap_int(value: int, dt: DataType) -> int:
    """``value`` converted to integer dtype ``dt`` with two's-complement wrap-around."""
    if dt.is_bool:
        return 1 if value else 0
    bits = dt.bits
    value &= (1 << bits) - 1
    if dt.is_int and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def skey(e: Expr) -> object:
    """A structural key of an (already simplified) IR expression; variables by identity."""
    cls = type(e)
    if cls is Var:
        return e
    if cls is IntImm:
        return ("i", e.dtype, e.value)  # type: ignore[attr-defined]
    if cls is FloatImm:
        return ("f", e.dtype, e.value)  # type: ignore[attr-defined]
    parts: list[object] = [cls.__name__, e.dtype]
    for name in cls.__dataclass_fields__:  # type: ignore[attr-defined]
        if name == "dtype":
            continue
        v = getattr(e, name)
        if isinstance(v, Expr):
            parts.append(skey(v))
        elif isinstance(v, tuple):
            parts.append(tuple(skey(x) if isinstance(x, Expr) else x for x in v))
        else:
            parts.append(v)  # a buffer (identity), an op name
    return tuple(parts)


def floordiv_num(a: Num, c: int) -> Num:
    """``floor(a / c)`` for ``c > 0`` with infinities passed through."""
    if isinstance(a, float):
        return a
    return a // c


def mul_num(a: Num, b: Num) -> Num:
    """``a * b`` where ``0 * inf`` is 0."""
    if a == 0 or b == 0:
        return 0
    return a * b
