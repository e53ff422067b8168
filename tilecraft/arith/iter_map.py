"""Iterator-map detection: are index expressions an affine map of fused and split iterators?

Each index is rewritten as an :class:`IterSumExpr`: ``base + sum(split.scale * split)`` where an
:class:`IterSplitExpr` ``(mark // lower_factor) % extent`` takes some mixed-radix digits of an
:class:`IterMark` (an input iterator, or a fused sum of other splits). The map is

- *bijective* when every index is a mixed-radix sum (lowest scale 1, each scale the product of
  the extents below it), and the splits of every mark tile it exactly (each digit used once,
  every input iterator used);
- *surjective* when the indices are mixed-radix sums and no two splits of a mark overlap
  (input iterators may go unused).

A predicate ``fused < bound`` (from a split by a non-dividing factor) narrows that fused sum's
extent to ``bound``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..ir import LT, And, Expr, FloorDiv, FloorMod, IntImm, Mul, Range, Var, as_expr
from ._form import Atom, Lin, lvar
from .analyzer import Analyzer


@dataclass(frozen=True, slots=True, eq=False)
class IterMark:
    """An iterator ``source`` with values ``0 <= source < extent`` (a Var or a fused sum)."""

    source: Var | IterSumExpr
    extent: Expr

    def to_expr(self) -> Expr:
        """The expression of the marked iterator."""
        return self.source if isinstance(self.source, Var) else self.source.to_expr()


@dataclass(frozen=True, slots=True, eq=False)
class IterSplitExpr:
    """``(source // lower_factor) % extent * scale``."""

    source: IterMark
    lower_factor: Expr
    extent: Expr
    scale: Expr

    def to_expr(self) -> Expr:
        """The split as a plain expression (not simplified)."""
        e = self.source.to_expr()
        if not _is_one(self.lower_factor):
            e = FloorDiv(e, self.lower_factor)
        e = FloorMod(e, self.extent)
        return e if _is_one(self.scale) else Mul(e, self.scale)


@dataclass(frozen=True, slots=True, eq=False)
class IterSumExpr:
    """``base + sum(args)``; ``args`` are ordered from the largest scale to the smallest."""

    args: tuple[IterSplitExpr, ...]
    base: Expr

    def to_expr(self) -> Expr:
        """The sum as a plain expression (not simplified)."""
        out: Expr | None = None
        for s in self.args:
            e = s.to_expr()
            out = e if out is None else out + e
        if out is None:
            return self.base
        return out if _is_zero(self.base) else out + self.base


@dataclass(frozen=True, slots=True)
class IterMapResult:
    """Outcome of :func:`detect_iter_map`: the sums (one per index) or the reasons it failed."""

    indices: tuple[IterSumExpr, ...] = ()
    errors: tuple[str, ...] = ()
    marks: tuple[IterMark, ...] = field(default=())

    def __bool__(self) -> bool:
        return not self.errors


def _is_one(e: Expr) -> bool:
    return type(e) is IntImm and e.value == 1


def _is_zero(e: Expr) -> bool:
    return type(e) is IntImm and e.value == 0


class _NotAffineError(Exception):
    """Internal: an index is not an affine map of the iterators (message says why)."""


@dataclass
class _Split:
    mark: IterMark
    lower: Lin
    extent: Lin
    scale: Lin


class _Detector:
    def __init__(self, iters: Mapping[Var, Range], ana: Analyzer) -> None:
        self.ana = ana
        self.iters = iters
        self.canon = ana.canon
        self.var_marks: dict[Var, IterMark] = {}
        self.fused: dict[object, tuple[IterMark, list[_Split]]] = {}
        self.uses: dict[int, list[_Split]] = {}
        self.marks: dict[int, IterMark] = {}
        for v, r in iters.items():
            self.var_marks[v] = IterMark(v, ana.simplify(r.extent))
            self.marks[id(self.var_marks[v])] = self.var_marks[v]

    def lin(self, e: Expr) -> Lin:
        return self.canon.lin(e)

    def expr(self, x: Lin) -> Expr:
        return self.canon.expr(x)

    def has_iter(self, a: object) -> bool:
        if type(a) is Var:
            return a in self.iters
        if isinstance(a, Atom):
            for arg in a.args:
                if isinstance(arg, Lin) and any(self.has_iter(t) for t in arg.t):
                    return True
                if isinstance(arg, Atom | Var) and self.has_iter(arg):
                    return True
            if a.kind in ("x", "sel", "cast"):
                from ..ir import collect_vars

                expr = self.canon.atom_expr(a)
                return any(v in self.iters for v in collect_vars(expr))
        return False

    # index -> splits ---------------------------------------------------------------------
    def splits_of(self, x: Lin) -> tuple[list[_Split], Lin]:
        """Split the terms of ``x`` into iterator splits and an iterator-free base."""
        base = Lin(x.c, {}, x.dt)
        out: list[_Split] = []
        one = Lin(1, {}, x.dt)
        for a, k in x.t.items():
            kl = Lin(k, {}, x.dt)
            if not self.has_iter(a):
                base = Lin(base.c, {**base.t, a: k}, x.dt)
            elif type(a) is Var:
                m = self.var_marks[a]
                out.append(_Split(m, one, self.lin(m.extent), kl))
            elif a.kind == "mul":  # type: ignore[union-attr]
                its = [f for f in a.args if self.has_iter(f)]  # type: ignore[union-attr]
                if len(its) != 1 or type(its[0]) is not Var:
                    raise _NotAffineError(f"non-affine product {self.canon.atom_expr(a)}")
                rest = [f for f in a.args if f is not its[0]]  # type: ignore[union-attr]
                scale = kl
                for f in rest:
                    scale = self.canon.mul(scale, lvar(f, x.dt))  # type: ignore[arg-type]
                m = self.var_marks[its[0]]
                out.append(_Split(m, one, self.lin(m.extent), scale))
            elif a.kind in ("fd", "fm", "fd2", "fm2"):  # type: ignore[union-attr]
                out.append(self.divmod_split(a, kl))  # type: ignore[arg-type]
            else:
                raise _NotAffineError(f"non-affine term {self.canon.atom_expr(a)}")
        return out, base

    def divmod_split(self, a: Atom, scale: Lin) -> _Split:
        inner: Lin = a.args[0]  # type: ignore[assignment]
        div = a.args[1]
        c = div if isinstance(div, Lin) else Lin(div, {}, inner.dt)  # type: ignore[arg-type]
        mark, lower, ext = self.as_mark(inner)
        if a.kind in ("fd", "fd2"):
            new_ext = self.lin(FloorDiv(self.expr(ext), self.expr(c)))
            if not self.ana.can_prove_equal(self.expr(self.canon.mul(new_ext, c)), self.expr(ext)):
                raise _NotAffineError(
                    f"extent {self.expr(ext)} of {self.expr(inner)} is not divisible by "
                    f"{self.expr(c)}"
                )
            return _Split(mark, self.canon.mul(lower, c), new_ext, scale)
        if not self.ana.can_prove_equal(self.expr(ext) % self.expr(c), 0):
            raise _NotAffineError(
                f"extent {self.expr(ext)} of {self.expr(inner)} is not divisible by {self.expr(c)}"
            )
        return _Split(mark, lower, c, scale)

    def as_mark(self, x: Lin) -> tuple[IterMark, Lin, Lin]:
        """A mark for the iterator sum ``x``: (mark, lower factor, extent) of x's digits."""
        splits, base = self.splits_of(x)
        if base.t or base.c:
            raise _NotAffineError(f"{self.expr(x)} has an offset; cannot split it")
        one = Lin(1, {}, x.dt)
        if len(splits) == 1 and self.ana.can_prove_equal(self.expr(splits[0].scale), 1):
            s = splits[0]
            return s.mark, s.lower, s.extent
        key = x.key()
        hit = self.fused.get(key)
        if hit is None:
            ordered = self.check_radix(splits, self.expr(x))
            ext = one
            for s in ordered:
                ext = self.canon.mul(ext, s.extent)
            mark = IterMark(self.to_sum(ordered, Lin(0, {}, x.dt)), self.expr(ext))
            hit = (mark, ordered)
            self.fused[key] = hit
            self.marks[id(mark)] = mark
            for s in ordered:
                self.uses.setdefault(id(s.mark), []).append(s)
        return hit[0], one, self.lin(hit[0].extent)

    def check_radix(self, splits: list[_Split], where: Expr) -> list[_Split]:
        """Order splits by scale (largest first) and check they form a mixed radix."""
        remaining = list(splits)
        chain: list[_Split] = []
        expect = Lin(1, {}, where.dtype)
        while remaining:
            for s in remaining:
                if self.ana.can_prove_equal(self.expr(s.scale), self.expr(expect)):
                    chain.append(s)
                    remaining.remove(s)
                    expect = self.canon.mul(expect, s.extent)
                    break
            else:
                raise _NotAffineError(
                    f"{where} is not a fused iterator: no term has scale {self.expr(expect)}"
                )
        return chain[::-1]

    def to_sum(self, ordered: list[_Split], base: Lin) -> IterSumExpr:
        return IterSumExpr(
            tuple(
                IterSplitExpr(s.mark, self.expr(s.lower), self.expr(s.extent), self.expr(s.scale))
                for s in ordered
            ),
            self.expr(base),
        )

    # whole map ---------------------------------------------------------------------------
    def check_marks(self, bijective: bool) -> list[str]:
        errors: list[str] = []
        inner_marks = {id(s.mark) for _, splits in self.fused.values() for s in splits}
        for mid, mark in self.marks.items():
            uses = self.uses.get(mid, [])
            name = str(mark.source.name) if isinstance(mark.source, Var) else "fused iterator"
            if not uses:
                unused = bijective and not self.ana.can_prove_equal(mark.extent, 1)
                if unused and (isinstance(mark.source, Var) or mid not in inner_marks):
                    errors.append(f"iterator {name} is not used by any index")
                continue
            errors.extend(self.check_tiling(mark, name, uses, bijective))
        return errors

    def check_tiling(
        self, mark: IterMark, name: str, uses: list[_Split], bijective: bool
    ) -> list[str]:
        pending = list(uses)
        expect = Lin(1, {}, mark.extent.dtype)
        while pending:
            nxt = next(
                (
                    s
                    for s in pending
                    if self.ana.can_prove_equal(self.expr(s.lower), self.expr(expect))
                ),
                None,
            )
            if nxt is None:
                if not bijective:
                    low = min(
                        pending,
                        key=lambda s: self.ana.const_int_bound(self.expr(s.lower)).min_value,
                    )
                    if self.ana.can_prove(self.expr(low.lower) >= self.expr(expect)):
                        nxt = low
                if nxt is None:
                    kind = (
                        "overlap"
                        if any(
                            self.ana.can_prove(self.expr(s.lower) < self.expr(expect))
                            for s in pending
                        )
                        else "leave a gap"
                    )
                    return [
                        f"splits of {name} {kind} (no split at lower factor {self.expr(expect)})"
                    ]
            pending.remove(nxt)
            expect = self.canon.mul(nxt.lower, nxt.extent)
        if bijective and not self.ana.can_prove_equal(self.expr(expect), mark.extent):
            return [f"splits of {name} cover {self.expr(expect)} of its extent {mark.extent}"]
        return []


def detect_iter_map(
    indices: Sequence[Expr],
    input_iters: Mapping[Var, Range],
    predicate: Expr | bool = True,
    check_level: str = "bijective",
    analyzer: Analyzer | None = None,
) -> IterMapResult:
    """Detect ``indices`` as an affine map of fused and split ``input_iters``.

    Parameters
    ----------
    indices
        Integer index expressions.
    input_iters
        The iterators and their ranges (``min`` must be 0).
    predicate
        A condition the iterators satisfy; conjuncts ``fused_sum < bound`` narrow a fused
        iterator's extent to ``bound``.
    check_level
        ``"bijective"`` or ``"surjective"`` (see the module docstring).
    analyzer
        An analyzer holding facts about other (symbolic) variables; the iterators are bound
        in it.

    Returns
    -------
    IterMapResult
        ``indices`` holds one :class:`IterSumExpr` per index when ``errors`` is empty.
    """
    if check_level not in ("bijective", "surjective"):
        raise ValueError(
            f"detect_iter_map: check_level must be bijective or surjective, got {check_level!r}"
        )
    ana = analyzer if analyzer is not None else Analyzer()
    for v, r in input_iters.items():
        if not ana.can_prove_equal(r.min, 0):
            return IterMapResult(errors=(f"iterator {v.name} must start at 0, got {r.min}",))
        ana.bind(v, r)
    det = _Detector(input_iters, ana)
    sums: list[IterSumExpr] = []
    try:
        narrowed = _apply_predicate(det, ana.simplify(as_expr(predicate, "bool")))
        for idx in indices:
            x = det.lin(idx)
            splits, base = det.splits_of(x)
            hit = narrowed.get(Lin(0, x.t, x.dt).key())
            if hit is not None:
                mark = hit
                dt = x.dt
                splits = [_Split(mark, Lin(1, {}, dt), det.lin(mark.extent), Lin(1, {}, dt))]
            ordered = det.check_radix(splits, idx)
            for s in ordered:
                det.uses.setdefault(id(s.mark), []).append(s)
            sums.append(det.to_sum(ordered, base))
    except _NotAffineError as err:
        return IterMapResult(errors=(str(err),))
    errors = det.check_marks(check_level == "bijective")
    if errors:
        return IterMapResult(errors=tuple(errors))
    return IterMapResult(tuple(sums), (), tuple(det.marks.values()))


def _apply_predicate(det: _Detector, pred: Expr) -> dict[object, IterMark]:
    """Narrow fused marks by ``sum < bound`` conjuncts; return their keys."""
    out: dict[object, IterMark] = {}
    conjuncts = [pred]
    while conjuncts:
        c = conjuncts.pop()
        if isinstance(c, And):
            conjuncts += [c.a, c.b]
            continue
        if type(c) is IntImm and c.value:
            continue
        if type(c) is not LT:
            raise _NotAffineError(f"unsupported predicate {c}")
        lhs = det.lin(c.a)
        splits, base = det.splits_of(lhs)
        if base.t or base.c:
            raise _NotAffineError("unsupported predicate with an offset")
        ordered = det.check_radix(splits, c.a)
        mark = IterMark(det.to_sum(ordered, Lin(0, {}, lhs.dt)), det.ana.simplify(c.b))
        det.marks[id(mark)] = mark
        det.fused[lhs.key()] = (mark, ordered)
        for s in ordered:
            det.uses.setdefault(id(s.mark), []).append(s)
        out[lhs.key()] = mark
    return out


def normalize_to_iter_sum(
    index: Expr, input_iters: Mapping[Var, Range], analyzer: Analyzer | None = None
) -> IterSumExpr | None:
    """The :class:`IterSumExpr` of one index (surjective check), or None when not affine."""
    res = detect_iter_map([index], input_iters, check_level="surjective", analyzer=analyzer)
    return res.indices[0] if res else None
