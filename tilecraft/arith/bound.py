"""Constant integer bounds of canonical forms, and proofs of sign facts.

Bounds are pairs ``(lo, hi)`` of Python ints; an unbounded side is ``-math.inf`` or
``math.inf``. A variable with no binding is bounded by its dtype's range.
Symbolic facts (``0 <= i < n`` from ``bind(i, Range(0, n))``) are used by the ``prove_*``
helpers: they substitute each such variable by its symbolic end point and bound the result.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import Var
from ._form import (
    NEG_INF,
    POS_INF,
    Atom,
    AtomT,
    Bound,
    Lin,
    Num,
    dtype_bound,
    floordiv_num,
    ladd,
    lscale,
    mul_num,
)


@dataclass(frozen=True, slots=True)
class ConstIntBound:
    """Every value of an expression lies in ``[min_value, max_value]`` (inclusive).

    A side without a finite bound is ``-math.inf`` / ``math.inf`` (see :attr:`NEG_INF`,
    :attr:`POS_INF`); otherwise both are Python ints.
    """

    min_value: Num
    max_value: Num

    NEG_INF = NEG_INF
    POS_INF = POS_INF

    def is_const(self) -> bool:
        """True when the expression has exactly one possible value."""
        return self.min_value == self.max_value

    def __contains__(self, value: object) -> bool:
        return isinstance(value, (int, float)) and self.min_value <= value <= self.max_value


def _scale(b: Bound, k: int) -> Bound:
    if k >= 0:
        return (mul_num(b[0], k), mul_num(b[1], k))
    return (mul_num(b[1], k), mul_num(b[0], k))


def _mul(a: Bound, b: Bound) -> Bound:
    cands = [mul_num(x, y) for x in a for y in b]
    return (min(cands), max(cands))


def _fdiv_bound(a: Bound, b: Bound) -> Bound:
    """Bound of floor(a / b) for a divisor interval b that excludes 0."""
    if b[0] > 0 or b[1] < 0:
        cands: list[Num] = []
        for x in a:
            for y in b:
                if isinstance(x, float) or isinstance(y, float):
                    q: Num = (
                        0
                        if isinstance(y, float) and not isinstance(x, float)
                        else (POS_INF if (x > 0) == (y > 0) else NEG_INF)
                    )
                    cands.append(q)
                else:
                    cands.append(x // y)
        return (min(cands), max(cands))
    return (NEG_INF, POS_INF)


def _intersect(a: Bound, b: Bound) -> Bound:
    return (max(a[0], b[0]), min(a[1], b[1]))


class BoundMixin:
    """Bounds and proofs; mixed into :class:`~tilecraft.arith.Analyzer`."""

    _vbound: dict[Var, Bound]
    _sym: dict[Var, tuple[Lin, Lin]]
    _abound: dict[Atom, Bound]

    def lin_bound(self, x: Lin) -> Bound:
        """Constant bound of a canonical form."""
        lo: Num = x.c
        hi: Num = x.c
        for a, k in x.t.items():
            b = self.atom_bound(a)
            if k > 0:
                lo += mul_num(b[0], k)
                hi += mul_num(b[1], k)
            else:
                lo += mul_num(b[1], k)
                hi += mul_num(b[0], k)
        return (lo, hi)

    def atom_bound(self, a: AtomT) -> Bound:
        """Constant bound of one atom (cached until the bindings change)."""
        if type(a) is Var:
            b = self._vbound.get(a)
            return b if b is not None else dtype_bound(a.dtype)
        b = self._abound.get(a)  # type: ignore[arg-type]
        if b is None:
            b = _intersect(self._compute_atom_bound(a), dtype_bound(a.dt))  # type: ignore[arg-type, union-attr]
            self._abound[a] = b  # type: ignore[index]
        return b

    def _compute_atom_bound(self, a: Atom) -> Bound:
        k, args = a.kind, a.args
        if k == "fd":
            lo, hi = self.lin_bound(args[0])  # type: ignore[arg-type]
            c: int = args[1]  # type: ignore[assignment]
            return (floordiv_num(lo, c), floordiv_num(hi, c))
        if k == "fm":
            c = args[1]  # type: ignore[assignment]
            lo, hi = self.lin_bound(args[0])  # type: ignore[arg-type]
            if lo >= 0 and hi < c:
                return (lo, hi)
            return (0, c - 1)
        if k == "mul":
            out: Bound = (1, 1)
            for f in args:
                out = _mul(out, self.atom_bound(f))  # type: ignore[arg-type]
            return out
        if k in ("min", "max"):
            ba, bb = self.lin_bound(args[0]), self.lin_bound(args[1])  # type: ignore[arg-type]
            if k == "min":
                return (min(ba[0], bb[0]), min(ba[1], bb[1]))
            return (max(ba[0], bb[0]), max(ba[1], bb[1]))
        if k == "sel":
            bt, bf = self.lin_bound(args[1]), self.lin_bound(args[2])  # type: ignore[arg-type]
            return (min(bt[0], bf[0]), max(bt[1], bf[1]))
        if k == "fd2":
            return _fdiv_bound(self.lin_bound(args[0]), self.lin_bound(args[1]))  # type: ignore[arg-type]
        if k == "div":
            ba, bb = self.lin_bound(args[0]), self.lin_bound(args[1])  # type: ignore[arg-type]
            if bb[0] > 0 or bb[1] < 0:
                m = max(abs(ba[0]), abs(ba[1]))
                lo2: Num = NEG_INF if isinstance(m, float) else -m
                hi2: Num = m
                if ba[0] >= 0 and bb[0] > 0:
                    return _fdiv_bound(ba, bb)
                return (lo2, hi2)
            return (NEG_INF, POS_INF)
        if k == "fm2":
            ba, bb = self.lin_bound(args[0]), self.lin_bound(args[1])  # type: ignore[arg-type]
            if bb[0] > 0:
                hi3: Num = bb[1] - 1
                if ba[0] >= 0:
                    hi3 = min(hi3, ba[1])
                return (0, hi3)
            if bb[1] < 0:
                return (bb[0] + 1, 0)
            m2 = max(abs(bb[0]), abs(bb[1]))
            return (-m2 + 1, m2 - 1) if not isinstance(m2, float) else (NEG_INF, POS_INF)
        if k == "cast":
            v = args[0]
            if isinstance(v, Lin):
                return self.lin_bound(v)
            return dtype_bound(a.dt)
        return dtype_bound(a.dt)

    # proofs --------------------------------------------------------------------------------
    def _relax_one(self, x: Lin, a: Var, k: int) -> Lin:
        """Replace ``a`` by the symbolic end point that minimises ``x``."""
        lo_end, hi_end = self._sym[a]
        end = lo_end if k > 0 else hi_end
        rest = dict(x.t)
        del rest[a]
        return ladd(Lin(x.c, rest, x.dt), lscale(end, k))

    def prove_nonneg(self, x: Lin) -> bool:
        """True when ``x >= 0`` is proven (constant bounds, then symbolic end points)."""
        if self.lin_bound(x)[0] >= 0:
            return True
        if not self._sym:
            return False
        frontier = [x]
        for _ in range(3):
            nxt: list[Lin] = []
            for y in frontier:
                for a, k in y.t.items():
                    if type(a) is Var and a in self._sym:
                        z = self._relax_one(y, a, k)
                        if self.lin_bound(z)[0] >= 0:
                            return True
                        nxt.append(z)
            frontier = nxt[:6]
            if not frontier:
                return False
        return False

    def prove_nonpos(self, x: Lin) -> bool:
        """True when ``x <= 0`` is proven."""
        return self.prove_nonneg(lscale(x, -1))

    def prove_neg(self, x: Lin) -> bool:
        """True when ``x < 0`` is proven."""
        return self.prove_nonneg(Lin(-x.c - 1, {a: -k for a, k in x.t.items()}, x.dt))

    def prove_lt(self, a: Lin, b: Lin) -> bool:
        """True when ``a < b`` is proven."""
        return self.prove_neg(ladd(a, b, -1))

    def prove_range(self, x: Lin, lo: int, hi: int) -> bool:
        """True when ``lo <= x < hi`` is proven (symbolically)."""
        if not self._sym:
            return False
        return self.prove_nonneg(Lin(x.c - lo, x.t, x.dt)) and self.prove_neg(
            Lin(x.c - hi, x.t, x.dt)
        )
