"""Converters of elementwise ATen operators and reductions."""

from __future__ import annotations

from typing import Any

from ...graph import TensorVar
from ...ir import as_expr
from ._context import Context, UnsupportedNodeError
from ._numbers import is_symbolic_number
from ._registry import handles

_UNARY = {
    "abs": "abs", "acos": "acos", "acosh": "acosh", "asin": "asin", "asinh": "asinh",
    "atan": "atan", "atanh": "atanh", "bitwise_not": "bitwise_not", "ceil": "ceil",
    "cos": "cos", "cosh": "cosh", "erf": "erf", "exp": "exp", "expm1": "expm1",
    "floor": "floor", "log": "log", "log10": "log10", "log1p": "log1p", "log2": "log2",
    "neg": "negative", "reciprocal": "reciprocal", "relu": "relu", "round": "round",
    "rsqrt": "rsqrt", "sigmoid": "sigmoid", "sign": "sign", "sin": "sin", "sinh": "sinh",
    "sqrt": "sqrt", "tan": "tan", "tanh": "tanh", "trunc": "trunc", "exp2": "exp2",
    "silu": "silu",
}  # fmt: skip
_FLOAT_ONLY = {
    "acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh", "erf", "exp", "expm1",
    "log", "log10", "log1p", "log2", "rsqrt", "sigmoid", "sin", "sinh", "sqrt", "tan", "tanh",
    "exp2", "reciprocal", "silu",
}  # fmt: skip


def _unary(aten: str, op: str) -> None:
    @handles(f"aten::{aten}")
    def convert(ctx: Context, node: Any) -> TensorVar:
        x = ctx.tensor(node, 0)
        dt = ctx.out_dtype(node)
        if aten in ("floor", "ceil", "round", "trunc") and not x.type.dtype.is_float:
            return x  # integers are their own floor
        return ctx.emit(op, [ctx.cast(x, dt) if aten in _FLOAT_ONLY else x])


for _a, _o in _UNARY.items():
    _unary(_a, _o)


@handles("aten::isnan", "aten::isinf", "aten::logical_not")
def _bool_unary(ctx: Context, node: Any) -> TensorVar:
    x = ctx.tensor(node, 0)
    name = node.target.name().removeprefix("aten::")
    if name != "logical_not" and not x.type.dtype.is_float:
        return ctx.emit_shaped("full", [], {"value": 0, "dtype": "bool"}, x.type.shape)
    return ctx.emit(name, [x])


_BINARY = {
    "add": "add", "sub": "subtract", "mul": "multiply", "div": "divide", "pow": "power",
    "maximum": "maximum", "minimum": "minimum", "remainder": "floor_mod", "fmod": "fmod",
    "atan2": "atan2", "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or",
    "bitwise_xor": "bitwise_xor", "eq": "equal", "ne": "not_equal", "lt": "less",
    "le": "less_equal", "gt": "greater", "ge": "greater_equal", "logical_and": "logical_and",
    "logical_or": "logical_or", "logical_xor": "logical_xor",
}  # fmt: skip
_COMPARE = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"}


def compute_dtype(ctx: Context, node: Any, a: Any, b: Any) -> str:
    """The dtype both operands are converted to (torch's type promotion)."""
    import torch

    def fake(v: Any, arg: Any) -> Any:
        return ctx.meta(arg) if isinstance(v, TensorVar) else v

    ra = fake(a, node.args[0])
    rb = fake(b, node.args[1] if len(node.args) > 1 else node.kwargs.get("other"))
    return str(torch.result_type(ra, rb)).removeprefix("torch.")


def _binary(aten: str, op: str) -> None:
    names = [f"aten::{aten}.{o}" for o in ("Tensor", "Scalar")] + [f"aten::{aten}"]
    if aten == "pow":
        names = ["aten::pow.Tensor_Tensor", "aten::pow.Tensor_Scalar", "aten::pow.Scalar"]

    @handles(*names)
    def convert(ctx: Context, node: Any) -> TensorVar:
        a, b = ctx.arg(node, 0, "self"), ctx.arg(node, 1, "other")
        dt = compute_dtype(ctx, node, a, b) if aten in _COMPARE else ctx.out_dtype(node)
        if aten == "div" and dt not in ("float32", "float64", "float16", "bfloat16"):
            dt = ctx.out_dtype(node)
        if aten == "pow" and isinstance(b, (int, float)) and b == 2:
            x = ctx.operand(a, dt)
            return ctx.emit("multiply", [x, x])
        alpha = ctx.arg(node, 2, "alpha", 1)
        rhs = ctx.operand(b, dt)
        if aten in ("add", "sub") and alpha != 1:
            rhs = ctx.emit("multiply", [rhs, ctx.scalar(alpha, dt)])
        out = ctx.emit(op, [ctx.operand(a, dt), rhs])
        return ctx.cast(out, ctx.out_dtype(node))

    del convert


for _a, _o in _BINARY.items():
    _binary(_a, _o)


@handles("aten::div.Tensor_mode", "aten::div.Scalar_mode")
def _div_mode(ctx: Context, node: Any) -> TensorVar:
    a, b = ctx.arg(node, 0, "self"), ctx.arg(node, 1, "other")
    mode = node.kwargs.get("rounding_mode", node.args[2] if len(node.args) > 2 else None)
    dt = ctx.out_dtype(node)
    x, y = ctx.operand(a, dt), ctx.operand(b, dt)
    if mode == "floor":
        return ctx.emit("floor_divide", [x, y])
    q = ctx.emit("divide", [x, y])
    if mode == "trunc" and x.type.dtype.is_float:
        return ctx.emit("trunc", [q])
    return q


@handles("aten::where.self")
def _where(ctx: Context, node: Any) -> TensorVar:
    cond = ctx.cast(ctx.tensor(node, 0, "condition"), "bool")
    dt = ctx.out_dtype(node)
    a = ctx.operand(ctx.arg(node, 1, "self"), dt)
    b = ctx.operand(ctx.arg(node, 2, "other"), dt)
    return ctx.emit("where", [cond, a, b])


@handles("aten::clamp", "aten::clamp.Tensor", "aten::hardtanh")
def _clamp(ctx: Context, node: Any) -> TensorVar:
    x = ctx.cast(ctx.tensor(node, 0), ctx.out_dtype(node))
    hard = node.target.name() == "aten::hardtanh"
    lo = ctx.arg(node, 1, "min_val" if hard else "min", -1.0 if hard else None)
    hi = ctx.arg(node, 2, "max_val" if hard else "max", 1.0 if hard else None)
    if any(isinstance(v, TensorVar) or is_symbolic_number(v) for v in (lo, hi)):
        dt = ctx.out_dtype(node)
        if lo is not None:
            x = ctx.emit("maximum", [x, ctx.operand(lo, dt)])
        if hi is not None:
            x = ctx.emit("minimum", [x, ctx.operand(hi, dt)])
        return x
    return ctx.emit("clip", [x], {"min": lo, "max": hi})


@handles("aten::gelu")
def _gelu(ctx: Context, node: Any) -> TensorVar:
    approx = node.kwargs.get("approximate", node.args[1] if len(node.args) > 1 else "none")
    return ctx.emit("gelu_tanh" if approx == "tanh" else "gelu", [ctx.tensor(node, 0)])


@handles("aten::leaky_relu", "aten::elu")
def _leaky(ctx: Context, node: Any) -> TensorVar:
    x = ctx.tensor(node, 0)
    dt = str(x.type.dtype)
    zero = ctx.scalar(0, dt)
    pos = ctx.emit("greater", [x, zero])
    if node.target.name() == "aten::leaky_relu":
        neg = ctx.emit("multiply", [x, ctx.scalar(ctx.arg(node, 1, "negative_slope", 0.01), dt)])
        return ctx.emit("where", [pos, x, neg])
    alpha = ctx.arg(node, 1, "alpha", 1.0)
    scale = ctx.arg(node, 2, "scale", 1.0)
    in_scale = ctx.arg(node, 3, "input_scale", 1.0)
    e = ctx.emit("expm1", [ctx.emit("multiply", [x, ctx.scalar(in_scale, dt)])])
    neg = ctx.emit("multiply", [e, ctx.scalar(alpha * scale, dt)])
    return ctx.emit("where", [pos, ctx.emit("multiply", [x, ctx.scalar(scale, dt)]), neg])


def dims(v: Any, ndim: int) -> tuple[int, ...] | None:
    """A dim argument (int, list or None) as sorted non-negative axes (None: all)."""
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        return None
    items = [v] if isinstance(v, int) else list(v)
    return tuple(sorted({int(d) % max(ndim, 1) for d in items}))


def _reduce(names: tuple[str, ...], op: str, dim_i: int | None) -> None:
    @handles(*names)
    def convert(ctx: Context, node: Any) -> TensorVar:
        x = ctx.tensor(node, 0)
        axes = dims(ctx.arg(node, dim_i, "dim"), x.type.ndim) if dim_i is not None else None
        keep = bool(ctx.arg(node, dim_i + 1, "keepdim", False)) if dim_i is not None else False
        dt = ctx.out_dtype(node)
        src = x if op in ("any", "all", "max", "min") else ctx.cast(x, dt)
        out = ctx.emit(op, [src], {"axis": axes, "keepdims": keep})
        return ctx.cast(out, dt)

    del convert


_reduce(("aten::sum.dim_IntList",), "sum", 1)
_reduce(("aten::sum",), "sum", None)
_reduce(("aten::mean.dim",), "mean", 1)
_reduce(("aten::mean",), "mean", None)
_reduce(("aten::amax",), "max", 1)
_reduce(("aten::amin",), "min", 1)
_reduce(("aten::prod.dim_int",), "prod", 1)
_reduce(("aten::prod",), "prod", None)
_reduce(("aten::any.dim", "aten::any.dims"), "any", 1)
_reduce(("aten::any",), "any", None)


@handles("aten::argmax", "aten::argmin")
def _argmax(ctx: Context, node: Any) -> TensorVar:
    x = ctx.tensor(node, 0)
    dim = ctx.arg(node, 1, "dim")
    keep = bool(ctx.arg(node, 2, "keepdim", False))
    op = node.target.name().removeprefix("aten::")
    if dim is None:
        flat = x.type.shape[0] if x.type.ndim else as_expr(1)
        for s in x.type.shape[1:]:
            flat = flat * s
        x, dim = ctx.reshape(x, (flat,)), 0
    return ctx.emit(op, [x], {"axis": int(dim), "keepdims": keep})


@handles("aten::max.dim", "aten::min.dim")
def _max_dim(ctx: Context, node: Any) -> tuple[TensorVar, TensorVar]:
    x = ctx.tensor(node, 0)
    dim, keep = int(ctx.arg(node, 1, "dim")), bool(ctx.arg(node, 2, "keepdim", False))
    kind = node.target.name().removeprefix("aten::").split(".")[0]
    values = ctx.emit(kind, [x], {"axis": dim, "keepdims": keep})
    index = ctx.emit("arg" + kind, [x], {"axis": dim, "keepdims": keep})
    return values, index


@handles("aten::var.correction", "aten::var.dim")
def _var(ctx: Context, node: Any) -> TensorVar:
    x = ctx.tensor(node, 0)
    axes = dims(ctx.arg(node, 1, "dim"), x.type.ndim)
    if node.target.name() == "aten::var.dim":
        unbiased = ctx.arg(node, 2, "unbiased", True)
        correction = 1 if unbiased else 0
        keep = bool(ctx.arg(node, 3, "keepdim", False))
    else:
        c = node.kwargs.get("correction", 1)
        correction = 1 if c is None else c
        keep = bool(node.kwargs.get("keepdim", False))
    ax = tuple(range(x.type.ndim)) if axes is None else axes
    count = 1
    for a in ax:
        n = x.type.shape[a]
        if not hasattr(n, "value"):
            raise UnsupportedNodeError("var over a symbolic extent")
        count *= n.value
    dt = str(x.type.dtype)
    mu = ctx.emit("mean", [x], {"axis": ax, "keepdims": True})
    d = ctx.emit("subtract", [x, mu])
    s = ctx.emit("sum", [ctx.emit("multiply", [d, d])], {"axis": ax, "keepdims": keep})
    return ctx.emit("divide", [s, ctx.scalar(float(max(count - correction, 0)), dt)])
