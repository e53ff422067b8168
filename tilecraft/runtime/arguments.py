"""Checking and converting call arguments: numpy arrays, DLPack tensors and scalars."""

from __future__ import annotations

import ctypes
import numbers
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import GraphError, TilecraftError
from ..ir import (
    Add,
    Buffer,
    Expr,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    PrimFunc,
    Sub,
    Var,
)


class ArgumentError(TilecraftError, ValueError):
    """A kernel was called with arguments that do not match its parameters."""


class ArgumentTypeError(ArgumentError, TypeError):
    """An argument has the wrong kind or dtype."""


class GraphArgumentError(GraphError, ArgumentTypeError):
    """A graph function was called with missing, extra, unknown or ill-fitting arguments."""


class FunctionNotFoundError(TilecraftError, KeyError):
    """``lib[name]`` names no function of the module (a ``KeyError`` too)."""

    def __str__(self) -> str:  # KeyError would show the message quoted
        return str(self.args[0]) if self.args else ""


class NoSuchAttributeError(TilecraftError, AttributeError):
    """``exe.name`` names no function of an executable (an ``AttributeError`` too)."""


def missing_function(name: object, names: list[str]) -> FunctionNotFoundError:
    """The error for ``lib[name]`` when the module only has ``names``."""
    return FunctionNotFoundError(f"module has no function {name!r}; it has {names}")


def check_timing(number: object, repeat: object) -> None:
    """Reject ``time_evaluator`` counts that are not integers >= 1."""
    for what, value in (("number", number), ("repeat", repeat)):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool):
            raise ArgumentTypeError(
                f"time_evaluator: {what} must be an integer, got {type(value).__name__}"
            )
        if value < 1:
            raise ArgumentError(f"time_evaluator: {what} must be >= 1, got {value}")


def reject_keywords(fname: str, names: list[str], kwargs: dict[str, Any]) -> None:
    """Kernels take positional arguments only: name the parameters instead of a TypeError."""
    if kwargs:
        raise ArgumentTypeError(
            f"{fname}: arguments are positional ({', '.join(names)}); got keyword arguments "
            f"{sorted(kwargs)}"
        )


_DLPACK_CPU = 1
_INT_LIMITS = {8: 2**7, 16: 2**15, 32: 2**31, 64: 2**63}


def shape_text(shape: tuple[Expr, ...]) -> str:
    """``(n, 16)`` for a buffer shape."""
    parts = [str(s.value) if isinstance(s, IntImm) else _expr_text(s) for s in shape]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _expr_text(e: Expr) -> str:
    if isinstance(e, Var):
        return e.name
    if isinstance(e, IntImm):
        return str(e.value)
    syms: dict[type, str] = {Add: "+", Sub: "-", Mul: "*", FloorDiv: "//", FloorMod: "%"}
    sym = syms.get(type(e))
    if sym is not None:
        return f"({_expr_text(e.a)} {sym} {_expr_text(e.b)})"  # type: ignore[attr-defined]
    return type(e).__name__


def eval_shape_expr(e: Expr, env: dict[int, int]) -> int | None:
    """Value of a shape expression under ``env`` (``id(var)`` -> int); None when unbound."""
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, Var):
        return env.get(id(e))
    ops: dict[type, Callable[[int, int], int]] = {
        Add: int.__add__, Sub: int.__sub__, Mul: int.__mul__, FloorDiv: int.__floordiv__,
        FloorMod: int.__mod__, Min: min, Max: max,
    }  # fmt: skip
    fn = ops.get(type(e))
    if fn is None:
        return None
    a = eval_shape_expr(e.a, env)  # type: ignore[attr-defined]
    b = eval_shape_expr(e.b, env)  # type: ignore[attr-defined]
    if a is None or b is None or (fn in (int.__floordiv__, int.__mod__) and b == 0):
        return None
    return int(fn(a, b))


PRODUCER_ERRORS: tuple[type[Exception], ...] = (
    TypeError, ValueError, LookupError, AttributeError, BufferError, RuntimeError,
    ArithmeticError,
)  # fmt: skip
"""What a tensor's own ``__dlpack__``/``__dlpack_device__`` (third-party code) may raise when it
is malformed or misused; the runtime reports them as :class:`ArgumentTypeError`."""


def dlpack_device(value: Any, where: str) -> tuple[int, int] | None:
    """``value.__dlpack_device__()`` checked to be two integers; None when it has none."""
    try:
        device = getattr(value, "__dlpack_device__", None)
        got = device() if device is not None else None
    except PRODUCER_ERRORS as e:
        raise ArgumentTypeError(
            f"{where}: the tensor's __dlpack_device__() failed: {type(e).__name__}: {e}"
        ) from e
    if device is None:
        return None
    if isinstance(got, tuple) and len(got) == 2:
        kind, index = got
        if all(isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in got):
            return int(kind), int(index)
    raise ArgumentTypeError(
        f"{where}: __dlpack_device__() must return (device_type, device_id) integers, got {got!r}"
    )


def for_inference(value: Any, where: str) -> Any:
    """``value``, detached first when it is a tensor that requires grad (a PyTorch tensor).

    Such a tensor refuses DLPack export; its detached view shares the memory, so outputs
    written into it still land in the caller's tensor.
    """
    try:
        needs_detach = getattr(value, "requires_grad", False) is True
        return value.detach() if needs_detach else value
    except PRODUCER_ERRORS as e:
        raise ArgumentTypeError(
            f"{where}: cannot detach the tensor for inference: {type(e).__name__}: {e}"
        ) from e


def result_like(args: Sequence[Any], result: np.ndarray | tuple[np.ndarray, ...]) -> Any:
    """``result`` as the kind of tensor the first tensor of ``args`` is, without a copy.

    numpy arrays (and anything that is not a DLPack tensor) give ``result`` itself; a DLPack
    tensor gives ``from_dlpack(result)`` of its own library (``torch.from_dlpack`` for a
    PyTorch tensor), found from the tensor's type so that no library is imported here. A
    tuple of results gives the tuple of each one's conversion.
    """
    if isinstance(result, tuple):
        return tuple(result_like(args, r) for r in result)
    for a in args:
        if isinstance(a, np.ndarray):
            return result
        if isinstance(a, type) or not hasattr(a, "__dlpack__"):
            continue
        library = sys.modules.get(type(a).__module__.partition(".")[0])
        from_dlpack = getattr(library, "from_dlpack", None)
        return from_dlpack(result) if callable(from_dlpack) else result
    return result


def to_array(value: Any, where: str) -> np.ndarray:
    """``value`` as a numpy array: numpy arrays as they are, DLPack CPU tensors zero-copy.

    A tensor that requires grad is detached first (:func:`for_inference`).

    Raises
    ------
    ArgumentTypeError
        For anything else, a tensor on another device, or a tensor whose DLPack export fails
        (whatever the producer raised is chained as the cause).
    """
    if isinstance(value, np.ndarray):
        return value
    value = for_inference(value, where)
    if isinstance(value, type) or not hasattr(value, "__dlpack__"):
        raise ArgumentTypeError(
            f"{where}: expected a numpy array or a DLPack tensor, got {type(value).__name__}"
        )
    device = dlpack_device(value, where)
    if device is not None and device[0] != _DLPACK_CPU:
        raise ArgumentTypeError(
            f"{where}: tensor lives on DLPack device ({device[0]}, {device[1]}); the "
            "CPU runtime needs CPU tensors"
        )
    try:
        arr = np.from_dlpack(value)
    except PRODUCER_ERRORS as e:
        raise ArgumentTypeError(
            f"{where}: cannot import the tensor via DLPack: {type(e).__name__}: {e}"
        ) from e
    if not isinstance(arr, np.ndarray):  # a producer can hand numpy anything
        raise ArgumentTypeError(f"{where}: DLPack import gave {type(arr).__name__}")
    return arr


@dataclass
class PreparedCall:
    """ctypes arguments for one call plus the arrays they point into (kept alive)."""

    cargs: list[Any]
    arrays: list[np.ndarray]


def _scalar(value: Any, var: Var, where: str) -> Any:
    dt = var.dtype
    if dt.is_integer or dt.is_bool:
        if isinstance(value, bool) and not dt.is_bool:
            raise ArgumentTypeError(f"{where}: expected an integer, got bool")
        if not isinstance(value, numbers.Integral):
            raise ArgumentTypeError(f"{where}: expected an integer ({dt}), got {value!r}")
        return int(value)
    if not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{where}: expected a number ({dt}), got {value!r}")
    return float(value)


def ctype_of(dt: Any) -> Any:
    """ctypes type of a scalar parameter's dtype."""
    if dt.is_float:
        return ctypes.c_double if dt.bits == 64 else ctypes.c_float
    if dt.is_bool:
        return ctypes.c_bool
    table = {8: ctypes.c_int8, 16: ctypes.c_int16, 32: ctypes.c_int32, 64: ctypes.c_int64}
    utable = {8: ctypes.c_uint8, 16: ctypes.c_uint16, 32: ctypes.c_uint32, 64: ctypes.c_uint64}
    return (utable if dt.is_uint else table)[dt.bits]


def _check_dtype(arr: np.ndarray, buf: Buffer, where: str) -> np.ndarray:
    expected = np.dtype(buf.dtype.numpy_name())
    if arr.dtype == expected:
        return arr
    if buf.dtype.code.value == "bfloat" and arr.dtype.name == "bfloat16" and arr.itemsize == 2:
        return arr.view(np.uint16)
    shown = "bfloat16 (as uint16 bit patterns)" if buf.dtype.code.value == "bfloat" else expected
    raise ArgumentTypeError(f"{where}: expected dtype {shown}, got {arr.dtype}")


class ArgumentChecker:
    """Check arguments against a PrimFunc's parameters and build the ctypes call.

    Parameters
    ----------
    func
        The original (unlowered) function: its buffers' shapes are what arguments must match.
    lowered
        The lowered function: its parameters are the C function's arguments.
    written
        ``id``s of the buffers the function writes (outputs must be writeable and unaliased).
    """

    def __init__(self, func: PrimFunc, lowered: PrimFunc, written: set[int]) -> None:
        self.func = func
        self.lowered = lowered
        self.written = written
        self.names = [p.name for p in func.params]

    def prepare(self, args: tuple[Any, ...]) -> PreparedCall:
        """Validate ``args`` and return the ctypes arguments; raise ArgumentError if wrong."""
        fname = self.func.name
        params = self.func.params
        if len(args) != len(params):
            raise ArgumentError(
                f"{fname}: expected {len(params)} arguments ({', '.join(self.names)}), "
                f"got {len(args)}"
            )
        env: dict[int, int] = {}
        arrays: list[np.ndarray | None] = []
        for i, (p, a) in enumerate(zip(params, args, strict=True)):
            where = f"{fname}: argument {i} {p.name!r}"
            if isinstance(p, Var):
                arrays.append(None)
                env[id(p)] = _scalar(a, p, where)
                continue
            arr = _check_dtype(to_array(a, where), p, where)
            if arr.ndim != p.ndim:
                raise ArgumentError(
                    f"{where}: expected a {p.ndim}-d array of shape {shape_text(p.shape)}, "
                    f"got shape {arr.shape}"
                )
            self._bind(p, arr, env, where)
            if not arr.flags.c_contiguous:
                raise ArgumentError(
                    f"{where}: expected a C-contiguous array, got strides {arr.strides}; pass "
                    "np.ascontiguousarray(x)"
                )
            if id(p) in self.written and not arr.flags.writeable:
                raise ArgumentError(
                    f"{where}: the function writes this buffer; got a read-only array"
                )
            arrays.append(arr)
        for i, (p, maybe) in enumerate(zip(params, arrays, strict=True)):
            if isinstance(p, Buffer) and maybe is not None:
                self._check_shape(p, maybe, env, f"{fname}: argument {i} {p.name!r}")
        self._check_aliasing(arrays)
        return PreparedCall(self._cargs(arrays, env), [a for a in arrays if a is not None])

    def _bind(self, p: Buffer, arr: np.ndarray, env: dict[int, int], where: str) -> None:
        for dim, (extent, got) in enumerate(zip(p.shape, arr.shape, strict=True)):
            if not isinstance(extent, Var):
                continue
            bound = env.get(id(extent))
            if bound is None:
                env[id(extent)] = int(got)
            elif bound != got:
                raise ArgumentError(
                    f"{where}: dimension {dim} is {extent.name} = {bound} (bound by an earlier "
                    f"argument), got shape {arr.shape}"
                )

    def _check_shape(self, p: Buffer, arr: np.ndarray, env: dict[int, int], where: str) -> None:
        expected = []
        for extent in p.shape:
            value = eval_shape_expr(extent, env)
            if value is None:
                raise ArgumentError(
                    f"{where}: cannot infer the extent {_expr_text(extent)} of shape "
                    f"{shape_text(p.shape)} from the arguments"
                )
            expected.append(value)
        if tuple(expected) != tuple(arr.shape):
            declared = shape_text(p.shape)
            resolved = str(tuple(expected))
            shown = declared if declared == resolved else f"{declared} = {resolved}"
            raise ArgumentError(f"{where}: expected shape {shown}, got {arr.shape}")

    def _check_aliasing(self, arrays: list[np.ndarray | None]) -> None:
        params = self.func.params
        for i, a in enumerate(arrays):
            for j in range(i + 1, len(arrays)):
                b = arrays[j]
                if a is None or b is None or a.size == 0 or b.size == 0:
                    continue
                if id(params[i]) not in self.written and id(params[j]) not in self.written:
                    continue
                if np.may_share_memory(a, b):
                    raise ArgumentError(
                        f"{self.func.name}: arguments {params[i].name!r} and {params[j].name!r} "
                        "share memory, and the function writes one of them; pass distinct arrays"
                    )

    def _cargs(self, arrays: list[np.ndarray | None], env: dict[int, int]) -> list[Any]:
        out: list[Any] = []
        for i, p in enumerate(self.lowered.params):
            if isinstance(p, Buffer):
                buf_arr = arrays[i]
                assert buf_arr is not None
                out.append(ctypes.c_void_p(buf_arr.ctypes.data))
                continue
            value = env.get(id(p))
            if value is None:
                raise ArgumentError(f"{self.func.name}: cannot infer the value of {p.name!r}")
            if p.dtype.is_integer:
                limit = _INT_LIMITS[p.dtype.bits]
                if not -limit <= value < limit:
                    raise ArgumentError(f"{self.func.name}: {p.name} = {value} overflows {p.dtype}")
            out.append(ctype_of(p.dtype)(value))
        return out
