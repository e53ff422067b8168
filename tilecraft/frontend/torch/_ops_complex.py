"""Converters of ATen operators applied to complex tensors (see :mod:`._complex`).

Arithmetic (``add/sub/mul/div`` with complex, real or scalar operands, ``neg``,
``reciprocal``, ``exp``), ``abs``, ``angle``, conjugation, ``where``, ``view_as_real`` /
``view_as_complex`` / ``real`` / ``imag`` / ``complex`` / ``polar``, casts, sums and means,
matrix products (``mm/bmm/matmul``: an einsum with complex weights), creation and writes
(``full/zeros``, ``copy``, ``slice_scatter``), and views and gathers that leave the complex
axis alone (reshape, permute, slice, select, expand, cat, padding, flip, ``index_select``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph import TensorVar
from ...ir import IntImm, as_expr
from ._complex import (
    ComplexValue,
    as_complex,
    complex_arg,
    conj,
    handles_complex,
    out_parts_dtype,
    pack,
    part,
    part_dtype,
    scale,
)
from ._context import Context, UnsupportedNodeError
from ._ops_math import dims
from ._ops_tensor import _start, _strided


def _mul(ctx: Context, a: Any, b: Any, dt: str) -> ComplexValue:
    if isinstance(b, ComplexValue) and not isinstance(a, ComplexValue):
        a, b = b, a  # the complex operand first
    if isinstance(a, ComplexValue) and isinstance(b, TensorVar):
        return scale(ctx, a, b)
    if isinstance(a, ComplexValue) and isinstance(b, (bool, int, float)):
        return ComplexValue(ctx.emit("multiply", [ctx.cast(a.data, dt), ctx.scalar(b, dt)]))
    z, w = as_complex(ctx, a, dt), as_complex(ctx, b, dt)
    # z * w = z * (wr, wr) + (zi, zr) * (-wi, wi): gathers along the pair axis, which fuse
    # with the products (and fold away for a weight w), instead of splitting z in parts
    wr = _pairs(ctx, w, (0, 0))
    wi = ctx.emit("multiply", [_pairs(ctx, w, (1, 1)), ctx.const(np.array([-1, 1], dt), "sign")])
    swapped = _pairs(ctx, z, (1, 0))
    prod = ctx.emit("multiply", [z.data, wr])
    return ComplexValue(ctx.emit("add", [prod, ctx.emit("multiply", [swapped, wi])]))


def _pairs(ctx: Context, z: ComplexValue, index: tuple[int, int]) -> TensorVar:
    """``z``'s pair axis gathered at ``index`` (``(1, 0)`` swaps real and imaginary)."""
    idx = ctx.const(np.array(index, dtype="int64"), "pair")
    return ctx.emit("take", [z.data, idx], {"axis": z.ndim})


def _abs2(ctx: Context, z: ComplexValue) -> TensorVar:
    """``re^2 + im^2``, elementwise (it fuses with its producer and consumer; a sum over the
    pair axis would be a reduction kernel of its own)."""
    re, im = part(ctx, z, 0), part(ctx, z, 1)
    return ctx.emit("add", [ctx.emit("multiply", [re, re]), ctx.emit("multiply", [im, im])])


def _div(ctx: Context, a: Any, b: Any, dt: str) -> ComplexValue:
    if isinstance(b, (bool, int, float)):
        return _mul(ctx, a, 1.0 / float(b), dt)
    if isinstance(b, TensorVar):
        return scale(ctx, as_complex(ctx, a, dt), ctx.emit("reciprocal", [ctx.cast(b, dt)]))
    w = as_complex(ctx, b, dt)
    num = _mul(ctx, a, conj(ctx, w), dt)
    return scale(ctx, num, ctx.emit("reciprocal", [_abs2(ctx, w)]))


@handles_complex("aten::mul.Tensor", "aten::mul.Scalar")
def _c_mul(ctx: Context, node: Any) -> ComplexValue:
    dt = out_parts_dtype(ctx, node)
    return _mul(ctx, ctx.arg(node, 0, "self"), ctx.arg(node, 1, "other"), dt)


@handles_complex("aten::div.Tensor", "aten::div.Scalar")
def _c_div(ctx: Context, node: Any) -> ComplexValue:
    dt = out_parts_dtype(ctx, node)
    return _div(ctx, ctx.arg(node, 0, "self"), ctx.arg(node, 1, "other"), dt)


@handles_complex("aten::add.Tensor", "aten::add.Scalar", "aten::sub.Tensor", "aten::sub.Scalar")
def _c_add(ctx: Context, node: Any) -> ComplexValue:
    dt = out_parts_dtype(ctx, node)
    a, b = ctx.arg(node, 0, "self"), ctx.arg(node, 1, "other")
    alpha = ctx.arg(node, 2, "alpha", 1)
    if alpha != 1:
        b = _mul(ctx, b, alpha, dt)
    op = "add" if node.target.name().startswith("aten::add") else "subtract"
    return ComplexValue(ctx.emit(op, [as_complex(ctx, a, dt).data, as_complex(ctx, b, dt).data]))


@handles_complex("aten::neg")
def _c_neg(ctx: Context, node: Any) -> ComplexValue:
    return ComplexValue(ctx.emit("negative", [complex_arg(ctx, node, 0).data]))


@handles_complex("aten::exp")
def _c_exp(ctx: Context, node: Any) -> ComplexValue:
    z = complex_arg(ctx, node, 0)
    mag, angle = ctx.emit("exp", [part(ctx, z, 0)]), part(ctx, z, 1)
    re = ctx.emit("multiply", [mag, ctx.emit("cos", [angle])])
    return pack(ctx, re, ctx.emit("multiply", [mag, ctx.emit("sin", [angle])]))


@handles_complex("aten::reciprocal")
def _c_reciprocal(ctx: Context, node: Any) -> ComplexValue:
    z = complex_arg(ctx, node, 0)
    return _div(ctx, 1.0, z, z.dtype)


@handles_complex("aten::where.self")
def _c_where(ctx: Context, node: Any) -> ComplexValue:
    dt = out_parts_dtype(ctx, node)
    cond = ctx.cast(ctx.tensor(node, 0, "condition"), "bool")
    a = as_complex(ctx, ctx.arg(node, 1, "self"), dt)
    b = as_complex(ctx, ctx.arg(node, 2, "other"), dt)
    col = ctx.reshape(cond, (*cond.type.shape, as_expr(1)))
    return ComplexValue(ctx.emit("where", [col, a.data, b.data]))


@handles_complex("aten::abs")
def _c_abs(ctx: Context, node: Any) -> TensorVar:
    return ctx.emit("sqrt", [_abs2(ctx, complex_arg(ctx, node, 0))])


@handles_complex("aten::angle")
def _c_angle(ctx: Context, node: Any) -> TensorVar:
    x = ctx.arg(node, 0, "self")
    if isinstance(x, TensorVar):  # a real tensor: pi where negative, NaN kept
        dt = ctx.out_dtype(node)
        x = ctx.cast(x, dt)
        neg = ctx.emit("less", [x, ctx.scalar(0.0, dt)])
        half = ctx.emit("where", [neg, ctx.scalar(float(np.pi), dt), ctx.scalar(0.0, dt)])
        return ctx.emit("where", [ctx.emit("isnan", [x]), x, half])
    z = complex_arg(ctx, node, 0)
    return ctx.emit("atan2", [part(ctx, z, 1), part(ctx, z, 0)])


@handles_complex("aten::_conj", "aten::conj", "aten::conj_physical", "aten::_conj_physical")
def _c_conj(ctx: Context, node: Any) -> Any:
    v = ctx.arg(node, 0, "self")
    return v if isinstance(v, TensorVar) else conj(ctx, complex_arg(ctx, node, 0))


@handles_complex(
    "aten::resolve_conj", "aten::resolve_neg", "aten::clone", "aten::alias", "aten::detach",
    "aten::lift_fresh_copy", "aten::contiguous", "aten::view_as_complex",
)  # fmt: skip
def _c_same(ctx: Context, node: Any) -> Any:
    v = ctx.arg(node, 0, "self")
    if node.target.name() != "aten::view_as_complex" or isinstance(v, ComplexValue):
        return v  # also a real tensor's resolve_conj
    if isinstance(v, TensorVar):  # the real view is the representation
        return ComplexValue(v)
    raise UnsupportedNodeError(f"argument self is {type(v).__name__}, expected a tensor")


@handles_complex("aten::view_as_real")
def _c_view_as_real(ctx: Context, node: Any) -> TensorVar:
    return complex_arg(ctx, node, 0).data


@handles_complex("aten::real", "aten::imag")
def _c_part(ctx: Context, node: Any) -> TensorVar:
    return part(ctx, complex_arg(ctx, node, 0), 0 if node.target.name() == "aten::real" else 1)


@handles_complex("aten::complex")
def _c_complex(ctx: Context, node: Any) -> ComplexValue:
    dt = out_parts_dtype(ctx, node)
    re, im = ctx.cast(ctx.tensor(node, 0, "real"), dt), ctx.cast(ctx.tensor(node, 1, "imag"), dt)
    shape = ctx.out_shape(node)
    return pack(ctx, _bcast(ctx, re, shape), _bcast(ctx, im, shape))


@handles_complex("aten::polar")
def _c_polar(ctx: Context, node: Any) -> ComplexValue:
    dt = out_parts_dtype(ctx, node)
    r, t = ctx.cast(ctx.tensor(node, 0, "abs"), dt), ctx.cast(ctx.tensor(node, 1, "angle"), dt)
    shape = ctx.out_shape(node)
    re = _bcast(ctx, ctx.emit("multiply", [r, ctx.emit("cos", [t])]), shape)
    im = _bcast(ctx, ctx.emit("multiply", [r, ctx.emit("sin", [t])]), shape)
    return pack(ctx, re, im)


def _bcast(ctx: Context, x: TensorVar, shape: tuple[Any, ...]) -> TensorVar:
    if tuple(str(s) for s in x.type.shape) == tuple(str(s) for s in shape):
        return x
    return ctx.emit_shaped("broadcast_to", [x], {}, shape)


@handles_complex("aten::_to_copy")
def _c_to_copy(ctx: Context, node: Any) -> Any:
    v = ctx.arg(node, 0, "self")
    dt = ctx.meta(node).dtype
    if getattr(dt, "is_complex", False):
        return as_complex(ctx, v, part_dtype(dt))
    return ctx.cast(part(ctx, v, 0), ctx.out_dtype(node))  # torch drops the imaginary part


@handles_complex("aten::sum.dim_IntList", "aten::sum", "aten::mean.dim", "aten::mean")
def _c_reduce(ctx: Context, node: Any) -> ComplexValue:
    z = complex_arg(ctx, node, 0)
    name = node.target.name()
    has_dim = name in ("aten::sum.dim_IntList", "aten::mean.dim")
    axes = dims(ctx.arg(node, 1, "dim"), z.ndim) if has_dim else None
    keep = bool(ctx.arg(node, 2, "keepdim", False)) if has_dim else False
    op = "sum" if name.startswith("aten::sum") else "mean"
    ax = tuple(range(z.ndim)) if axes is None else axes
    return ComplexValue(ctx.emit(op, [z.data], {"axis": ax, "keepdims": keep}))


# views that leave the complex axis alone ------------------------------------------------------
def _with_pair(shape: tuple[Any, ...]) -> tuple[Any, ...]:
    return (*shape, as_expr(2))


@handles_complex(
    "aten::view", "aten::_unsafe_view", "aten::reshape", "aten::squeeze.dim",
    "aten::squeeze.dims", "aten::squeeze", "aten::unsqueeze", "aten::flatten.using_ints",
)  # fmt: skip
def _c_view(ctx: Context, node: Any) -> ComplexValue:
    z = complex_arg(ctx, node, 0)
    return ComplexValue(ctx.reshape(z.data, _with_pair(ctx.out_shape(node))))


@handles_complex("aten::permute", "aten::t", "aten::transpose.int")
def _c_permute(ctx: Context, node: Any) -> ComplexValue:
    z = complex_arg(ctx, node, 0)
    n = z.ndim
    if node.target.name() == "aten::permute":
        perm = [int(d) % n for d in ctx.arg(node, 1, "dims")]
    else:
        perm = list(range(n))
        if n >= 2:
            a, b = (0, 1) if len(node.args) < 2 else (int(node.args[1]) % n, int(node.args[2]) % n)
            perm[a], perm[b] = perm[b], perm[a]
    if perm == list(range(n)):
        return z
    return ComplexValue(ctx.emit("permute_dims", [z.data], {"axes": (*perm, n)}))


@handles_complex("aten::slice.Tensor", "aten::select.int")
def _c_slice(ctx: Context, node: Any) -> ComplexValue:
    z = complex_arg(ctx, node, 0)
    axis = int(ctx.arg(node, 1, "dim", 0)) % z.ndim
    if node.target.name() == "aten::select.int":
        begin = _start(ctx, ctx.arg(node, 2, "index"), z.shape[axis])
        shape = list(z.shape)
        shape[axis] = as_expr(1)
        one = _strided(ctx, z.data, axis, begin, 1, _with_pair(tuple(shape)))
        return ComplexValue(ctx.reshape(one, _with_pair(ctx.out_shape(node))))
    begin = _start(ctx, ctx.arg(node, 2, "start", None), z.shape[axis])
    step = int(ctx.arg(node, 4, "step", 1))
    return ComplexValue(_strided(ctx, z.data, axis, begin, step, _with_pair(ctx.out_shape(node))))


@handles_complex("aten::expand")
def _c_expand(ctx: Context, node: Any) -> ComplexValue:
    z = complex_arg(ctx, node, 0)
    return ComplexValue(_bcast(ctx, z.data, _with_pair(ctx.out_shape(node))))


@handles_complex("aten::cat")
def _c_cat(ctx: Context, node: Any) -> ComplexValue:
    dt = out_parts_dtype(ctx, node)
    parts = [as_complex(ctx, p, dt) for p in ctx.arg(node, 0, "tensors")]
    parts = [p for p in parts if p.shape != (as_expr(0),)]
    axis = int(ctx.arg(node, 1, "dim", 0)) % max(parts[0].ndim, 1)
    if len(parts) == 1:
        return parts[0]
    return ComplexValue(ctx.emit("concat", [p.data for p in parts], {"axis": axis}))


@handles_complex("aten::constant_pad_nd")
def _c_pad(ctx: Context, node: Any) -> ComplexValue:
    z = complex_arg(ctx, node, 0)
    pads = [int(p) for p in ctx.arg(node, 1, "pad")]
    if ctx.arg(node, 2, "value", 0) not in (0, None) or min(pads, default=0) < 0:
        raise UnsupportedNodeError("complex padding with a nonzero value or cropping")
    before, after = [0] * (z.ndim + 1), [0] * (z.ndim + 1)
    for i in range(len(pads) // 2):
        before[z.ndim - 1 - i], after[z.ndim - 1 - i] = pads[2 * i], pads[2 * i + 1]
    attrs = {"pad_before": tuple(before), "pad_after": tuple(after), "value": 0.0}
    return ComplexValue(ctx.emit("pad", [z.data], attrs))


# products, creation and writes --------------------------------------------------------------
@handles_complex("aten::mm", "aten::bmm", "aten::matmul")
def _c_matmul(ctx: Context, node: Any) -> ComplexValue:
    """``(Ar + i Ai) @ (Br + i Bi)`` as real matmuls of the parts (two when one is real)."""
    dt = out_parts_dtype(ctx, node)
    a, b = ctx.arg(node, 0, "self"), ctx.arg(node, 1, "mat2")

    def parts(v: Any) -> tuple[TensorVar, TensorVar | None]:
        if isinstance(v, ComplexValue):
            z = ComplexValue(ctx.cast(v.data, dt))
            return part(ctx, z, 0), part(ctx, z, 1)
        if isinstance(v, TensorVar):
            return ctx.cast(v, dt), None
        raise UnsupportedNodeError(f"matmul operand of type {type(v).__name__}")

    def mm(x: TensorVar, y: TensorVar) -> TensorVar:
        return ctx.emit("matmul", [x, y])

    (ar, ai), (br, bi) = parts(a), parts(b)
    re, im = mm(ar, br), None
    if ai is not None and bi is not None:
        re = ctx.emit("subtract", [re, mm(ai, bi)])
    if bi is not None:
        im = mm(ar, bi)
    if ai is not None:
        im = mm(ai, br) if im is None else ctx.emit("add", [im, mm(ai, br)])
    if im is None:
        raise UnsupportedNodeError("a complex matmul of two real tensors")
    return pack(ctx, re, im)


@handles_complex(
    "aten::full", "aten::zeros", "aten::ones", "aten::empty.memory_format", "aten::full_like",
    "aten::zeros_like", "aten::ones_like", "aten::empty_like", "aten::new_zeros",
    "aten::new_ones", "aten::new_empty", "aten::new_full", "aten::scalar_tensor",
)  # fmt: skip
def _c_full(ctx: Context, node: Any) -> ComplexValue:
    name = node.target.name()
    value: Any = 1 if "ones" in name else 0
    if name in ("aten::full", "aten::full_like"):
        value = ctx.arg(node, 1, "fill_value")
    elif name in ("aten::new_full", "aten::scalar_tensor"):
        value = ctx.arg(node, 2 if name == "aten::new_full" else 0, "fill_value")
    if not isinstance(value, (bool, int, float, complex)):
        raise UnsupportedNodeError("a complex fill value that is not a constant")
    pair = as_complex(ctx, value, out_parts_dtype(ctx, node))
    return ComplexValue(_bcast(ctx, pair.data, _with_pair(ctx.out_shape(node))))


@handles_complex("aten::copy")
def _c_copy(ctx: Context, node: Any) -> ComplexValue:
    src = as_complex(ctx, ctx.arg(node, 1, "src"), out_parts_dtype(ctx, node))
    return ComplexValue(_bcast(ctx, src.data, _with_pair(ctx.out_shape(node))))


@handles_complex("aten::slice_scatter", "aten::select_scatter")
def _c_slice_scatter(ctx: Context, node: Any) -> ComplexValue:
    dt = out_parts_dtype(ctx, node)
    z, src = complex_arg(ctx, node, 0), as_complex(ctx, ctx.arg(node, 1, "src"), dt)
    axis = int(ctx.arg(node, 2, "dim", 0)) % z.ndim
    n = z.shape[axis]
    if not isinstance(n, IntImm):
        raise UnsupportedNodeError("a scatter along a symbolic axis")
    if node.target.name() == "aten::select_scatter":
        begin, step = int(ctx.arg(node, 3, "index")), 1
        shape = list(z.shape)
        shape[axis] = as_expr(1)
        src = ComplexValue(ctx.reshape(src.data, _with_pair(tuple(shape))))
    else:
        start = ctx.arg(node, 3, "start", None)
        begin, step = 0 if start is None else int(start), int(ctx.arg(node, 5, "step", 1))
    begin = begin + n.value if begin < 0 else begin
    attrs = {"axis": axis, "begin": begin, "step": step}
    return ComplexValue(ctx.emit("slice_scatter", [ctx.cast(z.data, dt), src.data], attrs))


@handles_complex("aten::index_select", "aten::index.Tensor")
def _c_take(ctx: Context, node: Any) -> ComplexValue:
    z = complex_arg(ctx, node, 0)
    if node.target.name() == "aten::index_select":
        axis, index = int(ctx.arg(node, 1, "dim")) % z.ndim, ctx.tensor(node, 2, "index")
    else:
        used = [(d, t) for d, t in enumerate(ctx.arg(node, 1, "indices")) if t is not None]
        if len(used) != 1 or not isinstance(used[0][1], TensorVar):
            raise UnsupportedNodeError("index with more than one index tensor")
        axis, index = used[0]
        if index.type.dtype.is_bool:
            raise UnsupportedNodeError("index with a boolean mask (data-dependent shape)")
    return ComplexValue(ctx.emit("take", [z.data, index], {"axis": axis}))


@handles_complex("aten::flip")
def _c_flip(ctx: Context, node: Any) -> ComplexValue:
    z = complex_arg(ctx, node, 0)
    axes = tuple(int(d) % z.ndim for d in ctx.arg(node, 1, "dims"))
    return ComplexValue(ctx.emit("flip", [z.data], {"axis": axes}))
