"""The :class:`Analyzer`: simplification, constant bounds and proofs under variable bindings.

Integer expressions are rewritten into a canonical affine form (see :mod:`._form`) and back;
boolean expressions are simplified by deciding comparisons from bounds; float expressions get
their children simplified and exactly representable constant folds only.

Integers are treated as mathematical integers: the analyzer assumes index arithmetic does not
overflow its dtype (as TVM's does).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator

import numpy as np

from ..errors import IRError
from ..ir import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    Cast,
    CmpOp,
    Div,
    Expr,
    FloatImm,
    IntImm,
    Mul,
    Not,
    Or,
    Range,
    Select,
    Sub,
    Var,
    as_expr,
)
from ..ir.dtype import bool_
from ..ir.visitor import node_fields
from ._form import Atom, Bound, Lin, ladd, lscale, skey, wrap_int
from .bound import BoundMixin, ConstIntBound
from .simplify import Canonicalizer

_NEGATE = {LT: GE, LE: GT, GT: LE, GE: LT, EQ: NE, NE: EQ}
_FLOAT_FOLD: dict[type, Callable[[float, float], float]] = {
    Add: lambda x, y: x + y,
    Sub: lambda x, y: x - y,
    Mul: lambda x, y: x * y,
}
_CMP_FOLD: dict[type, Callable[[object, object], bool]] = {
    LT: lambda x, y: x < y,  # type: ignore[operator]
    LE: lambda x, y: x <= y,  # type: ignore[operator]
    GT: lambda x, y: x > y,  # type: ignore[operator]
    GE: lambda x, y: x >= y,  # type: ignore[operator]
    EQ: lambda x, y: x == y,
    NE: lambda x, y: x != y,
}


def _round_float(value: float, dt: object) -> float:
    """Round a double to float dtype ``dt`` (exact IEEE rounding for 16/32/64 bits)."""
    name = str(dt)
    if name == "float32":
        return float(np.float32(value))
    if name == "float16":
        return float(np.float16(value))
    return value


class Analyzer(BoundMixin):
    """Simplify and reason about index expressions under variable bindings.

    Examples
    --------
    >>> i, j = Var("i", "int32"), Var("j", "int32")
    >>> ana = Analyzer(); ana.bind(i, Range(0, 16)); ana.bind(j, Range(0, 16))
    >>> ana.simplify((i * 16 + j) // 16)   # -> i
    """

    def __init__(self) -> None:
        self._vbound: dict[Var, Bound] = {}
        self._sym: dict[Var, tuple[Lin, Lin]] = {}
        self._abound: dict[Atom, Bound] = {}
        self._facts: set[object] = set()
        self._cache: dict[int, tuple[Expr, Expr]] = {}
        self.canon = Canonicalizer(self)

    # bindings ------------------------------------------------------------------------------
    def bind(self, var: Var, value: Range | Expr | int, allow_override: bool = True) -> None:
        """Bind ``var`` to a range (``min <= var < min + extent``) or to a value.

        Parameters
        ----------
        var
            An integer variable.
        value
            A :class:`~tilecraft.ir.Range`, or an expression / int the variable equals
            (it is substituted during simplification).
        allow_override
            When False, re-binding an already bound variable raises :class:`IRError`.
        """
        if not allow_override and (var in self._vbound or var in self.canon.subst):
            raise IRError(f"Analyzer.bind: variable {var.name!r} is already bound")
        self._invalidate()
        if isinstance(value, Range):
            lo = self.canon.lin(value.min)
            hi = ladd(lo, self.canon.lin(value.extent))
            hi = Lin(hi.c - 1, hi.t, hi.dt)
            self._set_var_bound(var, lo, hi)
            return
        v = self.canon.lin(as_expr(value, var.dtype))
        self.canon.subst[var] = v
        self._vbound[var] = self.lin_bound(v)

    def _set_var_bound(self, var: Var, lo: Lin, hi: Lin) -> None:
        blo, bhi = self.lin_bound(lo)[0], self.lin_bound(hi)[1]
        old = self._vbound.get(var)
        if old is not None:
            blo, bhi = max(blo, old[0]), min(bhi, old[1])
        self._vbound[var] = (blo, bhi)
        if lo.t or hi.t:
            olds = self._sym.get(var)
            if olds is not None:
                lo = lo if lo.t else olds[0]
                hi = hi if hi.t else olds[1]
            self._sym[var] = (lo, hi)

    def clear_cache(self) -> None:
        """Forget cached simplification results and atom bounds (they are rebuilt on demand)."""
        self._invalidate()

    def _invalidate(self) -> None:
        self._cache.clear()
        self._abound.clear()

    @contextlib.contextmanager
    def constraint(self, cond: Expr) -> Iterator[None]:
        """Within the ``with`` block, assume ``cond`` holds.

        Conjuncts of the form ``var < e``, ``var <= e``, ``var > e``, ``var >= e`` and
        ``var == e`` tighten the variable's bounds; other conjuncts are remembered as facts.
        """
        saved = (dict(self._vbound), dict(self._sym), set(self._facts))
        try:
            self._add_constraint(self.simplify(cond))
            yield
        finally:
            self._vbound, self._sym, self._facts = saved
            self._invalidate()

    def _add_constraint(self, cond: Expr) -> None:
        if isinstance(cond, And):
            self._add_constraint(cond.a)
            self._add_constraint(cond.b)
            return
        self._invalidate()
        self._facts.add(skey(cond))
        if type(cond) not in (LT, EQ) or not cond.a.dtype.is_integer:  # type: ignore[attr-defined]
            return
        d = ladd(self.canon.lin(cond.a), self.canon.lin(cond.b), -1)  # type: ignore[attr-defined]
        if type(cond) is LT:
            d = Lin(d.c + 1, d.t, d.dt)  # d <= 0
        for a, k in d.t.items():
            if type(a) is not Var or abs(k) != 1:
                continue
            rest = ladd(d, Lin(0, {a: k}, d.dt), -1)  # k*a + rest <= 0 (or == 0)
            bound = lscale(rest, -k)  # a <= bound (k=1) or a >= bound (k=-1)
            cur = self._vbound.get(a, self.atom_bound(a))
            lo_l = self._sym.get(a, (Lin(cur[0], {}, d.dt), None))[0]  # type: ignore[arg-type]
            hi_l = self._sym.get(a, (None, Lin(cur[1], {}, d.dt)))[1]  # type: ignore[arg-type]
            if type(cond) is EQ:
                self._set_var_bound(a, bound, bound)
            elif k == 1:
                self._set_var_bound(a, lo_l if not isinstance(cur[0], float) else bound, bound)
                if isinstance(cur[0], float):
                    self._vbound[a] = (cur[0], self.lin_bound(bound)[1])
            else:
                self._set_var_bound(a, bound, hi_l if not isinstance(cur[1], float) else bound)
                if isinstance(cur[1], float):
                    self._vbound[a] = (self.lin_bound(bound)[0], cur[1])
            self._invalidate()

    # simplification ------------------------------------------------------------------------
    def simplify(self, expr: Expr | int) -> Expr:
        """Return an expression equal to ``expr`` for every assignment, in canonical form.

        Integer (int32/int64) expressions become sums of terms sorted canonically, with
        floordiv/floormod, min/max, comparisons and selects decided where the known bounds
        allow. Float expressions keep their value (only exact constant folds).
        """
        if not isinstance(expr, Expr):
            return as_expr(expr)
        if type(expr) is IntImm:  # a constant is its own canonical form
            return expr
        hit = self._cache.get(id(expr))
        if hit is not None and hit[0] is expr:
            return hit[1]
        dt = expr.dtype
        if dt.lanes != 1:
            out = self.simplify_children(expr)
        elif dt.is_integer:
            out = self.canon.expr(self.canon.lin(expr))
        elif dt.is_bool:
            out = self._bool(expr)
        else:
            out = self.simplify_children(expr)
        self._cache[id(expr)] = (expr, out)
        return out

    def simplify_children(self, e: Expr) -> Expr:
        """Simplify the operands of ``e`` and fold exact constants at the top."""
        changes: dict[str, object] = {}
        for name in node_fields(type(e)):
            v = getattr(e, name)
            if isinstance(v, Expr):
                nv = self.simplify(v)
                if nv is not v:
                    changes[name] = nv
            elif isinstance(v, tuple) and v and isinstance(v[0], Expr):
                nt = tuple(self.simplify(x) for x in v)
                if any(x is not y for x, y in zip(nt, v, strict=True)):
                    changes[name] = nt
        out = e.update(**changes) if changes else e
        return self._fold(out)

    def _fold(self, e: Expr) -> Expr:
        cls = type(e)
        fold = _FLOAT_FOLD.get(cls)
        if (
            fold is not None
            and type(e.a) is FloatImm  # type: ignore[attr-defined]
            and type(e.b) is FloatImm  # type: ignore[attr-defined]
            and str(e.dtype) != "bfloat16"
        ):
            return FloatImm(e.dtype, _round_float(fold(e.a.value, e.b.value), e.dtype))  # type: ignore[attr-defined]
        if cls is Mul and e.dtype.is_float:
            for x, y in ((e.a, e.b), (e.b, e.a)):  # type: ignore[attr-defined]
                if type(y) is FloatImm and y.value == 1.0:
                    return x  # type: ignore[no-any-return]
        if cls is Div and e.dtype.is_float and type(e.b) is FloatImm and e.b.value == 1.0:  # type: ignore[attr-defined]
            return e.a  # type: ignore[attr-defined, no-any-return]
        if cls is Cast:
            return self._fold_cast(e)
        if cls is Select:
            c = e.condition  # type: ignore[attr-defined]
            if type(c) is IntImm:
                return e.true_value if c.value else e.false_value  # type: ignore[attr-defined, no-any-return]
        return e

    def _fold_cast(self, e: Expr) -> Expr:
        v = e.value  # type: ignore[attr-defined]
        dt = e.dtype
        if v.dtype == dt:
            return v  # type: ignore[no-any-return]
        if type(v) is IntImm:
            if dt.is_float:
                return FloatImm(dt, _round_float(float(v.value), dt))
            return IntImm(dt, wrap_int(v.value, dt))
        if type(v) is FloatImm and dt.is_float and str(dt) != "bfloat16":
            return FloatImm(dt, _round_float(v.value, dt))
        if type(v) is FloatImm and dt.is_bool:
            return IntImm(dt, int(v.value != 0.0))
        if type(v) is FloatImm and dt.is_integer and math.isfinite(v.value):
            return IntImm(dt, wrap_int(int(v.value), dt))
        return e

    # booleans ------------------------------------------------------------------------------
    def _bool(self, e: Expr) -> Expr:
        out = self._bool_rules(e)
        if type(out) is not IntImm and self._facts and skey(out) in self._facts:
            return IntImm(bool_, 1)
        return out

    def _bool_rules(self, e: Expr) -> Expr:
        cls = type(e)
        if isinstance(e, CmpOp):
            if e.a.dtype.is_integer and e.a.dtype.lanes == 1:
                return self.canon.compare(cls, self.canon.lin(e.a), self.canon.lin(e.b))
            a, b = self.simplify(e.a), self.simplify(e.b)
            if type(a) in (FloatImm, IntImm) and type(b) is type(a):
                return IntImm(bool_, int(_CMP_FOLD[cls](a.value, b.value)))  # type: ignore[attr-defined]
            return e.update(a=a, b=b)
        if cls is And or cls is Or:
            a = self.simplify(e.a)  # type: ignore[attr-defined]
            absorbing = 0 if cls is And else 1
            if type(a) is IntImm:
                return a if a.value == absorbing else self.simplify(e.b)  # type: ignore[attr-defined]
            b = self.simplify(e.b)  # type: ignore[attr-defined]
            if type(b) is IntImm:
                return b if b.value == absorbing else a
            if skey(a) == skey(b):
                return a
            return e.update(a=a, b=b)
        if cls is Not:
            a = self.simplify(e.a)  # type: ignore[attr-defined]
            if type(a) is IntImm:
                return IntImm(bool_, 1 - a.value)
            if type(a) is Not:
                return a.a
            neg = _NEGATE.get(type(a))  # type: ignore[arg-type]
            if neg is not None:
                return self._bool(neg(a.a, a.b))  # type: ignore[attr-defined]
            return e.update(a=a)
        if cls is Var:
            s = self.canon.subst.get(e)  # type: ignore[call-overload]
            return e if s is None else IntImm(bool_, int(s.c != 0))
        return self.simplify_children(e)

    # queries -------------------------------------------------------------------------------
    def const_int_bound(self, expr: Expr | int) -> ConstIntBound:
        """Inclusive constant bounds of an integer (or bool) expression.

        Unbounded sides are ``-math.inf`` / ``math.inf``; an unbound variable is bounded by
        its dtype's range.
        """
        e = as_expr(expr)
        if e.dtype.is_integer and e.dtype.lanes == 1:
            lo, hi = self.lin_bound(self.canon.lin(e))
            return ConstIntBound(lo, hi)
        if e.dtype.is_bool:
            s = self.simplify(e)
            if type(s) is IntImm:
                return ConstIntBound(s.value, s.value)
            return ConstIntBound(0, 1)
        return ConstIntBound(ConstIntBound.NEG_INF, ConstIntBound.POS_INF)

    def can_prove(self, cond: Expr | bool) -> bool:
        """True only when ``cond`` holds for every assignment consistent with the bindings."""
        if isinstance(cond, bool):
            return cond
        s = self.simplify(cond)
        return type(s) is IntImm and s.value != 0

    def can_prove_equal(self, a: Expr | int, b: Expr | int) -> bool:
        """True only when ``a`` and ``b`` are provably equal."""
        ea = as_expr(a, b.dtype if isinstance(b, Expr) else None)
        eb = as_expr(b, ea.dtype)
        if ea.dtype.is_integer and eb.dtype == ea.dtype:
            d = ladd(self.canon.lin(ea), self.canon.lin(eb), -1)
            return not d.t and d.c == 0
        return bool(skey(self.simplify(ea)) == skey(self.simplify(eb)))

    def bound_of(self, var: Var) -> ConstIntBound:
        """The constant bound currently known for ``var``."""
        lo, hi = self.atom_bound(var)
        return ConstIntBound(lo, hi)


__all__ = ["Analyzer", "ConstIntBound"]
