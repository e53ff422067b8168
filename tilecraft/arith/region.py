"""Integer sets and access regions: what an index covers when loop variables range over domains.

Evaluation works on the canonical affine form, so it is exact for affine indices (each variable
appears once after simplification); floordiv and min/max are relaxed monotonically, floormod
exactly when it does not wrap and as ``[0, c-1]`` otherwise, and anything else by its constant
bounds (over-approximating). End points may be symbolic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import TilecraftError
from ..ir import Expr, IntImm, Max, Min, Range, Var, as_expr, collect_vars
from ._form import Atom, AtomT, Lin, ladd, lscale
from .analyzer import Analyzer

_Ends = tuple[Lin | None, Lin | None]  # None: unbounded on that side


@dataclass(frozen=True, slots=True, eq=False)
class IntSet:
    """The integer interval ``[min_value, max_value]`` (inclusive); None means unbounded."""

    min_value: Expr | None
    max_value: Expr | None

    @staticmethod
    def single_point(value: Expr | int) -> IntSet:
        """The set holding only ``value``."""
        e = as_expr(value)
        return IntSet(e, e)

    @staticmethod
    def interval(lo: Expr | int, hi: Expr | int) -> IntSet:
        """``[lo, hi]`` inclusive."""
        return IntSet(as_expr(lo), as_expr(hi))

    @staticmethod
    def from_range(r: Range) -> IntSet:
        """``[r.min, r.min + r.extent - 1]``."""
        return IntSet(r.min, Analyzer().simplify(r.min + r.extent - 1))

    def is_bounded(self) -> bool:
        """True when both ends are known."""
        return self.min_value is not None and self.max_value is not None

    def to_range(self, analyzer: Analyzer | None = None) -> Range:
        """The :class:`~tilecraft.ir.Range` ``[min, max]``; raises when unbounded."""
        if self.min_value is None or self.max_value is None:
            raise TilecraftError("IntSet.to_range: the set is unbounded")
        ana = analyzer or Analyzer()
        return Range(self.min_value, ana.simplify(self.max_value - self.min_value + 1))


def _const_range(r: Range) -> bool:
    """True when ``r``'s ends are constants of one dtype."""
    return type(r.min) is IntImm and type(r.extent) is IntImm and r.min.dtype == r.extent.dtype


def _has_vars(e: Expr) -> bool:
    """True when ``e`` uses a variable (a constant answers without a walk)."""
    return type(e) is not IntImm and bool(collect_vars(e))


class _Relaxer:
    def __init__(self, dom: Mapping[Var, Range | IntSet], ana: Analyzer) -> None:
        self.ana = ana
        self.canon = ana.canon
        self.dom: dict[Var, _Ends] = {}
        for v, d in dom.items():
            if isinstance(d, Range) and _const_range(d):
                # a constant range: its ends directly (what simplifying them gives)
                lo = self.canon.lin(d.min)
                self.dom[v] = (lo, Lin(lo.c + d.extent.value - 1, {}, lo.dt))  # type: ignore[attr-defined]
                continue
            s = IntSet.from_range(d) if isinstance(d, Range) else d
            self.dom[v] = (
                None if s.min_value is None else self.canon.lin(s.min_value),
                None if s.max_value is None else self.canon.lin(s.max_value),
            )
        self._ranges = {v: d for v, d in dom.items() if isinstance(d, Range)}
        self._bound_ana: Analyzer | None = None
        # variables whose constant bounds are real (constant ranges), not dtype limits
        self.const_dom: set[Var] = {
            v for v, d in self._ranges.items() if not _has_vars(d.min) and not _has_vars(d.extent)
        }

    @property
    def bound_ana(self) -> Analyzer:
        """The domains as an analyzer's bindings (built on first use: most regions are affine
        and never ask)."""
        if self._bound_ana is None:
            ana = Analyzer()
            for v, d in self._ranges.items():
                ana.bind(v, d)
            # an access under an empty domain never happens, so every domain may be assumed
            # non-empty: a symbolic extent n is then at least 1 (a divisor n is positive)
            for d in self._ranges.values():
                if _has_vars(d.extent):
                    ana._add_constraint(ana.simplify(d.extent >= 1))
            self._bound_ana = ana
        return self._bound_ana

    def depends(self, a: AtomT) -> bool:
        if type(a) is Var:
            return a in self.dom
        return any(v in self.dom for v in collect_vars(self.canon.atom_expr(a)))

    def lin(self, x: Lin) -> _Ends:
        lo: Lin | None = Lin(x.c, {}, x.dt)
        hi: Lin | None = Lin(x.c, {}, x.dt)
        for a, k in x.t.items():
            alo, ahi = self.atom(a)
            if k < 0:
                alo, ahi = ahi, alo
            lo = None if lo is None or alo is None else ladd(lo, lscale(alo, k))
            hi = None if hi is None or ahi is None else ladd(hi, lscale(ahi, k))
        return lo, hi

    def atom(self, a: AtomT) -> _Ends:
        if not self.depends(a):
            point = Lin(0, {a: 1}, a.dtype if type(a) is Var else a.dt)  # type: ignore[union-attr]
            return point, point
        if type(a) is Var:
            return self.dom[a]
        assert isinstance(a, Atom)
        kind = a.kind
        if kind in ("fd", "fm"):
            inner: Lin = a.args[0]  # type: ignore[assignment]
            c: int = a.args[1]  # type: ignore[assignment]
            lo, hi = self.lin(inner)
            if lo is not None and hi is not None:
                qlo, qhi = self.canon.floordiv(lo, c), self.canon.floordiv(hi, c)
                if kind == "fd":
                    return qlo, qhi
                if self.ana.can_prove_equal(self.canon.expr(qlo), self.canon.expr(qhi)):
                    return self.canon.floormod(lo, c), self.canon.floormod(hi, c)
                return Lin(0, {}, a.dt), Lin(c - 1, {}, a.dt)
            if kind == "fd":
                return (
                    None if lo is None else self.canon.floordiv(lo, c),
                    None if hi is None else self.canon.floordiv(hi, c),
                )
            return Lin(0, {}, a.dt), Lin(c - 1, {}, a.dt)
        if kind in ("min", "max"):
            fa, fb = self.lin(a.args[0]), self.lin(a.args[1])  # type: ignore[arg-type]
            op = Min if kind == "min" else Max
            ends: list[Lin | None] = []
            for x, y in zip(fa, fb, strict=True):
                if x is None or y is None:
                    ends.append(None)
                else:
                    ends.append(self.canon.lin(op(self.canon.expr(x), self.canon.expr(y))))
            return ends[0], ends[1]
        if kind in ("fd2", "fm2"):
            return self.divmod2(a)
        expr = self.canon.atom_expr(a)
        if not all(v in self.const_dom for v in collect_vars(expr)):
            # a constant bound of a term of symbolic quantities comes from dtype limits
            # (2**31 - 1 for int32), which is no bound an allocation or a loop can use
            return None, None
        b = self.bound_ana.const_int_bound(expr)
        return (
            None if isinstance(b.min_value, float) else Lin(b.min_value, {}, a.dt),
            None if isinstance(b.max_value, float) else Lin(b.max_value, {}, a.dt),
        )

    def divmod2(self, a: Atom) -> _Ends:
        """Ends of ``x // d`` or ``x % d`` for a divisor ``d`` the domain does not vary."""
        num: Lin = a.args[0]  # type: ignore[assignment]
        den: Lin = a.args[1]  # type: ignore[assignment]
        x, d = self.canon.expr(num), self.canon.expr(den)
        if any(v in self.dom for v in collect_vars(d)) or not self.bound_ana.can_prove(d >= 1):
            return None, None
        if self.bound_ana.can_prove(x >= 0) and self.bound_ana.can_prove(x < d):
            # no wrap-around: the quotient is 0 and the remainder is x itself
            return (Lin(0, {}, a.dt),) * 2 if a.kind == "fd2" else self.lin(num)
        if a.kind == "fm2":
            return Lin(0, {}, a.dt), ladd(den, Lin(-1, {}, a.dt))
        lo, hi = self.lin(num)  # floordiv by a positive divisor is monotone
        return (
            None if lo is None else self.canon.lin(self.canon.expr(lo) // d),
            None if hi is None else self.canon.lin(self.canon.expr(hi) // d),
        )


def eval_set(
    expr: Expr, dom_map: Mapping[Var, Range | IntSet], analyzer: Analyzer | None = None
) -> IntSet:
    """The set of values ``expr`` takes when the variables of ``dom_map`` range over it.

    Variables not in ``dom_map`` stay symbolic. Exact for affine expressions, an
    over-approximation otherwise.
    """
    return eval_sets((expr,), dom_map, analyzer)[0]


def eval_sets(
    exprs: Sequence[Expr], dom_map: Mapping[Var, Range | IntSet], analyzer: Analyzer | None = None
) -> list[IntSet]:
    """:func:`eval_set` of each of ``exprs`` over one ``dom_map`` (the domain is prepared
    once: cheaper than a call per expression when the domain is large)."""
    ana = analyzer or Analyzer()
    rel = _Relaxer(dom_map, ana)
    out = []
    for e in exprs:
        lo, hi = rel.lin(ana.canon.lin(e))
        out.append(
            IntSet(
                None if lo is None else ana.canon.expr(lo),
                None if hi is None else ana.canon.expr(hi),
            )
        )
    return out


def eval_region(
    region: Sequence[Expr | Range | int],
    dom_map: Mapping[Var, Range | IntSet],
    analyzer: Analyzer | None = None,
) -> list[Range]:
    """Per dimension, the range an access covers while ``dom_map``'s variables vary.

    Parameters
    ----------
    region
        Index expressions (a point access) or ranges ``(min, extent)`` per dimension.
    dom_map
        Domains of the variables to relax (loop variables).
    analyzer
        Facts about the other variables.

    Raises
    ------
    TilecraftError
        When a dimension is unbounded.
    """
    ana = analyzer or Analyzer()
    rel = _Relaxer(dom_map, ana)
    out: list[Range] = []
    for dim, item in enumerate(region):
        r = item if isinstance(item, Range) else Range(as_expr(item), as_expr(1))
        first = ana.canon.lin(r.min)
        last = ladd(first, ana.canon.lin(r.extent))
        lo, _ = rel.lin(first)
        _, hi = rel.lin(Lin(last.c - 1, last.t, last.dt))
        if lo is None or hi is None:
            raise TilecraftError(f"eval_region: dimension {dim} is unbounded")
        ext = ladd(hi, lo, -1)
        out.append(Range(ana.canon.expr(lo), ana.canon.expr(Lin(ext.c + 1, ext.t, ext.dt))))
    return out


def relax_region(
    region: Sequence[Range],
    loops_dom: Mapping[Var, Range | IntSet],
    analyzer: Analyzer | None = None,
) -> list[Range]:
    """The region ``region`` covers over all iterations of the loops in ``loops_dom``."""
    return eval_region(region, loops_dom, analyzer)


def union_region(
    regions: Sequence[Sequence[Range]], analyzer: Analyzer | None = None
) -> list[Range]:
    """The smallest per-dimension box holding every region (symbolic min/max where undecided)."""
    if not regions:
        raise TilecraftError("union_region: no regions given")
    ana = analyzer or Analyzer()
    rank = len(regions[0])
    if any(len(r) != rank for r in regions):
        raise TilecraftError("union_region: regions have different ranks")
    out: list[Range] = []
    for d in range(rank):
        lo: Expr = regions[0][d].min
        hi: Expr = regions[0][d].min + regions[0][d].extent
        for r in regions[1:]:
            lo = ana.simplify(Min(lo, r[d].min))
            hi = ana.simplify(Max(hi, r[d].min + r[d].extent))
        lo = ana.simplify(lo)
        out.append(Range(lo, ana.simplify(hi - lo)))
    return out


__all__ = ["IntSet", "eval_region", "eval_set", "relax_region", "union_region"]
