"""Expressions: variables, constants, arithmetic, comparisons, logic, calls and loads.

Python operators build IR: ``+ - * /`` give Add/Sub/Mul/Div, ``//`` and ``%`` give FloorDiv and
FloorMod, ``< <= > >=`` give comparisons, ``& | ~`` give And/Or/Not on booleans. ``==`` stays
object identity; build equality with ``a.eq(b)`` and inequality with ``a.ne(b)``. Python ints
and floats are converted to constants of the other operand's dtype.

Integer ``Div`` truncates toward zero (C semantics); ``FloorDiv``/``FloorMod`` round toward
negative infinity, so ``FloorMod`` has the divisor's sign.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Union

from ..errors import IRError
from .dtype import DataType, DTypeLike, bool_, dtype, int32
from .node import Node

if TYPE_CHECKING:
    from .buffer import Buffer

ExprLike = Union["Expr", int, float, bool]


class Expr(Node):
    """Base of all expressions; every expression has a :attr:`dtype`."""

    __slots__ = ()
    dtype: DataType

    def __bool__(self) -> bool:
        raise TypeError(
            "an IR expression has no Python truth value; build a conditional with "
            "tc.ir.if_then_else / Select, or compare structure with tc.ir.structural_equal"
        )

    # arithmetic ---------------------------------------------------------------------------
    def __add__(self, other: ExprLike) -> Expr:
        return Add(self, as_expr(other, self.dtype))

    def __radd__(self, other: ExprLike) -> Expr:
        return Add(as_expr(other, self.dtype), self)

    def __sub__(self, other: ExprLike) -> Expr:
        return Sub(self, as_expr(other, self.dtype))

    def __rsub__(self, other: ExprLike) -> Expr:
        return Sub(as_expr(other, self.dtype), self)

    def __mul__(self, other: ExprLike) -> Expr:
        return Mul(self, as_expr(other, self.dtype))

    def __rmul__(self, other: ExprLike) -> Expr:
        return Mul(as_expr(other, self.dtype), self)

    def __truediv__(self, other: ExprLike) -> Expr:
        return Div(self, as_expr(other, self.dtype))

    def __rtruediv__(self, other: ExprLike) -> Expr:
        return Div(as_expr(other, self.dtype), self)

    def __floordiv__(self, other: ExprLike) -> Expr:
        return FloorDiv(self, as_expr(other, self.dtype))

    def __rfloordiv__(self, other: ExprLike) -> Expr:
        return FloorDiv(as_expr(other, self.dtype), self)

    def __mod__(self, other: ExprLike) -> Expr:
        return FloorMod(self, as_expr(other, self.dtype))

    def __rmod__(self, other: ExprLike) -> Expr:
        return FloorMod(as_expr(other, self.dtype), self)

    def __neg__(self) -> Expr:
        return negate(self)

    # comparisons --------------------------------------------------------------------------
    def __lt__(self, other: ExprLike) -> Expr:
        return LT(self, as_expr(other, self.dtype))

    def __le__(self, other: ExprLike) -> Expr:
        return LE(self, as_expr(other, self.dtype))

    def __gt__(self, other: ExprLike) -> Expr:
        return GT(self, as_expr(other, self.dtype))

    def __ge__(self, other: ExprLike) -> Expr:
        return GE(self, as_expr(other, self.dtype))

    def eq(self, other: ExprLike) -> Expr:
        """Build ``self == other`` as an IR comparison."""
        return EQ(self, as_expr(other, self.dtype))

    def ne(self, other: ExprLike) -> Expr:
        """Build ``self != other`` as an IR comparison."""
        return NE(self, as_expr(other, self.dtype))

    # logic --------------------------------------------------------------------------------
    def __and__(self, other: ExprLike) -> Expr:
        return And(self, as_expr(other, bool_))

    def __rand__(self, other: ExprLike) -> Expr:
        return And(as_expr(other, bool_), self)

    def __or__(self, other: ExprLike) -> Expr:
        return Or(self, as_expr(other, bool_))

    def __ror__(self, other: ExprLike) -> Expr:
        return Or(as_expr(other, bool_), self)

    def __invert__(self) -> Expr:
        return Not(self)

    __hash__ = object.__hash__


def as_expr(value: ExprLike, like: DTypeLike | None = None) -> Expr:
    """Convert a Python scalar to a constant of dtype ``like`` (default: int32 / float32)."""
    if isinstance(value, Expr):
        return value
    target = dtype(like) if like is not None else None
    if isinstance(value, bool):
        if target is not None and not target.is_bool:
            return (
                IntImm(target, int(value))
                if not target.is_float
                else FloatImm(target, float(value))
            )
        return IntImm(bool_, int(value))
    if isinstance(value, int):
        if target is None:
            return IntImm(int32, value)
        if target.is_float:
            return FloatImm(target.element_of(), float(value))
        return IntImm(target.element_of(), value)
    if isinstance(value, float):
        if target is None:
            return FloatImm(dtype("float32"), value)
        if not target.is_float:
            raise IRError(f"cannot use the float {value!r} where a {target} value is expected")
        return FloatImm(target.element_of(), value)
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        return as_expr(value.item(), like)
    raise IRError(f"cannot convert {type(value).__name__} {value!r} to an IR expression")


# leaves -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Var(Expr):
    """A named scalar variable; identity matters, the name is only a hint for printing."""

    name: str
    dtype: DataType = int32

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", dtype(self.dtype))
        if not isinstance(self.name, str) or not self.name:
            raise IRError(f"Var: name must be a non-empty string, got {self.name!r}")

    __hash__ = object.__hash__


_INT_RANGES = {
    "bool": (0, 1),
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class IntImm(Expr):
    """An integer (or bool) constant."""

    dtype: DataType
    value: int

    def __post_init__(self) -> None:
        dt = self.dtype if type(self.dtype) is DataType else dtype(self.dtype)
        object.__setattr__(self, "dtype", dt)
        if not (dt.is_integer or dt.is_bool) or dt.lanes != 1:
            raise IRError(f"IntImm: dtype must be a scalar integer or bool, got {dt}")
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            if hasattr(self.value, "item"):
                object.__setattr__(self, "value", int(self.value.item()))
            elif isinstance(self.value, bool):
                object.__setattr__(self, "value", int(self.value))
            else:
                raise IRError(f"IntImm: value must be an int, got {self.value!r}")
        lo, hi = _INT_RANGES[dt._name]
        if not lo <= self.value <= hi:
            raise IRError(f"IntImm: {self.value} does not fit in {dt} [{lo}, {hi}]")

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class FloatImm(Expr):
    """A floating-point constant (NaN and infinities allowed)."""

    dtype: DataType
    value: float

    def __post_init__(self) -> None:
        dt = dtype(self.dtype)
        object.__setattr__(self, "dtype", dt)
        if not dt.is_float or dt.lanes != 1:
            raise IRError(f"FloatImm: dtype must be a scalar float type, got {dt}")
        if isinstance(self.value, bool) or not isinstance(self.value, (int, float)):
            if hasattr(self.value, "item"):
                object.__setattr__(self, "value", float(self.value.item()))
            else:
                raise IRError(f"FloatImm: value must be a float, got {self.value!r}")
        object.__setattr__(self, "value", float(self.value))
        if dt.bits == 16 and math.isfinite(self.value) and abs(self.value) > 3.4e38:
            raise IRError(f"FloatImm: {self.value} does not fit in {dt}")

    __hash__ = object.__hash__


# binary arithmetic --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, eq=False, repr=False)
class BinaryOp(Expr):
    """Base of two-operand arithmetic; both operands share one dtype, which is the result's."""

    a: Expr
    b: Expr
    dtype: DataType = field(init=False)
    symbol: ClassVar[str] = "?"
    integer_only: ClassVar[bool] = False

    def __post_init__(self) -> None:
        a, b = self.a, self.b
        if not isinstance(a, Expr) or not isinstance(b, Expr):
            raise IRError(f"{type(self).__name__}: operands must be expressions, got {a!r}, {b!r}")
        dt = a.dtype
        if dt is not b.dtype and dt != b.dtype:  # dtypes are interned: identity first
            raise IRError(f"{type(self).__name__}: operand dtypes differ: {dt} vs {b.dtype}")
        if dt.is_bool:
            raise IRError(f"{type(self).__name__}: arithmetic on bool operands; cast them first")
        if self.integer_only and not dt.is_integer:
            raise IRError(f"{type(self).__name__}: needs integer operands, got {dt}")
        object.__setattr__(self, "dtype", dt)

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Add(BinaryOp):
    """``a + b``."""

    symbol: ClassVar[str] = "+"
    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Sub(BinaryOp):
    """``a - b``."""

    symbol: ClassVar[str] = "-"
    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Mul(BinaryOp):
    """``a * b``."""

    symbol: ClassVar[str] = "*"
    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Div(BinaryOp):
    """``a / b``: true division for floats, truncating (C) division for integers."""

    symbol: ClassVar[str] = "/"
    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class FloorDiv(BinaryOp):
    """``a // b`` rounding toward negative infinity (integers only)."""

    symbol: ClassVar[str] = "//"
    integer_only: ClassVar[bool] = True
    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class FloorMod(BinaryOp):
    """``a % b`` with the sign of ``b`` (integers only)."""

    symbol: ClassVar[str] = "%"
    integer_only: ClassVar[bool] = True
    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Min(BinaryOp):
    """``min(a, b)``."""

    symbol: ClassVar[str] = "min"
    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Max(BinaryOp):
    """``max(a, b)``."""

    symbol: ClassVar[str] = "max"
    __hash__ = object.__hash__


# comparisons --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, eq=False, repr=False)
class CmpOp(Expr):
    """Base of comparisons: operands share a dtype; the result is bool (same lanes)."""

    a: Expr
    b: Expr
    dtype: DataType = field(init=False)
    symbol: ClassVar[str] = "?"

    def __post_init__(self) -> None:
        name = type(self).__name__
        if not isinstance(self.a, Expr) or not isinstance(self.b, Expr):
            raise IRError(f"{name}: operands must be expressions, got {self.a!r}, {self.b!r}")
        if self.a.dtype != self.b.dtype:
            raise IRError(f"{name}: operand dtypes differ: {self.a.dtype} vs {self.b.dtype}")
        object.__setattr__(self, "dtype", bool_.with_lanes(self.a.dtype.lanes))

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class EQ(CmpOp):
    """``a == b``."""

    symbol: ClassVar[str] = "=="
    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class NE(CmpOp):
    """``a != b``."""

    symbol: ClassVar[str] = "!="
    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class LT(CmpOp):
    """``a < b``."""

    symbol: ClassVar[str] = "<"
    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class LE(CmpOp):
    """``a <= b``."""

    symbol: ClassVar[str] = "<="
    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class GT(CmpOp):
    """``a > b``."""

    symbol: ClassVar[str] = ">"
    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class GE(CmpOp):
    """``a >= b``."""

    symbol: ClassVar[str] = ">="
    __hash__ = object.__hash__


# logic --------------------------------------------------------------------------------------


def negate(x: Expr) -> Expr:
    """``-x``: ``0 - x`` for integers; ``x * -1`` for floats, which flips the sign of every
    value (``0 - x`` would give ``+0.0`` for ``x = +0.0``, where negation gives ``-0.0``)."""
    if x.dtype.is_float:
        return Mul(x, as_expr(-1, x.dtype))
    return Sub(as_expr(0, x.dtype), x)


def _check_bool(name: str, *values: Expr) -> None:
    for v in values:
        if not isinstance(v, Expr):
            raise IRError(f"{name}: operands must be expressions, got {v!r}")
        if not v.dtype.is_bool:
            raise IRError(f"{name}: operands must be bool, got {v.dtype}")


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class And(Expr):
    """Logical ``a and b`` on bool operands."""

    a: Expr
    b: Expr
    dtype: DataType = field(init=False)

    def __post_init__(self) -> None:
        _check_bool("And", self.a, self.b)
        object.__setattr__(self, "dtype", self.a.dtype)

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Or(Expr):
    """Logical ``a or b`` on bool operands."""

    a: Expr
    b: Expr
    dtype: DataType = field(init=False)

    def __post_init__(self) -> None:
        _check_bool("Or", self.a, self.b)
        object.__setattr__(self, "dtype", self.a.dtype)

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Not(Expr):
    """Logical negation of a bool operand."""

    a: Expr
    dtype: DataType = field(init=False)

    def __post_init__(self) -> None:
        _check_bool("Not", self.a)
        object.__setattr__(self, "dtype", self.a.dtype)

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Select(Expr):
    """``true_value if condition else false_value``.

    Only the chosen branch is evaluated (like C's ``?:``), so a branch may hold a load that
    is out of bounds when the condition is false (padding, concatenation). Backends keep it
    lazy.
    """

    condition: Expr
    true_value: Expr
    false_value: Expr
    dtype: DataType = field(init=False)

    def __post_init__(self) -> None:
        _check_bool("Select", self.condition)
        if not isinstance(self.true_value, Expr) or not isinstance(self.false_value, Expr):
            raise IRError("Select: branches must be expressions")
        if self.true_value.dtype != self.false_value.dtype:
            raise IRError(
                f"Select: branch dtypes differ: {self.true_value.dtype} vs {self.false_value.dtype}"
            )
        object.__setattr__(self, "dtype", self.true_value.dtype)

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Cast(Expr):
    """Convert ``value`` to ``dtype`` (C conversion rules; float to int truncates)."""

    dtype: DataType
    value: Expr

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", dtype(self.dtype))
        if not isinstance(self.value, Expr):
            raise IRError(f"Cast: value must be an expression, got {self.value!r}")
        if self.dtype.lanes != self.value.dtype.lanes:
            raise IRError(f"Cast: lanes differ: {self.value.dtype} to {self.dtype}")

    __hash__ = object.__hash__


# intrinsic calls ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Intrinsic:
    """Signature of an intrinsic: arity and whether its result is bool (a predicate)."""

    name: str
    arity: int
    predicate: bool = False


INTRINSICS: dict[str, Intrinsic] = {
    i.name: i
    for i in [
        *(
            Intrinsic(n, 1)
            for n in (
                "exp",
                "exp2",
                "exp10",
                "expm1",
                "log",
                "log2",
                "log10",
                "log1p",
                "sqrt",
                "rsqrt",
                "tanh",
                "erf",
                "sigmoid",
                "fabs",
                "floor",
                "ceil",
                "round",
                "trunc",
                "sin",
                "cos",
                "tan",
                "asin",
                "acos",
                "atan",
                "sinh",
                "cosh",
            )
        ),
        *(Intrinsic(n, 2) for n in ("pow", "fmod", "atan2", "hypot", "copysign")),
        *(Intrinsic(n, 1, predicate=True) for n in ("isnan", "isinf", "isfinite")),
    ]
}


@dataclass(frozen=True, slots=True)
class DeviceIntrinsic:
    """Signature of a device intrinsic: a GPU operation evaluated for its effect.

    ``signature`` has one letter per argument: ``a`` an element address (a
    :class:`BufferLoad` naming the first element the operation touches, not a read of it),
    ``i`` an integer expression, ``f`` a float expression. A call's dtype is ``int32`` and
    its value is meaningless; it stands in ``T.evaluate(...)``.
    """

    name: str
    signature: str
    doc: str = ""


DEVICE_INTRINSICS: dict[str, DeviceIntrinsic] = {}
"""Device intrinsics by name (filled by :mod:`tilecraft.ir.device_intrin`)."""


def _check_device_call(call: Call, intr: DeviceIntrinsic) -> None:
    """Raise IRError unless ``call`` matches the signature of device intrinsic ``intr``."""
    if call.dtype != int32:
        raise IRError(f"Call {call.op}: a device intrinsic has dtype int32, got {call.dtype}")
    if len(call.args) != len(intr.signature):
        raise IRError(
            f"Call {call.op}: expects {len(intr.signature)} argument(s), got {len(call.args)}"
        )
    for k, (a, kind) in enumerate(zip(call.args, intr.signature, strict=True)):
        ok = isinstance(a, Expr) and (
            isinstance(a, BufferLoad)
            if kind == "a"
            else a.dtype.is_integer
            if kind == "i"
            else a.dtype.is_float
        )
        if not ok:
            what = {"a": "an element address (a buffer load)", "i": "an integer", "f": "a float"}
            raise IRError(f"Call {call.op}: argument {k} must be {what[kind]}, got {a!r}")


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Call(Expr):
    """Call of a math intrinsic from :data:`INTRINSICS` on float arguments of one dtype, or
    of a device intrinsic from :data:`DEVICE_INTRINSICS` (see :class:`DeviceIntrinsic`)."""

    dtype: DataType
    op: str
    args: tuple[Expr, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", dtype(self.dtype))
        object.__setattr__(self, "args", tuple(self.args))
        intr = INTRINSICS.get(self.op)
        if intr is None:
            device = DEVICE_INTRINSICS.get(self.op)
            if device is None:
                raise IRError(f"Call: unknown intrinsic {self.op!r}; known: {sorted(INTRINSICS)}")
            _check_device_call(self, device)
            return
        if len(self.args) != intr.arity:
            raise IRError(f"Call {self.op}: expects {intr.arity} argument(s), got {len(self.args)}")
        for a in self.args:
            if not isinstance(a, Expr):
                raise IRError(f"Call {self.op}: arguments must be expressions, got {a!r}")
            if not a.dtype.is_float:
                raise IRError(f"Call {self.op}: arguments must be floating point, got {a.dtype}")
            if a.dtype != self.args[0].dtype:
                raise IRError(f"Call {self.op}: argument dtypes differ")
        expected = (
            bool_.with_lanes(self.args[0].dtype.lanes) if intr.predicate else self.args[0].dtype
        )
        if self.dtype != expected:
            raise IRError(f"Call {self.op}: result dtype must be {expected}, got {self.dtype}")

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class BufferLoad(Expr):
    """Read ``buffer[indices]``; the dtype is the buffer's."""

    buffer: Buffer
    indices: tuple[Expr, ...]
    dtype: DataType = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "indices", tuple(as_expr(i) for i in self.indices))
        check_indices("BufferLoad", self.buffer, self.indices)
        object.__setattr__(self, "dtype", self.buffer.dtype)

    __hash__ = object.__hash__


def check_indices(where: str, buffer: Buffer, indices: tuple[Expr, ...]) -> None:
    """Raise IRError unless ``indices`` are integer expressions matching ``buffer``'s rank."""
    from .buffer import Buffer

    if not isinstance(buffer, Buffer):
        raise IRError(f"{where}: expected a Buffer, got {type(buffer).__name__}")
    if len(indices) != len(buffer.shape):
        raise IRError(
            f"{where} {buffer.name}: {len(indices)} indices for a buffer of rank "
            f"{len(buffer.shape)}"
        )
    for idx in indices:
        if not isinstance(idx, Expr) or not idx.dtype.is_integer:
            raise IRError(
                f"{where} {buffer.name}: indices must be integer expressions, got {idx!r}"
            )


# ranges -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Range(Node):
    """The half-open integer interval ``[min, min + extent)``."""

    min: Expr
    extent: Expr

    def __post_init__(self) -> None:
        lo, ext = self.min, self.extent
        if isinstance(lo, Expr) and not isinstance(ext, Expr):
            ext = as_expr(ext, lo.dtype)
        elif isinstance(ext, Expr) and not isinstance(lo, Expr):
            lo = as_expr(lo, ext.dtype)
        else:
            lo, ext = as_expr(lo), as_expr(ext)
        object.__setattr__(self, "min", lo)
        object.__setattr__(self, "extent", ext)
        for v in (lo, ext):
            if not v.dtype.is_integer or v.dtype.lanes != 1:
                raise IRError(f"Range: bounds must be scalar integers, got {v.dtype}")
        if lo.dtype != ext.dtype:
            raise IRError(f"Range: min and extent dtypes differ: {lo.dtype} vs {ext.dtype}")

    @staticmethod
    def from_min_extent(min: ExprLike, extent: ExprLike) -> Range:
        """The range ``[min, min + extent)``."""
        return Range(min, extent)  # type: ignore[arg-type]

    __hash__ = object.__hash__


def const(value: int | float | bool, dt: DTypeLike = "int32") -> Expr:
    """A constant of dtype ``dt``."""
    d = dtype(dt)
    if d.is_float:
        return FloatImm(d, float(value))
    return IntImm(d, int(value))
