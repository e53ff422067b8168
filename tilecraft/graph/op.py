"""The operator registry: each graph operator's arity, type inference and legalization.

``infer_type(op, arg_types, attrs)`` checks a call and returns its result type, raising
:class:`GraphError` with the operator, the offending argument and what was expected. The
legalization of each operator (a te computation turned into a PrimFunc) is registered by
:mod:`tilecraft.graph.legalize_ops`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import te
from ..arith import Analyzer
from ..errors import GraphError as GraphError
from ..ir import Attrs, DataType, Expr, IntImm, Mul, Var, as_expr
from .ir import TensorType, dim_text

InferFn = Callable[[str, Sequence[TensorType], Attrs], TensorType]
LegalizeFn = Callable[[Sequence[te.Tensor], Attrs, TensorType], te.Tensor]


@dataclass
class OpDef:
    """A registered operator.

    Attributes
    ----------
    name
        The operator name used in :class:`~tilecraft.graph.ir.OpCall`.
    num_args
        ``(min, max)`` number of tensor arguments (``max`` None: variadic).
    infer
        ``infer(op, arg_types, attrs) -> TensorType``; raises GraphError on ill-typed calls.
    func_name
        Base name of the PrimFunc it legalizes to (``permute_dims`` -> ``transpose``).
    legalize
        ``legalize(te_args, attrs, out_type) -> te.Tensor``, set by ``legalize_ops``.
    """

    name: str
    num_args: tuple[int, int | None]
    infer: InferFn
    func_name: str
    legalize: LegalizeFn | None = None


OPS: dict[str, OpDef] = {}


def register_op(
    name: str, num_args: tuple[int, int | None], infer: InferFn, func_name: str | None = None
) -> OpDef:
    """Register operator ``name`` (re-registering replaces it)."""
    op = OpDef(name, num_args, infer, func_name or name)
    OPS[name] = op
    return op


def get_op(name: str) -> OpDef:
    """The operator named ``name``; GraphError lists the known ones otherwise."""
    op = OPS.get(name)
    if op is None:
        raise GraphError(f"unknown graph operator {name!r}; known: {', '.join(sorted(OPS))}")
    return op


def infer_type(name: str, arg_types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    """Check a call of ``name`` and return its result type.

    Raises
    ------
    GraphError
        Wrong number of arguments, mismatched shapes or dtypes, bad attributes.
    """
    op = get_op(name)
    lo, hi = op.num_args
    n = len(arg_types)
    if n < lo or (hi is not None and n > hi):
        want = f"{lo}" if lo == hi else f"{lo}..{hi if hi is not None else 'any'}"
        raise GraphError(f"{name}: expected {want} tensor arguments, got {n}")
    return op.infer(name, list(arg_types), Attrs(attrs))


# shape helpers ----------------------------------------------------------------------------
def _monomial(e: Expr) -> tuple[int, tuple[int, ...]] | None:
    """``coef * v1 * v2 ...`` as (coef, sorted var ids), or None for other forms."""
    if isinstance(e, IntImm):
        return e.value, ()
    if isinstance(e, Var):
        return 1, (id(e),)
    if isinstance(e, Mul):
        a, b = _monomial(e.a), _monomial(e.b)
        if a is None or b is None:
            return None
        return a[0] * b[0], tuple(sorted(a[1] + b[1]))
    return None


def dims_equal(a: Expr, b: Expr) -> bool:
    """True when the two extents are provably equal (constants, the same Var, products, and
    sums such as ``s + 1`` and ``1 + s``: a cache grown by one token)."""
    if a is b:
        return True
    ma, mb = _monomial(a), _monomial(b)
    if ma is not None and mb is not None:
        return ma == mb
    return Analyzer().can_prove_equal(a, b)  # sums of extents: their canonical forms


def product(shape: Sequence[Expr]) -> tuple[int, tuple[int, ...]] | None:
    """The element count of ``shape`` as a monomial, or None when not a monomial."""
    coef: int = 1
    ids: tuple[int, ...] = ()
    for s in shape:
        m = _monomial(s)
        if m is None:
            return None
        coef, ids = coef * m[0], tuple(sorted(ids + m[1]))
    return coef, ids


def shape_text(shape: Sequence[Expr]) -> str:
    """``(1, n, 768)``."""
    inner = ", ".join(dim_text(s) for s in shape)
    return f"({inner}{',' if len(shape) == 1 else ''})"


def norm_axis(op: str, axis: int, ndim: int) -> int:
    """``axis`` in ``[0, ndim)``; negative counts from the end."""
    if not -ndim <= axis < ndim:
        raise GraphError(f"{op}: axis {axis} is out of range for a tensor of rank {ndim}")
    return axis % ndim


def same_dtype(op: str, types: Sequence[TensorType]) -> DataType:
    """The common dtype of ``types``; GraphError when they differ."""
    first = types[0].dtype
    for i, t in enumerate(types[1:], 1):
        if t.dtype != first:
            raise GraphError(
                f"{op}: argument {i} has dtype {t.dtype}, expected {first} "
                f"(like argument 0); convert one with the astype op (nn: x.astype({str(first)!r}))"
            )
    return first


def float_dtype(op: str, t: TensorType) -> DataType:
    """``t.dtype`` when it is a float type."""
    if not t.dtype.is_float:
        raise GraphError(f"{op}: expected a floating-point tensor, got {t.describe()}")
    return t.dtype


def broadcast_shapes(op: str, a: Sequence[Expr], b: Sequence[Expr]) -> tuple[Expr, ...]:
    """numpy-style broadcast of two shapes; GraphError when they are incompatible."""
    out: list[Expr] = []
    n = max(len(a), len(b))
    one = as_expr(1)
    padded_a = (one,) * (n - len(a)) + tuple(a)
    padded_b = (one,) * (n - len(b)) + tuple(b)
    for i, (da, db) in enumerate(zip(padded_a, padded_b, strict=True)):
        if isinstance(da, IntImm) and da.value == 1:
            out.append(db)
        elif (isinstance(db, IntImm) and db.value == 1) or dims_equal(da, db):
            out.append(da)
        else:
            raise GraphError(
                f"{op}: shapes {shape_text(a)} and {shape_text(b)} do not broadcast "
                f"(dimension {i}: {dim_text(da)} vs {dim_text(db)})"
            )
    return tuple(out)


def int_tuple(op: str, attrs: Attrs, key: str, n: int, default: int) -> tuple[int, ...]:
    """An attribute that is an int or a tuple of ``n`` ints."""
    v = attrs.get(key, default)
    vals = (v,) * n if isinstance(v, int) else v if isinstance(v, tuple) else None
    if vals is None or len(vals) != n or not all(_is_int(x) for x in vals):
        raise GraphError(f"{op}: attribute {key!r} must be an int or {n} ints, got {v!r}")
    return tuple(int(x) for x in vals if isinstance(x, int))


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def attr_int(op: str, attrs: Attrs, key: str, default: int) -> int:
    """An integer attribute (``default`` when absent)."""
    v = attrs.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool):
        raise GraphError(f"{op}: attribute {key!r} must be an int, got {v!r}")
    return v


def attr_float(op: str, attrs: Attrs, key: str, default: float) -> float:
    """A float attribute (ints accepted; ``default`` when absent or None)."""
    v = attr_optional_float(op, attrs, key)
    return default if v is None else v


def attr_optional_float(op: str, attrs: Attrs, key: str) -> float | None:
    """A float attribute (ints accepted) or None when absent or None."""
    v = attrs.get(key)
    if v is None:
        return None
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise GraphError(f"{op}: attribute {key!r} must be a number, got {v!r}")
    return float(v)


def attr_axes(op: str, attrs: Attrs, key: str) -> tuple[int, ...] | None:
    """An attribute holding an int, a tuple of ints, or None."""
    v = attrs.get(key)
    if v is None:
        return None
    items = (v,) if isinstance(v, int) else v if isinstance(v, tuple) else None
    if items is None or not all(_is_int(x) for x in items):
        raise GraphError(f"{op}: attribute {key!r} must be an int or ints, got {v!r}")
    return tuple(int(x) for x in items if isinstance(x, int))
