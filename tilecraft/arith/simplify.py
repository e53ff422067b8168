"""Rewriting of integer expressions into the canonical :class:`~._form.Lin` form, and back.

Rules (each preserves the value for every assignment; integers are mathematical integers):

- ``floor((c*q + r) / c) = q + floor(r / c)`` and ``(c*q + r) % c = r % c`` for any integer q
- ``floor(r / c) = k`` and ``r % c = r - k*c`` when ``k*c <= r < (k+1)*c`` by bounds
- ``floor((g*B + s) / c) = floor(B / (c/g))``, ``(g*B + s) % c = (B % (c/g))*g + s``
  when ``g | c`` and ``0 <= s < g``
- ``floor(floor(x / a) / b) = floor(x / (a*b))`` and ``(x % a) % b = x % b`` when ``b | a``
- ``floor(x / c)*c + x % c = x`` and ``(floor(x / c) % b)*c + x % c = x % (c*b)``
- ``floor(x / -c) = floor(-x / c)``, ``x % -c = -((-x) % c)``
- ``x // 0 = x % 0 = trunc(x / 0) = 0`` (numpy's integer results; C would trap), and constant
  operands fold with wrap-around to the dtype (``MIN // -1 = MIN``, as numpy and the C helpers)
- ``trunc(x / c) = floor(x / c)`` when ``x >= 0`` and ``c > 0``
- ``min/max(a, b)`` decided by the sign of ``a - b``; common constants are pulled out
- ``select(c, t, f)`` decided by a constant condition
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..ir import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    BufferLoad,
    Cast,
    Div,
    Expr,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    Select,
    Sub,
    Var,
)
from ..ir.dtype import bool_
from ._form import (
    Atom,
    AtomT,
    Lin,
    VarKeys,
    atom_order,
    ladd,
    lconst,
    lgcd,
    lscale,
    lvar,
    var_key,
    wrap_int,
)

if TYPE_CHECKING:
    from .analyzer import Analyzer


class Canonicalizer:
    """IR integer expression -> Lin (with simplification rules) and Lin -> IR.

    Owned by an :class:`~tilecraft.arith.Analyzer`, which provides bounds and proofs.
    """

    def __init__(self, ana: Analyzer) -> None:
        self.ana = ana
        self.atoms: dict[object, Atom] = {}
        self.subst: dict[Var, Lin] = {}
        self.var_keys: VarKeys = {}  # sort keys, given in the order variables are first met
        self._seq = 0

    # atoms ---------------------------------------------------------------------------------
    def atom(self, kind: str, args: tuple[object, ...], key: object, dt: object) -> Atom:
        """The interned atom with structural ``key``."""
        full = (kind, dt, key)
        a = self.atoms.get(full)
        if a is None:
            self._seq += 1
            a = Atom(kind, args, dt, self._seq)  # type: ignore[arg-type]
            self.atoms[full] = a
        return a

    # IR -> Lin -----------------------------------------------------------------------------
    def lin(self, e: Expr) -> Lin:
        """The canonical form of integer expression ``e``."""
        fn = _LIN_FUNCS.get(type(e))
        if fn is None:
            return self._opaque(e)
        return fn(self, e)

    def _int(self, e: Expr) -> Lin:
        return Lin(e.value, {}, e.dtype)  # type: ignore[attr-defined]

    def _var(self, e: Expr) -> Lin:
        s: Lin | None = self.subst.get(e)  # type: ignore[call-overload]
        if s is not None:
            return s
        if e not in self.var_keys:
            var_key(e, self.var_keys)  # type: ignore[arg-type]
        return Lin(0, {e: 1}, e.dtype)  # type: ignore[dict-item]

    def _add(self, e: Expr) -> Lin:
        return self.merge_divmod(ladd(self.lin(e.a), self.lin(e.b)))  # type: ignore[attr-defined]

    def _sub(self, e: Expr) -> Lin:
        return self.merge_divmod(ladd(self.lin(e.a), self.lin(e.b), -1))  # type: ignore[attr-defined]

    def _mul(self, e: Expr) -> Lin:
        return self.mul(self.lin(e.a), self.lin(e.b))  # type: ignore[attr-defined]

    def mul(self, a: Lin, b: Lin) -> Lin:
        """``a * b`` distributed over the terms."""
        if not a.t:
            return lscale(b, a.c)
        if not b.t:
            return lscale(a, b.c)
        out = ladd(lscale(a, b.c), lscale(Lin(0, b.t, b.dt), a.c))
        for x, kx in a.t.items():
            for y, ky in b.t.items():
                out = ladd(out, Lin(0, {self._product(x, y, a.dt): kx * ky}, a.dt))
        return out

    def _product(self, x: AtomT, y: AtomT, dt: object) -> Atom:
        fs: list[AtomT] = []
        for f in (x, y):
            if type(f) is Atom and f.kind == "mul":
                fs.extend(f.args)  # type: ignore[arg-type]
            else:
                fs.append(f)
        fs.sort(key=lambda f: atom_order(f, self.var_keys))
        return self.atom("mul", tuple(fs), tuple(fs), dt)

    def merge_divmod(self, x: Lin) -> Lin:
        """Apply ``floor(y/c)*c*k + (y % c)*k = y*k`` and, for an index fused from three or
        more dimensions, ``(floor(y/c) % b)*c*k + (y % c)*k = floor((y % (c*b))/c)*c*k +
        (y % c)*k = (y % (c*b))*k`` to the terms of ``x``."""
        for a, k in x.t.items():
            if type(a) is Atom and a.kind == "fm":
                y, c = a.args
                rest = dict(x.t)
                del rest[a]
                partner = self.atoms.get(("fd", a.dt, (y.key(), c)))  # type: ignore[attr-defined]
                if partner is not None and x.t.get(partner) == k * c:  # type: ignore[operator]
                    del rest[partner]
                    out = ladd(Lin(x.c, rest, x.dt), lscale(y, k))  # type: ignore[arg-type]
                    return self.merge_divmod(out)
                for m, km in x.t.items():
                    wide = self._wider_mod(m, y, c, partner)  # type: ignore[arg-type]
                    if wide is not None and km == k * c:  # type: ignore[operator]
                        del rest[m]
                        return self.merge_divmod(ladd(Lin(x.c, rest, x.dt), lscale(wide, k)))
        return x

    def _wider_mod(self, m: AtomT, y: Lin, c: int, fd_yc: AtomT | None) -> Lin | None:
        """``y % (c*b)`` when ``m`` is ``floor(y/c) % b``; ``y' % (c*b)`` when it is
        ``floor((y' % (c*b))/c)`` with ``y' - y`` a multiple of ``c``."""
        if type(m) is not Atom or len(m.args) != 2:
            return None
        inner, d = m.args
        if not isinstance(inner, Lin) or not isinstance(d, int):
            return None
        if m.kind == "fm" and fd_yc is not None and inner.single() is fd_yc:
            return self.floormod(y, c * d)
        single = inner.single()
        if m.kind != "fd" or d != c or type(single) is not Atom or single.kind != "fm":
            return None
        base, wide = single.args
        if not isinstance(wide, int) or wide % c or not isinstance(base, Lin):
            return None
        diff = ladd(base, lscale(y, -1))  # y % c is base % c when c divides base - y
        return inner if not diff.t and diff.c % c == 0 else None

    # division ------------------------------------------------------------------------------
    def _floordiv(self, e: Expr) -> Lin:
        a, b = self.lin(e.a), self.lin(e.b)  # type: ignore[attr-defined]
        folded = _fold_division(FloorDiv, a, b)
        if folded is not None:
            return folded
        if not b.t:
            if b.c > 0:
                return self.floordiv(a, b.c)
            if b.c < 0:
                return self.floordiv(lscale(a, -1), -b.c)
        return self._divmod2("fd2", a, b)

    def _floormod(self, e: Expr) -> Lin:
        a, b = self.lin(e.a), self.lin(e.b)  # type: ignore[attr-defined]
        folded = _fold_division(FloorMod, a, b)
        if folded is not None:
            return folded
        if not b.t:
            if b.c > 0:
                return self.floormod(a, b.c)
            if b.c < 0:
                return lscale(self.floormod(lscale(a, -1), -b.c), -1)
        return self._divmod2("fm2", a, b)

    def _split(self, x: Lin, c: int) -> tuple[Lin, Lin]:
        """``x = c*q + r`` with q taking every term divisible by c and ``0 <= r.c < c``."""
        qt: dict[AtomT, int] = {}
        rt: dict[AtomT, int] = {}
        for a, k in x.t.items():
            if k % c == 0:
                qt[a] = k // c
            else:
                rt[a] = k
        qc, rc = divmod(x.c, c)
        return Lin(qc, qt, x.dt), Lin(rc, rt, x.dt)

    def _small_split(self, r: Lin, c: int) -> tuple[int, Lin, Lin] | None:
        """Find ``r = g*B + s`` with ``g | c``, ``g > 1`` and ``0 <= s < g`` by bounds."""
        for k in sorted({abs(v) for v in r.t.values()}, reverse=True):
            g = math.gcd(k, c)
            if g <= 1:
                continue
            bt = {a: v // g for a, v in r.t.items() if v % g == 0}
            st = {a: v for a, v in r.t.items() if v % g != 0}
            s = Lin(r.c % g, st, r.dt)
            lo, hi = self.ana.lin_bound(s)
            if lo >= 0 and hi < g:
                return g, Lin(r.c // g, bt, r.dt), s
        return None

    def floordiv(self, x: Lin, c: int) -> Lin:
        """``floor(x / c)`` for a constant ``c > 0``."""
        if c == 1:
            return x
        if not x.t:
            return Lin(x.c // c, {}, x.dt)
        q, r = self._split(x, c)
        return ladd(q, self._floordiv_rest(r, c))

    def _floordiv_rest(self, r: Lin, c: int) -> Lin:
        if not r.t:
            return Lin(r.c // c, {}, r.dt)
        lo, hi = self.ana.lin_bound(r)
        if lo >= 0 and hi < c:
            return Lin(0, {}, r.dt)
        if not isinstance(lo, float) and not isinstance(hi, float) and lo // c == hi // c:
            return Lin(lo // c, {}, r.dt)
        parts = self._small_split(r, c)
        if parts is not None:
            g, big, _ = parts
            return self.floordiv(big, c // g)
        inner = r.single()
        if type(inner) is Atom and inner.kind == "fd":
            y, d = inner.args
            return self.floordiv(y, d * c)  # type: ignore[arg-type, operator]
        if self.ana.prove_range(r, 0, c):
            return Lin(0, {}, r.dt)
        return lvar(self.atom("fd", (r, c), (r.key(), c), r.dt), r.dt)

    def floormod(self, x: Lin, c: int) -> Lin:
        """``x % c`` for a constant ``c > 0``."""
        if c == 1:
            return Lin(0, {}, x.dt)
        _, r = self._split(x, c)
        if not r.t:
            return r
        lo, hi = self.ana.lin_bound(r)
        if lo >= 0 and hi < c:
            return r
        if not isinstance(lo, float) and not isinstance(hi, float) and lo // c == hi // c:
            return Lin(r.c - (lo // c) * c, r.t, r.dt)
        parts = self._small_split(r, c)
        if parts is not None:
            g, big, small = parts
            return ladd(lscale(self.floormod(big, c // g), g), small)
        inner = r.single()
        if type(inner) is Atom and inner.kind == "fm" and inner.args[1] % c == 0:  # type: ignore[operator]
            return self.floormod(inner.args[0], c)  # type: ignore[arg-type]
        if self.ana.prove_range(r, 0, c):
            return r
        return lvar(self.atom("fm", (r, c), (r.key(), c), r.dt), r.dt)

    def _divmod2(self, kind: str, a: Lin, b: Lin) -> Lin:
        """floordiv/floormod by a non-constant (or zero) divisor."""
        if b.t and self.ana.prove_nonneg(a) and self.ana.prove_lt(a, b):
            return Lin(0, {}, a.dt) if kind == "fd2" else a
        if b.t and not a.t and a.c == 0:
            return a
        return lvar(self.atom(kind, (a, b), (a.key(), b.key()), a.dt), a.dt)

    def _div(self, e: Expr) -> Lin:
        a, b = self.lin(e.a), self.lin(e.b)  # type: ignore[attr-defined]
        folded = _fold_division(Div, a, b)
        if folded is not None:
            return folded
        if not b.t and b.c != 0:
            c = b.c
            if c < 0:
                a, c = lscale(a, -1), -c
            if self.ana.prove_nonneg(a):
                return self.floordiv(a, c)
            if self.ana.prove_nonneg(lscale(a, -1)):
                return lscale(self.floordiv(lscale(a, -1), c), -1)
            b = Lin(c, {}, b.dt)
        return lvar(self.atom("div", (a, b), (a.key(), b.key()), a.dt), a.dt)

    # min / max / select / cast ------------------------------------------------------------
    def _minmax(self, e: Expr) -> Lin:
        is_min = type(e) is Min
        a, b = self.lin(e.a), self.lin(e.b)  # type: ignore[attr-defined]
        d = ladd(a, b, -1)
        if self.ana.prove_nonpos(d):
            return a if is_min else b
        if self.ana.prove_nonneg(d):
            return b if is_min else a
        shift = min(a.c, b.c)
        a, b = Lin(a.c - shift, a.t, a.dt), Lin(b.c - shift, b.t, b.dt)
        kind = "min" if is_min else "max"
        ka, kb = a.key(), b.key()
        at = self.atom(kind, (a, b), frozenset((ka, kb)), a.dt)
        return Lin(shift, {at: 1}, a.dt)

    def _select(self, e: Expr) -> Lin:
        cond = self.ana.simplify(e.condition)  # type: ignore[attr-defined]
        if type(cond) is IntImm:
            return self.lin(e.true_value if cond.value else e.false_value)  # type: ignore[attr-defined]
        t, f = self.lin(e.true_value), self.lin(e.false_value)  # type: ignore[attr-defined]
        kt, kf = t.key(), f.key()
        if kt == kf:
            return t
        from ._form import skey

        return lvar(self.atom("sel", (cond, t, f), (skey(cond), kt, kf), t.dt), t.dt)

    def _cast(self, e: Expr) -> Lin:
        src = e.value  # type: ignore[attr-defined]
        if src.dtype.is_integer or src.dtype.is_bool:
            v = self.lin(src) if src.dtype.is_integer else None
            if v is None:
                sv = self.ana.simplify(src)
                if type(sv) is IntImm:
                    return Lin(wrap_int(sv.value, e.dtype), {}, e.dtype)
                return lvar(self.atom("cast", (sv,), (self._skey(sv),), e.dtype), e.dtype)
            if not v.t:
                return Lin(wrap_int(v.c, e.dtype), {}, e.dtype)
            if v.dt == e.dtype:
                return v
            return lvar(self.atom("cast", (v,), (v.dt, v.key()), e.dtype), e.dtype)
        return self._opaque(e)

    def _skey(self, e: Expr) -> object:
        from ._form import skey

        return skey(e)

    def _opaque(self, e: Expr) -> Lin:
        s = self.ana.simplify_children(e)
        if type(s) is IntImm:
            return Lin(s.value, {}, s.dtype)
        if type(s) is BufferLoad or not isinstance(s, (Min, Max, Select)):
            from ._form import skey

            return lvar(self.atom("x", (s,), skey(s), s.dtype), s.dtype)
        return self.lin(s)

    # Lin -> IR -----------------------------------------------------------------------------
    def expr(self, x: Lin) -> Expr:
        """Rebuild IR from a Lin: terms by descending |coefficient|, constant last."""
        dt = x.dt
        items = sorted(x.t.items(), key=self._term_sort) if len(x.t) > 1 else list(x.t.items())
        out: Expr | None = None
        if items and items[0][1] < 0 and x.c > 0:
            out = IntImm(dt, x.c)
        for a, k in items:
            ae = self.atom_expr(a)
            if out is None:
                out = ae if k == 1 else Mul(ae, IntImm(dt, k))
            elif k > 0:
                out = Add(out, ae if k == 1 else Mul(ae, IntImm(dt, k)))
            else:
                out = Sub(out, ae if k == -1 else Mul(ae, IntImm(dt, -k)))
        if out is None:
            return IntImm(dt, x.c)
        if x.c > 0 and not (items and items[0][1] < 0):
            return Add(out, IntImm(dt, x.c))
        if x.c < 0:
            return Sub(out, IntImm(dt, -x.c))
        return out

    def _term_sort(self, item: tuple[AtomT, int]) -> tuple[object, ...]:
        """Terms by descending |coefficient|, positive first, then by atom order."""
        a, k = item
        return (k < 0, -abs(k), atom_order(a, self.var_keys))

    def atom_expr(self, a: AtomT) -> Expr:
        """IR of one atom (cached on the atom)."""
        if type(a) is Var:
            return a
        e = a.expr  # type: ignore[union-attr]
        if e is None:
            e = self._build_atom(a)  # type: ignore[arg-type]
            a.expr = e  # type: ignore[union-attr]
        return e

    def _build_atom(self, a: Atom) -> Expr:
        k, args, dt = a.kind, a.args, a.dt
        if k in ("fd", "fm"):
            cls = FloorDiv if k == "fd" else FloorMod
            return cls(self.expr(args[0]), IntImm(dt, args[1]))  # type: ignore[arg-type]
        if k == "mul":
            fs: list[AtomT] = sorted(args, key=lambda f: atom_order(f, self.var_keys))  # type: ignore[arg-type]
            out = self.atom_expr(fs[0])
            for f in fs[1:]:
                out = Mul(out, self.atom_expr(f))
            return out
        if k in ("min", "max", "fd2", "fm2", "div"):
            cls2 = {"min": Min, "max": Max, "fd2": FloorDiv, "fm2": FloorMod, "div": Div}[k]
            return cls2(self.expr(args[0]), self.expr(args[1]))  # type: ignore[arg-type]
        if k == "sel":
            return Select(args[0], self.expr(args[1]), self.expr(args[2]))  # type: ignore[arg-type]
        if k == "cast":
            v = args[0]
            return Cast(dt, self.expr(v) if isinstance(v, Lin) else v)  # type: ignore[arg-type]
        return args[0]  # type: ignore[return-value]

    # comparisons ---------------------------------------------------------------------------
    def compare(self, cls: type, a: Lin, b: Lin) -> Expr:
        """Simplified integer comparison ``a <cls> b`` (bool IR)."""
        if cls is GT:
            cls, a, b = LT, b, a
        elif cls is GE:
            cls, a, b = LE, b, a
        d = ladd(a, b, -1)
        if cls is LE:
            cls, d = LT, Lin(d.c - 1, d.t, d.dt)
        ana = self.ana
        if cls is LT:
            if ana.prove_neg(d):
                return IntImm(bool_, 1)
            if ana.prove_nonneg(d):
                return IntImm(bool_, 0)
            g = lgcd(d)
            if g > 1:  # g*D + c < 0  <=>  D + floor(c/g) < 0
                d = Lin(d.c // g, {x: v // g for x, v in d.t.items()}, d.dt)
        else:
            if not d.t:
                return IntImm(bool_, int((d.c == 0) == (cls is EQ)))
            g = lgcd(d)
            if d.c % g != 0 or ana.prove_neg(d) or ana.prove_neg(lscale(d, -1)):
                return IntImm(bool_, int(cls is NE))
            d = Lin(d.c // g, {x: v // g for x, v in d.t.items()}, d.dt)
        pos = Lin(0, {x: v for x, v in d.t.items() if v > 0}, d.dt)
        if not pos.t:  # c - N < 0  ->  c < N
            neg = Lin(0, {x: -v for x, v in d.t.items()}, d.dt)
            return cls(IntImm(d.dt, d.c), self.expr(neg))  # type: ignore[no-any-return]
        neg = Lin(-d.c, {x: -v for x, v in d.t.items() if v < 0}, d.dt)
        return cls(self.expr(pos), self.expr(neg))  # type: ignore[no-any-return]


# the function turning each node type into its canonical form: one table for the class, not
# one per analyzer (analyzers are made by the thousand)
_LIN_FUNCS: dict[type, Callable[[Canonicalizer, Expr], Lin]] = {
    IntImm: Canonicalizer._int,
    Var: Canonicalizer._var,
    Add: Canonicalizer._add,
    Sub: Canonicalizer._sub,
    Mul: Canonicalizer._mul,
    FloorDiv: Canonicalizer._floordiv,
    FloorMod: Canonicalizer._floormod,
    Div: Canonicalizer._div,
    Min: Canonicalizer._minmax,
    Max: Canonicalizer._minmax,
    Select: Canonicalizer._select,
    Cast: Canonicalizer._cast,
}


__all__ = ["Canonicalizer", "lconst"]


def _fold_division(cls: type, a: Lin, b: Lin) -> Lin | None:
    """The value of an integer division whose divisor is 0 or whose operands are constants.

    numpy's results, which the generated code reproduces: 0 for a zero divisor; otherwise the
    exact quotient (floor or truncated) or remainder, wrapped to the dtype (``MIN // -1``).
    """
    if b.t:
        return None
    if b.c == 0:
        return Lin(0, {}, a.dt)
    if a.t:
        return None
    x, y = a.c, b.c
    if cls is FloorDiv:
        value = x // y
    elif cls is FloorMod:
        value = x % y
    else:
        value = abs(x) // abs(y) * (1 if (x >= 0) == (y > 0) else -1)
    return Lin(wrap_int(value, a.dt), {}, a.dt)
