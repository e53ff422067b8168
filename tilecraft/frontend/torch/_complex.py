"""Complex tensors inside the importer: a real tensor with a trailing dimension of 2.

The graph IR has no complex dtype. A complex ``(*S)`` tensor of torch becomes a
:class:`ComplexValue` wrapping a real ``(*S, 2)`` tensor holding ``(real, imag)`` in the last
axis, the layout of ``torch.view_as_real`` (``complex64`` -> ``float32``, ``complex128`` ->
``float64``). Only the converters registered here (:data:`COMPLEX`) see complex values: a
node with a complex input or output is converted by its entry in this table, and any other
operator applied to a complex value is reported as unsupported with every other missing
operator. At the program's boundary a complex input, parameter or output is its real view.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...graph import TensorVar
from ...ir import Expr, IntImm, as_expr
from ._context import Context, UnsupportedNodeError

Handler = Callable[[Context, Any], Any]

# ATen overload -> converter, used for every node with a complex input or output
COMPLEX: dict[str, Handler] = {}

_REAL_OF = {"complex64": "float32", "complex128": "float64"}


@dataclass(frozen=True)
class ComplexValue:
    """A complex tensor of shape ``data.shape[:-1]``: ``data[..., 0]`` real, ``[..., 1]``
    imaginary."""

    data: TensorVar

    @property
    def shape(self) -> tuple[Expr, ...]:
        """The complex tensor's shape (without the trailing 2)."""
        return tuple(self.data.type.shape[:-1])

    @property
    def ndim(self) -> int:
        """The complex tensor's rank."""
        return self.data.type.ndim - 1

    @property
    def dtype(self) -> str:
        """The dtype of its parts (``float32`` for ``complex64``)."""
        return str(self.data.type.dtype)


def handles_complex(*names: str) -> Callable[[Handler], Handler]:
    """Register the decorated converter for ``names`` applied to complex values."""

    def deco(fn: Handler) -> Handler:
        for n in names:
            COMPLEX[n] = fn
        return fn

    return deco


def is_complex_dtype(dt: Any) -> bool:
    """Whether a torch dtype is complex."""
    return bool(getattr(dt, "is_complex", False))


def part_dtype(dt: Any) -> str:
    """The real dtype of a complex torch dtype's parts."""
    name = str(dt).removeprefix("torch.")
    if name not in _REAL_OF:
        raise UnsupportedNodeError(f"dtype {name} has no tilecraft equivalent")
    return _REAL_OF[name]


def involves_complex(ctx: Context, node: Any) -> bool:
    """Whether ``node`` reads or makes a complex tensor."""
    if any(isinstance(ctx.env.get(a), ComplexValue) for a in node.all_input_nodes):
        return True
    val = node.meta.get("val")
    vals = val if isinstance(val, (list, tuple)) else [val]
    return any(is_complex_dtype(getattr(v, "dtype", None)) for v in vals)


def convert_complex(ctx: Context, node: Any, name: str) -> Any:
    """Convert a node that involves complex values; UnsupportedNodeError naming the gap."""
    handler = COMPLEX.get(name)
    if handler is None:
        raise UnsupportedNodeError(
            "not supported on complex tensors (complex values take FFTs, arithmetic, abs, "
            "angle, conj, view_as_real/view_as_complex and views)"
        )
    return handler(ctx, node)


def complex_param(ctx: Context, name: str, shape: tuple[Expr, ...], dt: Any) -> ComplexValue:
    """A complex graph input, passed as its real view ``(*shape, 2)``."""
    return ComplexValue(ctx.bb.param(name, (*shape, as_expr(2)), part_dtype(dt)))


def real_view(value: Any) -> np.ndarray:
    """A torch tensor as a numpy array, complex ones as their real view ``(..., 2)``."""
    import torch

    value = value.detach().cpu()
    if value.is_complex():
        value = torch.view_as_real(value.resolve_conj())
    return np.asarray(value.contiguous().numpy())


# parts --------------------------------------------------------------------------------------
def part(ctx: Context, z: ComplexValue, index: int) -> TensorVar:
    """The real (0) or imaginary (1) part of ``z``."""
    last = z.ndim
    one = ctx.emit_shaped(
        "strided_slice",
        [z.data],
        {"axis": last, "begin": index, "step": 1},
        (*z.shape, as_expr(1)),
    )
    return ctx.reshape(one, z.shape)


def pack(ctx: Context, re: TensorVar, im: TensorVar) -> ComplexValue:
    """The complex tensor ``re + i im`` (same shapes)."""
    shape = (*re.type.shape, as_expr(1))
    return ComplexValue(
        ctx.emit(
            "concat", [ctx.reshape(re, shape), ctx.reshape(im, shape)], {"axis": len(shape) - 1}
        )
    )


def from_real(ctx: Context, r: TensorVar, dt: str) -> ComplexValue:
    """A real tensor as a complex one with zero imaginary part."""
    r = ctx.cast(r, dt)
    col = ctx.reshape(r, (*r.type.shape, as_expr(1)))
    pads = {"pad_before": (0,) * (r.type.ndim + 1), "pad_after": (0,) * r.type.ndim + (1,)}
    # padding, not a product with (1, 0): inf * 0 would make a NaN imaginary part
    return ComplexValue(ctx.emit("pad", [col], {**pads, "value": 0.0}))


def conj(ctx: Context, z: ComplexValue) -> ComplexValue:
    """The complex conjugate."""
    sign = ctx.const(np.array([1, -1], dtype=z.dtype), "conj")
    return ComplexValue(ctx.emit("multiply", [z.data, sign]))


def scale(ctx: Context, z: ComplexValue, r: TensorVar) -> ComplexValue:
    """``z * r`` for a real tensor ``r`` broadcasting against ``z``."""
    col = ctx.reshape(ctx.cast(r, z.dtype), (*r.type.shape, as_expr(1)))
    return ComplexValue(ctx.emit("multiply", [z.data, col]))


def as_complex(ctx: Context, v: Any, dt: str) -> ComplexValue:
    """A complex value, real tensor or Python number as a complex value with ``dt`` parts."""
    if isinstance(v, ComplexValue):
        return ComplexValue(ctx.cast(v.data, dt))
    if isinstance(v, TensorVar):
        return from_real(ctx, v, dt)
    if isinstance(v, (bool, int, float, complex)):
        c = complex(v)
        return ComplexValue(ctx.const(np.array([c.real, c.imag], dtype=dt), "complex"))
    raise UnsupportedNodeError(f"complex operand of type {type(v).__name__}")


def out_parts_dtype(ctx: Context, node: Any) -> str:
    """The part dtype of a complex result (the dtype of a real one)."""
    dt = ctx.meta(node).dtype
    return part_dtype(dt) if is_complex_dtype(dt) else ctx.out_dtype(node)


def complex_arg(ctx: Context, node: Any, i: int, name: str = "self") -> ComplexValue:
    """A complex tensor argument (a real tensor argument as complex)."""
    v = ctx.arg(node, i, name)
    if isinstance(v, ComplexValue):
        return v
    if isinstance(v, TensorVar) and v.type.dtype.is_float:
        return from_real(ctx, v, str(v.type.dtype))
    raise UnsupportedNodeError(f"argument {name} is {type(v).__name__}, expected a complex tensor")


def static_extent(e: Expr, what: str) -> int:
    """An extent that must be known at import time (the size of a transformed axis)."""
    if not isinstance(e, IntImm):
        raise UnsupportedNodeError(f"{what} of symbolic size {e}: FFT sizes must be static")
    return int(e.value)
