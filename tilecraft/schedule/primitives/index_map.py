"""Index maps and the small index arithmetic the buffer and compute-location primitives need.

An :class:`IndexMap` is a function from ``n`` integer indices to ``m`` integer indices, built
from a Python callable (``lambda i, j: (j, i)``) by calling it once on fresh variables. It maps
index expressions and shapes, and inverts itself when it is a bijection made of permutations,
splits (``i // c``, ``i % c``) and fusions (``i * c + j``).

The module also holds :func:`simplify_index` (an affine canonicaliser: collects linear terms
with integer coefficients, folds constants, simplifies ``//``/``%`` by divisors of every
coefficient) and :func:`bound_index` (interval bounds of an index expression over variable
ranges). Both are deliberately small and deterministic: the primitives use them to compute
loop extents and regions so that results print the same on every run.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ...errors import ScheduleError
from ...ir import (
    Add,
    Expr,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    Range,
    Sub,
    Var,
    dtype,
    substitute,
)
from ...ir.expr import BinaryOp

# ------------------------------------------------------------------------------------------
# affine canonical form
# ------------------------------------------------------------------------------------------

_Terms = dict[str, tuple[Expr, int]]


def _key(e: Expr) -> str:
    """A structural key of an index expression (variables by identity)."""
    if isinstance(e, Var):
        return f"v{id(e)}"
    if isinstance(e, IntImm):
        return f"c{e.value}"
    if isinstance(e, BinaryOp):
        return f"({type(e).__name__} {_key(e.a)} {_key(e.b)})"
    return f"n{id(e)}"


def _linear(e: Expr) -> tuple[_Terms, int]:
    """Split ``e`` into ``sum(coeff * term) + const``; non-affine parts become atoms."""
    if isinstance(e, IntImm):
        return {}, e.value
    if isinstance(e, (Add, Sub)):
        ta, ca = _linear(e.a)
        tb, cb = _linear(e.b)
        sign = 1 if isinstance(e, Add) else -1
        out = dict(ta)
        for k, (t, c) in tb.items():
            prev = out.get(k, (t, 0))[1]
            out[k] = (t, prev + sign * c)
        return {k: v for k, v in out.items() if v[1] != 0}, ca + sign * cb
    if isinstance(e, Mul):
        ta, ca = _linear(e.a)
        tb, cb = _linear(e.b)
        if not tb:
            return {k: (t, c * cb) for k, (t, c) in ta.items() if c * cb != 0}, ca * cb
        if not ta:
            return {k: (t, c * ca) for k, (t, c) in tb.items() if c * ca != 0}, ca * cb
    atom = _simplify_atom(e)
    if isinstance(atom, IntImm):
        return {}, atom.value
    if (not isinstance(atom, type(e)) or atom is not e) and isinstance(atom, (Add, Sub, Mul)):
        return _linear(atom)
    return {_key(atom): (atom, 1)}, 0


def _const(value: int, like: Expr) -> IntImm:
    return IntImm(like.dtype, value)


def _build(terms: _Terms, const: int, like: Expr) -> Expr:
    """Rebuild an expression from its linear form (terms in insertion order)."""
    out: Expr | None = None
    for t, c in terms.values():
        term: Expr = t if c in (1, -1) else Mul(t, _const(abs(c), like))
        if out is None:
            out = term if c > 0 else Mul(t, _const(c, like))
        else:
            out = Add(out, term) if c > 0 else Sub(out, term)
    if out is None:
        return _const(const, like)
    if const > 0:
        return Add(out, _const(const, like))
    if const < 0:
        return Sub(out, _const(-const, like))
    return out


def _simplify_atom(e: Expr) -> Expr:
    """Simplify a non-affine node (``//``, ``%``, min, max) after simplifying its operands."""
    if not isinstance(e, (FloorDiv, FloorMod, Min, Max)):
        return e
    a, b = simplify_index(e.a), simplify_index(e.b)
    if isinstance(e, (FloorDiv, FloorMod)) and isinstance(b, IntImm) and b.value > 0:
        c = b.value
        terms, const = _linear(a)
        if isinstance(e, FloorDiv):
            if c == 1:
                return a
            if not terms:
                return _const(const // c, e)
            if all(k % c == 0 for _, k in terms.values()):
                return _build({k: (t, v // c) for k, (t, v) in terms.items()}, const // c, e)
        else:
            if c == 1:
                return _const(0, e)
            kept = {k: (t, v) for k, (t, v) in terms.items() if v % c != 0}
            if not kept:
                return _const(const % c, e)
            if len(kept) != len(terms):
                return FloorMod(_build(kept, const % c, e), b)
    if isinstance(e, (Min, Max)):
        ta, ca = _linear(a)
        tb, cb = _linear(b)
        if _key(_build(ta, 0, e)) == _key(_build(tb, 0, e)):
            pick_a = (ca <= cb) if isinstance(e, Min) else (ca >= cb)
            return a if pick_a else b
    return e.update(a=a, b=b)


def simplify_index(e: Expr) -> Expr:
    """Canonicalise an integer index expression (affine terms collected, constants folded)."""
    if not e.dtype.is_integer:
        return e
    if isinstance(e, (Var, IntImm)):
        return e
    terms, const = _linear(e)
    return _build(terms, const, e)


def is_const(e: Expr, value: int | None = None) -> bool:
    """True when ``e`` simplifies to an integer constant (equal to ``value`` if given)."""
    s = simplify_index(e) if e.dtype.is_integer else e
    return isinstance(s, IntImm) and (value is None or s.value == value)


def const_value(e: Expr) -> int | None:
    """The integer value of ``e`` when it simplifies to a constant, else None."""
    s = simplify_index(e)
    return s.value if isinstance(s, IntImm) else None


def same_index(a: Expr, b: Expr) -> bool:
    """True when ``a - b`` simplifies to zero."""
    return is_const(Sub(a, b), 0)


# ------------------------------------------------------------------------------------------
# interval bounds
# ------------------------------------------------------------------------------------------

Bounds = tuple[Expr, Expr]  # inclusive [lo, hi]


def bound_index(e: Expr, dom: Mapping[Var, Range]) -> Bounds | None:
    """Inclusive bounds of ``e`` when the variables of ``dom`` range over their domains.

    Variables not in ``dom`` stay symbolic. Returns None when ``e`` is not bounded by these
    rules (e.g. a product of two relaxed variables or a load).
    """
    doms = {id(v): r for v, r in dom.items()}
    got = _bound(e, doms)
    if got is None:
        return None
    return simplify_index(got[0]), simplify_index(got[1])


def _mentions(e: Expr, doms: Mapping[int, Range]) -> bool:
    from ...ir import collect_vars

    return any(id(v) in doms for v in collect_vars(e))


def _bound(e: Expr, doms: Mapping[int, Range]) -> Bounds | None:
    if isinstance(e, Var):
        r = doms.get(id(e))
        if r is None:
            return e, e
        return r.min, Sub(Add(r.min, r.extent), _const(1, e))
    if isinstance(e, IntImm) or not _mentions(e, doms):
        return e, e
    if isinstance(e, (Add, Sub, Mul, FloorDiv, FloorMod, Min, Max)):
        ba = _bound(e.a, doms)
        bb = _bound(e.b, doms)
        if ba is None or bb is None:
            return None
        if isinstance(e, Add):
            return Add(ba[0], bb[0]), Add(ba[1], bb[1])
        if isinstance(e, Sub):
            return Sub(ba[0], bb[1]), Sub(ba[1], bb[0])
        if isinstance(e, (Min, Max)):
            return type(e)(ba[0], bb[0]), type(e)(ba[1], bb[1])
        return _bound_mul_div(e, ba, bb)
    return None


def _bound_mul_div(e: BinaryOp, ba: Bounds, bb: Bounds) -> Bounds | None:
    if isinstance(e, Mul):
        cb = const_value(bb[0]) if same_index(bb[0], bb[1]) else None
        ca = const_value(ba[0]) if same_index(ba[0], ba[1]) else None
        if cb is not None:
            return (
                (Mul(ba[0], c_expr(cb, e)), Mul(ba[1], c_expr(cb, e)))
                if cb >= 0
                else (Mul(ba[1], c_expr(cb, e)), Mul(ba[0], c_expr(cb, e)))
            )
        if ca is not None:
            return (
                (Mul(bb[0], c_expr(ca, e)), Mul(bb[1], c_expr(ca, e)))
                if ca >= 0
                else (Mul(bb[1], c_expr(ca, e)), Mul(bb[0], c_expr(ca, e)))
            )
        return None
    c = const_value(bb[0]) if same_index(bb[0], bb[1]) else None
    if c is None or c <= 0:
        return None
    if isinstance(e, FloorDiv):
        return FloorDiv(ba[0], c_expr(c, e)), FloorDiv(ba[1], c_expr(c, e))
    lo_q = simplify_index(FloorDiv(ba[0], c_expr(c, e)))
    hi_q = simplify_index(FloorDiv(ba[1], c_expr(c, e)))
    if same_index(lo_q, hi_q):
        return FloorMod(ba[0], c_expr(c, e)), FloorMod(ba[1], c_expr(c, e))
    return c_expr(0, e), c_expr(c - 1, e)


def c_expr(value: int, like: Expr) -> IntImm:
    """An integer constant with ``like``'s dtype."""
    return IntImm(like.dtype, value)


# ------------------------------------------------------------------------------------------
# IndexMap
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class IndexMap:
    """A map ``(initial_indices) -> (final_indices)`` of integer index expressions.

    Build one from a callable with :meth:`from_func`: ``IndexMap.from_func(lambda i, j: (j, i))``.
    """

    initial_indices: tuple[Var, ...]
    final_indices: tuple[Expr, ...]

    @staticmethod
    def from_func(fn: Callable[..., Sequence[Expr] | Expr], ndim: int | None = None) -> IndexMap:
        """Call ``fn`` on fresh int32 variables (one per parameter, or ``ndim``) and record it."""
        if ndim is None:
            params = inspect.signature(fn).parameters.values()
            if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
                raise ScheduleError(
                    "transform_layout",
                    "index map: cannot count the arguments of a *args function",
                    hint="pass ndim= to IndexMap.from_func",
                )
            names = [p.name for p in params]
        else:
            names = [f"i{k}" for k in range(ndim)]
        ivs = tuple(Var(n, dtype("int32")) for n in names)
        out = fn(*ivs)
        finals = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        from ...ir import as_expr

        return IndexMap(ivs, tuple(as_expr(f) for f in finals))

    @property
    def ndim_in(self) -> int:
        """Number of initial indices."""
        return len(self.initial_indices)

    @property
    def ndim_out(self) -> int:
        """Number of final indices."""
        return len(self.final_indices)

    def map_indices(self, exprs: Sequence[Expr]) -> tuple[Expr, ...]:
        """Apply the map to index expressions ``exprs`` (one per initial index)."""
        if len(exprs) != self.ndim_in:
            raise ScheduleError(
                "transform_layout",
                f"index map takes {self.ndim_in} indices, got {len(exprs)}",
            )
        vmap = dict(zip(self.initial_indices, exprs, strict=False))
        return tuple(simplify_index(substitute(f, vmap)) for f in self.final_indices)

    def map_shape(self, shape: Sequence[Expr]) -> tuple[Expr, ...]:
        """The shape of the image of a ``shape``-sized index space (extent of each output)."""
        dom = {v: Range(c_expr(0, s), s) for v, s in zip(self.initial_indices, shape, strict=False)}
        out = []
        for f in self.final_indices:
            b = bound_index(f, dom)
            if b is None or not is_const(b[0], 0):
                raise ScheduleError(
                    "transform_layout",
                    "index map output is not a 0-based bounded index",
                    requires="every output index is bounded below by 0 over the buffer shape",
                )
            out.append(simplify_index(Add(b[1], c_expr(1, b[1]))))
        return tuple(out)

    def inverse(self, shape: Sequence[Expr]) -> IndexMap:
        """The inverse map over an input of ``shape``; raises ScheduleError if not bijective."""
        final_shape = self.map_shape(shape)
        outs = tuple(Var(f"o{k}", dtype("int32")) for k in range(self.ndim_out))
        sol = _invert(self, shape, final_shape, outs)
        if sol is None:
            raise ScheduleError(
                "transform_layout",
                "index map is not a recognised bijection",
                requires="the map is a composition of permutations, splits and fusions",
            )
        return IndexMap(outs, sol)

    def __call__(self, *exprs: Expr) -> tuple[Expr, ...]:
        return self.map_indices(exprs)


def _invert(
    m: IndexMap, shape: Sequence[Expr], final_shape: Sequence[Expr], outs: Sequence[Var]
) -> tuple[Expr, ...] | None:
    """Solve initial indices from outputs for permutation/split/fusion maps."""
    solved: dict[int, Expr] = {}
    by_var = {id(v): k for k, v in enumerate(m.initial_indices)}
    div_of: dict[int, tuple[Expr, int]] = {}
    mod_of: dict[int, Expr] = {}
    for f, y, _ext in zip(m.final_indices, outs, final_shape, strict=False):
        f = simplify_index(f)
        if isinstance(f, Var) and id(f) in by_var:
            if id(f) in solved:
                return None
            solved[id(f)] = y
            continue
        if isinstance(f, FloorDiv) and isinstance(f.a, Var) and isinstance(f.b, IntImm):
            div_of[id(f.a)] = (y, f.b.value)
            continue
        if isinstance(f, FloorMod) and isinstance(f.a, Var) and isinstance(f.b, IntImm):
            mod_of[id(f.a)] = y
            continue
        terms, const = _linear(f)
        if const != 0 or not all(isinstance(t, Var) and id(t) in by_var for t, _ in terms.values()):
            return None
        stride = 1
        for t, c in sorted(terms.values(), key=lambda tc: tc[1]):
            ext_t = const_value(shape[by_var[id(t)]])
            if c != stride or ext_t is None or id(t) in solved:
                return None
            solved[id(t)] = simplify_index(FloorMod(FloorDiv(y, c_expr(c, y)), c_expr(ext_t, y)))
            stride *= ext_t
    for vid, (yd, c) in div_of.items():
        if vid not in mod_of:
            return None
        solved[vid] = simplify_index(Add(Mul(yd, c_expr(c, yd)), mod_of[vid]))
    if len(solved) != len(m.initial_indices):
        return None
    return tuple(solved[id(v)] for v in m.initial_indices)
