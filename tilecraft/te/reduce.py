"""Reductions: reduction axes, commutative reducers and the ``Reduce`` value of a compute body.

A :class:`CommReducer` is a combine function over placeholder variables (``lhs`` the running
value, ``rhs`` the new one) plus identities; ``sum``, ``max``, ``min``, ``prod``, ``argmax`` and
``argmin`` are instances, :func:`comm_reducer` builds custom ones. Calling a reducer gives a
:class:`Reduce` (or a tuple of them for tuple reducers), which must be a compute's whole body.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import TilecraftError
from ..ir import DataType, Expr, ExprLike, Range, Var, as_expr, const, substitute
from ..ir import dtype as to_dtype
from ..ir import op as irop
from ..ir.dtype import DTypeLike


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ReduceAxis(Var):
    """A reduction variable with its domain; made by :func:`tilecraft.te.reduce_axis`.

    It is an ordinary int32 :class:`~tilecraft.ir.Var` in expressions; ``create_prim_func``
    replaces it by a reduce block iterator, so it never reaches a PrimFunc.
    """

    dom: Range | None = None

    def __post_init__(self) -> None:
        Var.__post_init__(self)
        if not isinstance(self.dom, Range):
            raise TilecraftError(f"reduce axis {self.name!r}: needs a domain Range")

    __hash__ = object.__hash__


@dataclass(frozen=True, eq=False)
class CommReducer:
    """``combine(lhs, rhs) -> results`` with ``identity`` values, over one or more values."""

    name: str
    lhs: tuple[Var, ...]
    rhs: tuple[Var, ...]
    results: tuple[Expr, ...]
    identity: tuple[Expr, ...]

    def combine(self, old: Sequence[Expr], new: Sequence[Expr]) -> tuple[Expr, ...]:
        """The combined values for running values ``old`` and new values ``new``."""
        vmap: dict[Var, Expr] = dict(zip(self.lhs, old, strict=True))
        vmap.update(zip(self.rhs, new, strict=True))
        return tuple(substitute(r, vmap) for r in self.results)


@dataclass(frozen=True, eq=False)
class Reduce:
    """Value ``value_index`` of reducing ``source`` with ``combiner`` over ``axes``."""

    combiner: CommReducer
    source: tuple[Expr, ...]
    axes: tuple[ReduceAxis, ...]
    condition: Expr | None
    value_index: int

    @property
    def dtype(self) -> DataType:
        """Type of this value."""
        return self.source[self.value_index].dtype

    def _not_expr(self, *_: object) -> Any:
        raise TilecraftError(
            f"a {self.combiner.name} reduction must be the whole body of a compute; "
            "post-process its result in a separate compute stage"
        )

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _not_expr
    __truediv__ = __rtruediv__ = __neg__ = __lt__ = __gt__ = __le__ = __ge__ = _not_expr


IdentityFn = Callable[..., Any]
CombineFn = Callable[..., Any]


Elementwise = Callable[[ExprLike, ExprLike], Expr]


def _is_axes(axis: object) -> bool:
    if isinstance(axis, ReduceAxis):
        return True
    return isinstance(axis, (tuple, list)) and all(isinstance(a, ReduceAxis) for a in axis)


class Reducer:
    """A callable reducer: ``reducer(expr, axis=k, where=cond)``; see :func:`comm_reducer`.

    A reducer made with ``elementwise`` (``te.max``, ``te.min``) is also the two-operand
    function: ``te.max(a, b)`` with ``b`` a value rather than reduce axes is ``max(a, b)``.
    """

    def __init__(
        self,
        fcombine: CombineFn,
        fidentity: IdentityFn,
        name: str,
        elementwise: Elementwise | None = None,
    ) -> None:
        self.fcombine = fcombine
        self.fidentity = fidentity
        self.name = name
        self.elementwise = elementwise
        self._cache: dict[tuple[DataType, ...], CommReducer] = {}

    def for_dtypes(self, dtypes: tuple[DataType, ...]) -> CommReducer:
        """The combiner specialised to values of ``dtypes`` (cached, so calls share it)."""
        found = self._cache.get(dtypes)
        if found is not None:
            return found
        lhs = tuple(Var(f"x{n}", d) for n, d in enumerate(dtypes))
        rhs = tuple(Var(f"y{n}", d) for n, d in enumerate(dtypes))
        single = len(dtypes) == 1
        res = self.fcombine(lhs[0], rhs[0]) if single else self.fcombine(lhs, rhs)
        ident = self.fidentity(*dtypes)
        res_t = (res,) if single else tuple(res)
        ident_t = (ident,) if single else tuple(ident)
        if len(res_t) != len(dtypes) or len(ident_t) != len(dtypes):
            raise TilecraftError(f"reducer {self.name}: combine/identity arity != {len(dtypes)}")
        results = tuple(as_expr(r, d) for r, d in zip(res_t, dtypes, strict=True))
        idents = tuple(as_expr(v, d) for v, d in zip(ident_t, dtypes, strict=True))
        for r, v, d in zip(results, idents, dtypes, strict=True):
            if r.dtype != d or v.dtype != d:
                raise TilecraftError(f"reducer {self.name}: result/identity dtype is not {d}")
        found = self._cache[dtypes] = CommReducer(self.name, lhs, rhs, results, idents)
        return found

    def __call__(
        self,
        expr: ExprLike | Sequence[ExprLike],
        axis: ReduceAxis | Sequence[ReduceAxis] | ExprLike | None = None,
        where: ExprLike | None = None,
    ) -> Any:
        """Reduce ``expr`` (or a tuple of values) over ``axis`` where ``where`` holds.

        For ``te.max``/``te.min``, a second operand that is not reduce axes gives the
        elementwise ``max(expr, axis)``/``min(expr, axis)`` instead.
        """
        if self.elementwise is not None and axis is not None and not _is_axes(axis):
            if where is not None or isinstance(expr, (tuple, list)):
                raise TilecraftError(f"{self.name}(a, b): takes two values and no where=")
            return self.elementwise(expr, axis)  # type: ignore[arg-type]
        if axis is None:
            two = " (or a second value)" if self.elementwise is not None else ""
            raise TilecraftError(f"{self.name}: needs reduce axes{two}: axis=te.reduce_axis(...)")
        multi = isinstance(expr, (tuple, list))
        items: Sequence[ExprLike] = expr if isinstance(expr, (tuple, list)) else [expr]  # type: ignore[list-item]
        source = tuple(as_expr(e) for e in items)
        axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
        for a in axes:
            if not isinstance(a, ReduceAxis):
                raise TilecraftError(f"{self.name}: axis must come from te.reduce_axis, got {a!r}")
        if not axes:
            raise TilecraftError(f"{self.name}: needs at least one reduce axis")
        cond = None if where is None else as_expr(where, "bool")
        if cond is not None and not cond.dtype.is_bool:
            raise TilecraftError(f"{self.name}: where= must be a bool expression")
        combiner = self.for_dtypes(tuple(s.dtype for s in source))
        out = tuple(Reduce(combiner, source, axes, cond, n) for n in range(len(source)))
        return out if multi else out[0]


def comm_reducer(
    fcombine: CombineFn,
    fidentity: IdentityFn,
    name: str = "reduce",
    elementwise: Elementwise | None = None,
) -> Reducer:
    """Build a commutative reducer.

    Parameters
    ----------
    fcombine
        ``fcombine(x, y) -> value`` for one value, or ``fcombine((x0, x1), (y0, y1)) ->
        (v0, v1)`` for tuples; ``x`` is the running value, ``y`` the new one.
    fidentity
        ``fidentity(dtype0, ...) -> value(s)``: the identity element(s).
    name
        Used in error messages.
    elementwise
        Optional two-operand function the reducer also is (``te.max(a, b)``).

    Returns
    -------
    Reducer
        Callable as ``reducer(expr, axis=k, where=cond)``.
    """
    return Reducer(fcombine, fidentity, name, elementwise)


def min_value(dt: DTypeLike) -> Expr:
    """The smallest value of ``dt`` (``-inf`` for floats)."""
    d = to_dtype(dt)
    if d.is_float:
        return const(float("-inf"), d)
    if d.is_uint:
        return const(0, d)
    return const(-(2 ** (d.bits - 1)), d)


def max_value(dt: DTypeLike) -> Expr:
    """The largest value of ``dt`` (``inf`` for floats)."""
    d = to_dtype(dt)
    if d.is_float:
        return const(float("inf"), d)
    if d.is_uint:
        return const(2**d.bits - 1, d)
    return const(2 ** (d.bits - 1) - 1, d)


def _arg_combine(better: Callable[[Expr, Expr], Expr]) -> CombineFn:
    def combine(lhs: tuple[Expr, Expr], rhs: tuple[Expr, Expr]) -> tuple[Expr, Expr]:
        (li, lv), (ri, rv) = lhs, rhs
        # keep the running pair when strictly better, or equal with a smaller valid index (the
        # identity's index is -1): the first occurrence wins in any visiting order, as in numpy
        first = (ri < 0) | ((li >= 0) & (li < ri))
        if lv.dtype.is_float:
            # numpy: NaN beats every number and the first NaN wins (NaN compares unordered)
            lnan, rnan = irop.isnan(lv), irop.isnan(rv)
            strictly = better(lv, rv) | (lnan & ~rnan)
            same = lv.eq(rv) | (lnan & rnan)
        else:
            strictly, same = better(lv, rv), lv.eq(rv)
        keep = strictly | (same & first)
        return irop.select(keep, li, ri), irop.select(keep, lv, rv)

    return combine


sum = comm_reducer(lambda x, y: x + y, lambda d: const(0, d), "sum")
prod = comm_reducer(lambda x, y: x * y, lambda d: const(1, d), "prod")
max = comm_reducer(irop.max, min_value, "max", irop.max)
"""``max`` over the axes (``te.max(x, axis=k)``), or of two values (``te.max(a, b)``); for
floats a NaN makes the result NaN (numpy's ``max``/``maximum``)."""
min = comm_reducer(irop.min, max_value, "min", irop.min)
"""``min`` over the axes (``te.min(x, axis=k)``), or of two values (``te.min(a, b)``); for
floats a NaN makes the result NaN (numpy's ``min``/``minimum``)."""
argmax = comm_reducer(
    _arg_combine(lambda a, b: a > b), lambda di, dv: (const(-1, di), min_value(dv)), "argmax"
)
"""(index, value) of the maximum; the first one on ties, the first NaN if any (numpy)."""
argmin = comm_reducer(
    _arg_combine(lambda a, b: a < b), lambda di, dv: (const(-1, di), max_value(dv)), "argmin"
)
"""(index, value) of the minimum; the first one on ties, the first NaN if any (numpy)."""
