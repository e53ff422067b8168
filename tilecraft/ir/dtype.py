"""Data types of IR values: scalar kinds with a bit width and vector lanes."""

from __future__ import annotations

import enum
import functools
import re
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np

from ..errors import IRError


class TypeCode(enum.Enum):
    """The kind of a scalar type."""

    BOOL = "bool"
    INT = "int"
    UINT = "uint"
    FLOAT = "float"
    BFLOAT = "bfloat"


_ALLOWED_BITS = {
    TypeCode.BOOL: (1,),
    TypeCode.INT: (8, 16, 32, 64),
    TypeCode.UINT: (8, 16, 32, 64),
    TypeCode.FLOAT: (16, 32, 64),
    TypeCode.BFLOAT: (16,),
}

_ALIASES = {
    "f16": "float16",
    "f32": "float32",
    "f64": "float64",
    "bf16": "bfloat16",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "u8": "uint8",
    "u16": "uint16",
    "u32": "uint32",
    "u64": "uint64",
    "float": "float32",
    "int": "int32",
    "double": "float64",
    "half": "float16",
}

DTypeLike: TypeAlias = "str | DataType | np.dtype[Any] | type[np.generic]"
"""What every dtype argument accepts: a name, a :class:`DataType` or a numpy dtype."""

_DTYPE_RE = re.compile(r"^(bool|int|uint|float|bfloat)(\d*)(?:x(\d+))?$")


@dataclass(frozen=True, slots=True)
class DataType:
    """A scalar or vector data type, e.g. ``float32`` or ``float16x4``.

    Instances are interned: build them with :func:`dtype` and compare with ``==``.

    Attributes
    ----------
    is_bool, is_int, is_uint, is_integer, is_float
        The kind tests: ``bool``; signed integers; unsigned integers; either (not bool);
        float16/32/64 and bfloat16.
    """

    code: TypeCode
    bits: int
    lanes: int = 1
    # the name and the kind tests, made once: printing, hashing, simplification and code
    # generation ask for them constantly (a property through the enum cost about 0.5 us)
    _name: str = field(init=False, repr=False, compare=False)
    is_bool: bool = field(init=False, repr=False, compare=False)
    is_int: bool = field(init=False, repr=False, compare=False)
    is_uint: bool = field(init=False, repr=False, compare=False)
    is_integer: bool = field(init=False, repr=False, compare=False)
    is_float: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.bits not in _ALLOWED_BITS[self.code]:
            raise IRError(f"dtype: {self.code.value} does not come in {self.bits} bits")
        if self.lanes < 1:
            raise IRError(f"dtype: lanes must be >= 1, got {self.lanes}")
        base = "bool" if self.code is TypeCode.BOOL else f"{self.code.value}{self.bits}"
        object.__setattr__(self, "_name", base if self.lanes == 1 else f"{base}x{self.lanes}")
        code = self.code
        object.__setattr__(self, "is_bool", code is TypeCode.BOOL)
        object.__setattr__(self, "is_int", code is TypeCode.INT)
        object.__setattr__(self, "is_uint", code is TypeCode.UINT)
        object.__setattr__(self, "is_integer", code in (TypeCode.INT, TypeCode.UINT))
        object.__setattr__(self, "is_float", code in (TypeCode.FLOAT, TypeCode.BFLOAT))

    def __str__(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"dtype({str(self)!r})"

    @property
    def is_scalar(self) -> bool:
        """True when ``lanes == 1``."""
        return self.lanes == 1

    @property
    def itemsize(self) -> int:
        """Bytes one element occupies in memory (bool takes one byte)."""
        return max(self.bits // 8, 1) * self.lanes

    def with_lanes(self, lanes: int) -> DataType:
        """The same scalar type with ``lanes`` lanes."""
        return _make(self.code, self.bits, lanes)

    def element_of(self) -> DataType:
        """The scalar type of one lane."""
        return _make(self.code, self.bits, 1)

    def numpy_name(self) -> str:
        """The numpy dtype name used to store one lane (bfloat16 is stored as uint16)."""
        if self.is_bool:
            return "bool"
        if self.code is TypeCode.BFLOAT:
            return "uint16"
        return f"{self.code.value}{self.bits}"


@functools.cache
def _make(code: TypeCode, bits: int, lanes: int) -> DataType:
    return DataType(code, bits, lanes)


@functools.cache
def _parse(text: str) -> DataType:
    name = _ALIASES.get(text, text)
    m = _DTYPE_RE.match(name)
    if m is None:
        raise IRError(f"dtype: unknown data type {text!r}")
    code = TypeCode(m.group(1))
    if code is TypeCode.BOOL:
        if m.group(2):
            raise IRError(f"dtype: unknown data type {text!r}")
        bits = 1
    else:
        if not m.group(2):
            raise IRError(f"dtype: {text!r} needs a bit width")
        bits = int(m.group(2))
    lanes = int(m.group(3)) if m.group(3) else 1
    return _make(code, bits, lanes)


def _from_numpy(value: np.dtype[Any]) -> DataType:
    """The DataType of a numpy dtype (native byte order; bool, integers, floats, bfloat16)."""
    if value.byteorder == ">" or (value.byteorder == "<" and not np.little_endian):
        raise IRError(f"dtype: numpy dtype {value.str!r} is not in native byte order")
    if value.kind in "biuf" or value.name == "bfloat16":
        return _parse(value.name)
    raise IRError(f"dtype: numpy dtype {value} has no tilecraft equivalent")


def dtype(value: DTypeLike) -> DataType:
    """Return the interned :class:`DataType` named by ``value``.

    Accepts canonical names (``"float32"``, ``"int64"``, ``"bool"``, ``"float16x4"``), the
    short aliases ``f16 f32 f64 bf16 i8 i16 i32 i64 u8 u16 u32 u64``, and numpy dtypes
    (``np.float32``, ``np.dtype("float16")``).
    """
    if isinstance(value, DataType):
        return value
    if isinstance(value, str):
        return _parse(value)
    if isinstance(value, np.dtype):
        return _from_numpy(value)
    if isinstance(value, type) and issubclass(value, np.generic):
        return _from_numpy(np.dtype(value))
    raise IRError(
        f"dtype: expected a dtype name, a DataType or a numpy dtype, got {type(value).__name__}"
    )


bool_ = dtype("bool")
int8 = dtype("int8")
int16 = dtype("int16")
int32 = dtype("int32")
int64 = dtype("int64")
uint8 = dtype("uint8")
float16 = dtype("float16")
bfloat16 = dtype("bfloat16")
float32 = dtype("float32")
float64 = dtype("float64")
