"""Elementwise binary operators with numpy broadcasting, comparisons and ``where``.

Broadcasting follows numpy: shapes align at the trailing axis and an extent of 1 stretches.
Two symbolic extents that are different expressions are assumed equal (the caller's
contract, as in numpy where a mismatch would be an error).
Operands must share a dtype; Python scalars take the tensor operand's dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import TilecraftError
from ..ir import Expr, ExprLike, as_expr
from ..ir import op as irop
from ..te import Tensor, compute
from ._util import const_int, same_extent

Operand = Tensor | ExprLike


def broadcast_shape(*shapes: Sequence[Expr]) -> tuple[Expr, ...]:
    """The numpy broadcast of ``shapes``."""
    ndim = max((len(s) for s in shapes), default=0)
    out: list[Expr] = []
    for d in range(ndim):
        dims = [s[len(s) - ndim + d] for s in shapes if len(s) - ndim + d >= 0]
        pick: Expr | None = None
        for e in dims:
            if const_int(e) == 1:
                continue
            if pick is None:
                pick = e
            elif (
                const_int(pick) is not None
                and const_int(e) is not None
                and not same_extent(pick, e)
            ):
                raise TilecraftError(
                    f"cannot broadcast shapes {[tuple(map(str, s)) for s in shapes]}: "
                    f"extents {const_int(pick)} and {const_int(e)} at axis {d}"
                )
            elif const_int(pick) is None and const_int(e) is not None:
                pick = e  # prefer the static extent
        out.append(pick if pick is not None else dims[0])
    return tuple(out)


def broadcast_index(t: Tensor, out_shape: Sequence[Expr], idx: Sequence[Expr]) -> list[Expr]:
    """Indices into ``t`` for output index ``idx`` of a broadcast to ``out_shape``."""
    off = len(out_shape) - t.ndim
    res: list[Expr] = []
    for d, ext in enumerate(t.shape):
        if const_int(ext) == 1 and const_int(out_shape[off + d]) != 1:
            res.append(as_expr(0, idx[off + d].dtype))
        else:
            res.append(idx[off + d])
    return res


def _operand_dtype(operands: Sequence[Operand], name: str) -> str:
    dts = {str(o.dtype) for o in operands if isinstance(o, (Tensor, Expr))}
    if len(dts) > 1:
        raise TilecraftError(f"{name}: operand dtypes differ: {sorted(dts)}; cast first")
    return dts.pop() if dts else "float32"


def _value(o: Operand, shape: Sequence[Expr], idx: Sequence[Expr], dt: str) -> Expr:
    if isinstance(o, Tensor):
        return o[tuple(broadcast_index(o, shape, idx))]
    return as_expr(o, dt)


def elementwise(
    operands: Sequence[Operand], f: Callable[..., Expr], name: str, dtype: str | None = None
) -> Tensor:
    """A broadcast elementwise stage ``out = f(*operands)``; scalars are broadcast as is.

    ``dtype`` is the dtype scalar operands take (default: the tensors' shared dtype).
    """
    tensors = [o for o in operands if isinstance(o, Tensor)]
    if not tensors:
        raise TilecraftError(f"{name}: needs at least one tensor operand")
    dt = dtype or _operand_dtype(operands, name)
    shape = broadcast_shape(*(t.shape for t in tensors))
    return compute(  # type: ignore[no-any-return]
        shape, lambda *idx: f(*(_value(o, shape, idx, dt) for o in operands)), name=name
    )


def _binary(f: Callable[[Expr, Expr], Expr], tag: str) -> Callable[..., Tensor]:
    def op(a: Operand, b: Operand, name: str = f"T_{tag}") -> Tensor:
        return elementwise([a, b], f, name)

    op.__name__ = tag
    op.__doc__ = f"""Elementwise ``{tag}(a, b)`` with numpy broadcasting.

    Parameters
    ----------
    a, b
        Tensors or scalars (scalars take the tensor operand's dtype).
    name
        Stage name.

    Returns
    -------
    Tensor
        Shape: the broadcast of the operands' shapes.
    """
    return op


add = _binary(lambda x, y: x + y, "add")
subtract = _binary(lambda x, y: x - y, "subtract")
multiply = _binary(lambda x, y: x * y, "multiply")
divide = _binary(lambda x, y: x / y, "divide")  # integers: truncating C division
maximum = _binary(irop.max, "maximum")
minimum = _binary(irop.min, "minimum")
power = _binary(irop.pow, "power")
equal = _binary(lambda x, y: x.eq(y), "equal")
not_equal = _binary(lambda x, y: x.ne(y), "not_equal")
less = _binary(lambda x, y: x < y, "less")
less_equal = _binary(lambda x, y: x <= y, "less_equal")
greater = _binary(lambda x, y: x > y, "greater")
greater_equal = _binary(lambda x, y: x >= y, "greater_equal")
logical_and = _binary(lambda x, y: x & y, "logical_and")
logical_or = _binary(lambda x, y: x | y, "logical_or")


def floor_divide(a: Operand, b: Operand, name: str = "T_floor_divide") -> Tensor:
    """``a // b`` rounding toward negative infinity (integers), ``floor(a / b)`` for floats.

    Integers follow numpy where C would trap: a zero divisor gives 0 and ``MIN // -1`` wraps
    to ``MIN``.
    """
    dt = _operand_dtype([a, b], "floor_divide")
    if dt.startswith(("float", "bfloat")):
        return elementwise([a, b], lambda x, y: irop.floor(x / y), name)
    return elementwise([a, b], lambda x, y: x // y, name)


def floor_mod(a: Operand, b: Operand, name: str = "T_floor_mod") -> Tensor:
    """``a % b`` with the sign of ``b`` (numpy ``remainder``/``mod``).

    Integers: a zero divisor gives 0 and ``MIN % -1`` gives 0, as numpy (no trap). Floats:
    ``fmod(a, b)`` moved into ``b``'s sign (NaN for a zero divisor, as numpy).
    """
    dt = _operand_dtype([a, b], "floor_mod")
    if dt.startswith(("float", "bfloat")):

        def fmod(x: Expr, y: Expr) -> Expr:
            r = irop.fmod(x, y)
            zero = as_expr(0.0, r.dtype)
            fix = r.ne(zero) & ((r < zero).ne(y < zero))
            return irop.select(fix, r + y, r)

        return elementwise([a, b], fmod, name)
    return elementwise([a, b], lambda x, y: x % y, name)


def where(cond: Operand, a: Operand, b: Operand, name: str = "T_where") -> Tensor:
    """``a`` where ``cond`` holds, else ``b`` (numpy ``where``, broadcasting all three).

    ``cond`` is a bool tensor (or expression); ``a`` and ``b`` share a dtype.
    """
    dt = _operand_dtype([a, b], "where")
    tensors = [o for o in (cond, a, b) if isinstance(o, Tensor)]
    if not tensors:
        raise TilecraftError("where: needs at least one tensor operand")
    shape = broadcast_shape(*(t.shape for t in tensors))

    def body(*idx: Expr) -> Expr:
        c = _value(cond, shape, idx, "bool")
        if not c.dtype.is_bool:
            c = c.ne(as_expr(0, c.dtype))
        return irop.select(c, _value(a, shape, idx, dt), _value(b, shape, idx, dt))

    return compute(shape, body, name=name)  # type: ignore[no-any-return]
