"""Evaluation at import of nodes whose inputs are all known (numpy; symbolic extents too).

Shape subgraphs (``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``) and constant
arithmetic are computed here rather than emitted. Integer arrays of dtype ``object`` carry
symbolic extents (see :mod:`._context`): arithmetic on them builds simplified extent
expressions; a comparison that the extents do not decide is an error.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ...arith import Analyzer
from ...ir import Expr, IntImm
from ._context import Context, Dim, Node, as_dim

Arrays = Sequence[np.ndarray | None]
Fold = Callable[[Context, Node, Arrays], list[np.ndarray]]

_ANA = Analyzer()


def simplify(v: object) -> Dim:
    """An extent expression simplified (an int when it folds to a constant)."""
    if isinstance(v, Expr):
        s = _ANA.simplify(v)
        return s.value if isinstance(s, IntImm) else s
    return as_dim(v)


def symbolic(arr: np.ndarray) -> bool:
    """Whether ``arr`` holds symbolic extents."""
    return arr.dtype == object


def obj_array(
    values: Sequence[object] | np.ndarray, shape: Sequence[int] | None = None
) -> np.ndarray:
    """Extents as an int64 array, or an object array when some are symbolic."""
    flat = [simplify(v) for v in np.asarray(values, dtype=object).reshape(-1).tolist()]
    out_shape = tuple(shape) if shape is not None else np.shape(np.asarray(values, dtype=object))
    if all(isinstance(v, int) for v in flat):
        return np.array(flat, dtype=np.int64).reshape(out_shape)
    arr = np.empty(len(flat), dtype=object)
    arr[:] = flat
    return arr.reshape(out_shape)


def _int_div(a: object, b: object) -> object:
    """ONNX integer Div (truncation); symbolic extents are non-negative, so floor agrees."""
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b) if b else 0
        return q if (a >= 0) == (b >= 0) else -q
    return a // b  # type: ignore[operator]


def sym_equal(ctx: Context, a: object, b: object) -> bool:
    """Whether two extents are equal; an error when symbolic extents leave it open."""
    a, b = simplify(a), simplify(b)
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    diff = simplify(a - b)
    if isinstance(diff, int):
        return diff == 0
    if (isinstance(a, int) and a <= 0) or (isinstance(b, int) and b <= 0):
        return False  # a symbolic extent is at least 1 in a model that runs
    raise ctx.error(f"cannot decide at import whether {a} equals {b}")


def _present(ctx: Context, args: Arrays, n: int) -> list[np.ndarray]:
    """The first ``n`` inputs, all given."""
    out = [a for a in args[:n] if a is not None]
    if len(out) != n:
        raise ctx.error(f"expected {n} inputs")
    return out


def _binary(fn: Callable[[object, object], object]) -> Fold:
    def fold(ctx: Context, node: Node, args: Arrays) -> list[np.ndarray]:
        a, b = _present(ctx, args, 2)
        if not symbolic(a) and not symbolic(b):
            return [np.asarray(fn(a, b)).astype(a.dtype)]
        out = np.frompyfunc(lambda x, y: simplify(fn(x, y)), 2, 1)(a, b)
        return [obj_array(np.asarray(out, dtype=object))]

    return fold


def _numeric_div(a: object, b: object) -> object:
    if isinstance(a, np.ndarray) and a.dtype.kind in "iu":
        return np.vectorize(_int_div, otypes=[a.dtype])(a, b)
    if isinstance(a, np.ndarray) and a.dtype.kind == "f":
        return np.divide(a, np.asarray(b))
    return _int_div(a, b)


def _mod(ctx: Context, node: Node, args: Arrays) -> list[np.ndarray]:
    """``Mod``: the divisor's sign (numpy's mod), or the dividend's with ``fmod=1``; the two
    agree on symbolic extents, which are non-negative."""
    fn = np.fmod if node.attr_int("fmod", 0) else np.mod
    a, b = _present(ctx, args, 2)
    if not symbolic(a) and not symbolic(b):
        return [np.asarray(fn(a, b)).astype(a.dtype)]
    return _binary(lambda x, y: x % y)(ctx, node, args)  # type: ignore[operator]


def _compare(name: str) -> Fold:
    def fold(ctx: Context, node: Node, args: Arrays) -> list[np.ndarray]:
        a, b = _present(ctx, args, 2)
        if not symbolic(a) and not symbolic(b):
            return [np.asarray(getattr(np, name)(a, b))]
        if name != "equal":
            raise ctx.error("cannot compare symbolic extents at import")
        eq = np.frompyfunc(lambda x, y: sym_equal(ctx, x, y), 2, 1)(a, b)
        return [np.asarray(eq, dtype=bool)]

    return fold


def _where(ctx: Context, node: Node, args: Arrays) -> list[np.ndarray]:
    c, a, b = _present(ctx, args, 3)
    out = np.where(c, a, b)
    return [obj_array(out) if out.dtype == object else out]


def _unary(fn: Callable[[np.ndarray], np.ndarray]) -> Fold:
    def fold(ctx: Context, node: Node, args: Arrays) -> list[np.ndarray]:
        (a,) = _present(ctx, args, 1)
        if symbolic(a):
            raise ctx.error("cannot evaluate this on symbolic extents at import")
        return [np.asarray(fn(a)).astype(a.dtype)]

    return fold


def _neg(ctx: Context, node: Node, args: Arrays) -> list[np.ndarray]:
    (a,) = _present(ctx, args, 1)
    return [obj_array(np.frompyfunc(lambda v: -v, 1, 1)(a)) if symbolic(a) else -a]


FOLDS: dict[str, Fold] = {
    "Add": _binary(lambda a, b: a + b),  # type: ignore[operator]
    "Sub": _binary(lambda a, b: a - b),  # type: ignore[operator]
    "Mul": _binary(lambda a, b: a * b),  # type: ignore[operator]
    "Div": _binary(_numeric_div),
    "Mod": _mod,
    "Max": _binary(lambda a, b: np.maximum(np.asarray(a), np.asarray(b))),
    "Min": _binary(lambda a, b: np.minimum(np.asarray(a), np.asarray(b))),
    "Equal": _compare("equal"),
    "Less": _compare("less"),
    "Greater": _compare("greater"),
    "LessOrEqual": _compare("less_equal"),
    "GreaterOrEqual": _compare("greater_equal"),
    "Where": _where,
    "Neg": _neg,
    "Not": _unary(np.logical_not),
    "Sqrt": _unary(np.sqrt),
    "Reciprocal": _unary(np.reciprocal),
    "Relu": _unary(lambda a: np.maximum(a, 0)),
    "Exp": _unary(np.exp),
    "Erf": _unary(lambda a: np.vectorize(math.erf)(a)),
    "Tanh": _unary(np.tanh),
}
