"""Index maps and thin adapters from the primitives to :mod:`tilecraft.arith`.

An :class:`IndexMap` is a function from ``n`` integer indices to ``m`` integer indices, built
from a Python callable (``lambda i, j: (j, i)``) by calling it once on fresh variables. It maps
index expressions and shapes, and inverts itself when :func:`tilecraft.arith.detect_iter_map`
proves it a bijection of fused and split iterators.

The helpers :func:`simplify_index`, :func:`const_value`, :func:`same_index` and
:func:`bound_index` are one-line uses of :class:`tilecraft.arith.Analyzer` and
:func:`tilecraft.arith.eval_set`, so every primitive simplifies with the same canonical form.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ...arith import Analyzer, IterMark, IterSumExpr, detect_iter_map, eval_set, eval_sets
from ...errors import IRError, ScheduleError
from ...ir import Expr, IntImm, Range, Var, as_expr, collect_vars, dtype, substitute

Bounds = tuple[Expr, Expr]  # inclusive [lo, hi]


def _map_error(short: str) -> ScheduleError:
    return ScheduleError("transform_layout", f"index map: {short}")


def _param_names(fn: Callable[..., object]) -> list[str]:
    """Parameter names of ``fn``; ScheduleError for ``*args`` or an unreadable signature."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError) as e:
        raise _map_error(f"cannot read the parameters of {fn!r}: {e}") from None
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        raise ScheduleError(
            "transform_layout",
            "index map: cannot count the arguments of a *args function",
            hint="pass ndim= to IndexMap.from_func",
        )
    return [p.name for p in params]


def simplify_index(e: Expr, dom: Mapping[Var, Range] | None = None) -> Expr:
    """``e`` in the analyzer's canonical form (``dom``: known loop ranges)."""
    if not dom and type(e) in (IntImm, Var):  # already canonical (a third of all calls)
        return e
    ana = Analyzer()
    for v, r in (dom or {}).items():
        ana.bind(v, r)
    return ana.simplify(e)


def is_const(e: Expr, value: int | None = None) -> bool:
    """True when ``e`` simplifies to an integer constant (equal to ``value`` if given)."""
    c = const_value(e)
    return c is not None and (value is None or c == value)


def const_value(e: Expr) -> int | None:
    """The integer value of ``e`` when it simplifies to a constant, else None."""
    if not e.dtype.is_integer:
        return None
    if type(e) is IntImm:
        return e.value
    s = Analyzer().simplify(e)
    return s.value if isinstance(s, IntImm) else None


def same_index(a: Expr, b: Expr) -> bool:
    """True when ``a - b`` simplifies to zero."""
    return Analyzer().can_prove_equal(a, b)


def bound_index(e: Expr, dom: Mapping[Var, Range]) -> Bounds | None:
    """Inclusive bounds of ``e`` while the variables of ``dom`` range over their domains
    (others stay symbolic); None when a side is unbounded."""
    s = eval_set(e, dom)
    if s.min_value is None or s.max_value is None:
        return None
    return s.min_value, s.max_value


def bound_indices(exprs: Sequence[Expr], dom: Mapping[Var, Range]) -> list[Bounds | None]:
    """:func:`bound_index` of each of ``exprs`` over one domain (prepared once)."""
    return [
        None if s.min_value is None or s.max_value is None else (s.min_value, s.max_value)
        for s in eval_sets(exprs, dom)
    ]


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
        """Call ``fn`` on fresh int32 variables (one per parameter, or ``ndim``) and record it.

        Raises
        ------
        ScheduleError
            When ``fn`` is not a callable of index variables returning integer index
            expressions of those variables (the error names ``transform_layout``).
        """
        if not callable(fn):
            raise _map_error(f"expected a callable, got {type(fn).__name__}")
        if ndim is not None and (isinstance(ndim, bool) or not isinstance(ndim, int) or ndim < 0):
            raise _map_error(f"ndim must be a non-negative int or None, got {ndim!r}")
        names = [f"i{k}" for k in range(ndim)] if ndim is not None else _param_names(fn)
        ivs = tuple(Var(n, dtype("int32")) for n in names)
        try:
            out = fn(*ivs)
            finals = tuple(out) if isinstance(out, (tuple, list)) else (out,)
            exprs = tuple(as_expr(f) for f in finals)
        except (TypeError, ValueError, ArithmeticError, IRError) as e:
            what = f"{type(e).__name__}: {e}"
            raise _map_error(f"calling it on index variables failed: {what}") from e
        return IndexMap(ivs, exprs).checked()

    def checked(self) -> IndexMap:
        """``self``, after checking it maps index variables to integer index expressions of
        those variables only (ScheduleError naming ``transform_layout`` otherwise)."""
        if not isinstance(self.initial_indices, tuple) or not all(
            isinstance(v, Var) for v in self.initial_indices
        ):
            raise _map_error("initial_indices must be a tuple of Var")
        if not isinstance(self.final_indices, tuple) or not all(
            isinstance(e, Expr) for e in self.final_indices
        ):
            raise _map_error("final_indices must be a tuple of Expr")
        own = {id(v) for v in self.initial_indices}
        for e in self.final_indices:
            if not e.dtype.is_integer or e.dtype.lanes != 1:
                raise _map_error(f"output {e.script()} is not an integer index ({e.dtype})")
            free = [v.name for v in collect_vars(e) if id(v) not in own]
            if free:
                raise _map_error(f"output {e.script()} uses {free}, which are not its parameters")
        return self

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
        ana = Analyzer()
        return tuple(ana.simplify(substitute(f, vmap)) for f in self.final_indices)

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
            out.append(simplify_index(b[1] + 1))
        return tuple(out)

    def inverse(self, shape: Sequence[Expr]) -> IndexMap:
        """The inverse map over an input of ``shape``; raises ScheduleError if not bijective."""
        final_shape = self.map_shape(shape)
        outs = tuple(Var(f"o{k}", dtype("int32")) for k in range(self.ndim_out))
        sol = _invert(self, shape, outs, final_shape)
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
    m: IndexMap, shape: Sequence[Expr], outs: Sequence[Var], out_shape: Sequence[Expr]
) -> tuple[Expr, ...] | None:
    """Initial indices as functions of ``outs`` when the map is a detected bijection."""
    dom = {v: Range(c_expr(0, s), s) for v, s in zip(m.initial_indices, shape, strict=True)}
    res = detect_iter_map(m.final_indices, dom, check_level="bijective")
    if not res:
        return None
    # every split of a mark, with the value its digit holder takes
    refs: dict[int, list[tuple[Expr, Expr, Expr, Expr]]] = {}

    def add_refs(total: Expr, sums: IterSumExpr) -> None:
        for sp in sums.args:
            refs.setdefault(id(sp.source), []).append((total, sp.scale, sp.extent, sp.lower_factor))

    for y, sums in zip(outs, res.indices, strict=True):
        if const_value(sums.base) != 0:
            return None
        add_refs(y, sums)
    memo: dict[int, Expr] = {}

    def value(mark: IterMark) -> Expr:
        if id(mark) not in memo:
            total: Expr = c_expr(0, mark.extent)
            for holder, scale, ext, lower in refs.get(id(mark), []):
                total = total + (holder // scale) % ext * lower
            memo[id(mark)] = total
        return memo[id(mark)]

    marks: dict[int, IterMark] = {}
    stack = list(res.marks)
    while stack:
        mk = stack.pop()
        if id(mk) not in marks:
            marks[id(mk)] = mk
            if isinstance(mk.source, IterSumExpr):
                stack.extend(sp.source for sp in mk.source.args)
    solved: dict[int, Expr] = {}
    while marks:
        # a mark is complete once every fused mark holding one of its splits is expanded
        held = {
            id(sp.source)
            for mk in marks.values()
            if isinstance(mk.source, IterSumExpr)
            for sp in mk.source.args
        }
        mark = next(mk for k, mk in marks.items() if k not in held)
        del marks[id(mark)]
        if isinstance(mark.source, Var):
            solved[id(mark.source)] = value(mark)
        else:
            add_refs(value(mark), mark.source)
    if len(solved) != len(m.initial_indices):
        return None
    out_dom = dict(zip(outs, (Range(c_expr(0, e), e) for e in out_shape), strict=True))
    return tuple(simplify_index(solved[id(v)], out_dom) for v in m.initial_indices)
