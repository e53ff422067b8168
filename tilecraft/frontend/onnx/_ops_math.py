"""Converters of elementwise, matrix, reduction and normalization operators."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ...graph import TensorVar
from ._context import Context, Node, Value, dims_of
from ._ops_shape import axes_input, reshape_to

Converter = Callable[[Context, Node], list[Value]]

_BINARY = {"Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide"}
_COMPARE = {
    "Equal": "equal",
    "Less": "less",
    "Greater": "greater",
    "LessOrEqual": "less_equal",
    "GreaterOrEqual": "greater_equal",
}
_UNARY = {
    "Relu": "relu",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "Exp": "exp",
    "Sqrt": "sqrt",
    "Neg": "negative",
    "Erf": "erf",
}


def _binary(op: str) -> Converter:
    def convert(ctx: Context, node: Node) -> list[Value]:
        a, b = ctx.tensor(node.inputs[0]), ctx.tensor(node.inputs[1])
        return [ctx.emit(op, [a, b])]

    return convert


def _variadic(op: str) -> Converter:
    def convert(ctx: Context, node: Node) -> list[Value]:
        args = [ctx.tensor(n) for n in node.inputs if n]
        out = args[0]
        for a in args[1:]:
            out = ctx.emit(op, [out, a])
        return [out]

    return convert


def _unary(op: str) -> Converter:
    def convert(ctx: Context, node: Node) -> list[Value]:
        return [ctx.emit(op, [ctx.tensor(node.inputs[0])])]

    return convert


def _scalar(ctx: Context, name: str) -> float | None:
    """The value of a known one-element input, else None."""
    if not name or not ctx.is_static(name):
        return None
    arr = ctx.static(name, "operand")
    return float(arr.reshape(-1)[0]) if arr.size == 1 and arr.dtype != object else None


def _pow(ctx: Context, node: Node) -> list[Value]:
    x = ctx.tensor(node.inputs[0])
    e = _scalar(ctx, node.inputs[1])
    if e == 1.0:
        return [x]
    if e in (2.0, 3.0):
        sq = ctx.emit("multiply", [x, x])
        return [sq if e == 2.0 else ctx.emit("multiply", [sq, x])]
    if e in (0.5, -0.5):
        return [ctx.emit("sqrt" if e > 0 else "rsqrt", [x])]
    if e == -1.0:
        return [ctx.emit("divide", [ctx.const(1.0, x), x])]
    if e is not None:
        return [ctx.emit("power", [x, ctx.const(e, x)])]
    y = ctx.tensor(node.inputs[1])
    if y.type.dtype != x.type.dtype:
        y = ctx.emit("astype", [y], {"dtype": str(x.type.dtype)})
    return [ctx.emit("power", [x, y])]


def _reciprocal(ctx: Context, node: Node) -> list[Value]:
    x = ctx.tensor(node.inputs[0])
    return [ctx.emit("divide", [ctx.const(1.0, x), x])]


def _clip(ctx: Context, node: Node) -> list[Value]:
    x = ctx.tensor(node.inputs[0])
    lo_name = node.inputs[1] if len(node.inputs) > 1 else ""
    hi_name = node.inputs[2] if len(node.inputs) > 2 else ""
    lo = node.attrs.get("min") if not lo_name else _scalar(ctx, lo_name)
    hi = node.attrs.get("max") if not hi_name else _scalar(ctx, hi_name)
    if lo == 0.0 and hi is None and not hi_name:
        return [ctx.emit("relu", [x])]
    out = x
    for name, bound, op in ((lo_name, lo, "maximum"), (hi_name, hi, "minimum")):
        if bound is not None:
            out = ctx.emit(op, [out, ctx.const(bound, x)])
        elif name:
            out = ctx.emit(op, [out, ctx.tensor(name)])
    return [out]


def _gelu(ctx: Context, node: Node) -> list[Value]:
    x = ctx.tensor(node.inputs[0])
    approx = node.attrs.get("approximate", "none")
    if approx == "none":
        return [ctx.emit("gelu", [x])]
    if approx != "tanh":
        raise ctx.error(f"unknown approximate={approx!r}")
    # 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
    cube = ctx.emit("multiply", [ctx.emit("multiply", [x, x]), x])
    inner = ctx.emit("add", [x, ctx.emit("multiply", [cube, ctx.const(0.044715, x)])])
    t = ctx.emit("tanh", [ctx.emit("multiply", [inner, ctx.const(math.sqrt(2 / math.pi), x)])])
    half_x = ctx.emit("multiply", [x, ctx.const(0.5, x)])
    return [ctx.emit("multiply", [half_x, ctx.emit("add", [t, ctx.const(1.0, x)])])]


def _matmul(ctx: Context, node: Node) -> list[Value]:
    a, b = ctx.tensor(node.inputs[0]), ctx.tensor(node.inputs[1])
    da, db = dims_of(a), dims_of(b)
    if len(da) == 1:
        a = reshape_to(ctx, a, [1, da[0]])
    if len(db) == 1:
        b = reshape_to(ctx, b, [db[0], 1])
    out = ctx.emit("matmul", [a, b])
    dims = dims_of(out)
    if len(db) == 1:
        dims = dims[:-1]
    if len(da) == 1:
        dims = dims[:-2] + dims[-1:] if len(db) != 1 else dims[:-1]
    return [reshape_to(ctx, out, dims)]


def _gemm(ctx: Context, node: Node) -> list[Value]:
    a, b = ctx.tensor(node.inputs[0]), ctx.tensor(node.inputs[1])
    alpha, beta = node.attr_float("alpha", 1.0), node.attr_float("beta", 1.0)
    if node.attr_int("transA", 0):
        a = ctx.emit("permute_dims", [a], {"axes": (1, 0)})
    has_c = len(node.inputs) > 2 and bool(node.inputs[2])
    c = ctx.tensor(node.inputs[2]) if has_c else None
    if node.attr_int("transB", 0):
        as_bias = c is not None and c.type.ndim == 1 and alpha == 1.0 and beta == 1.0
        if as_bias and c is not None:
            return [ctx.emit("linear", [a, b, c])]
        y = ctx.emit("linear", [a, b])
    else:
        y = ctx.emit("matmul", [a, b])
    if alpha != 1.0:
        y = ctx.emit("multiply", [y, ctx.const(alpha, y)])
    if c is not None and beta != 0.0:
        if beta != 1.0:
            c = ctx.emit("multiply", [c, ctx.const(beta, c)])
        y = ctx.emit("add", [y, c])
    return [y]


def _softmax(ctx: Context, node: Node) -> list[Value]:
    x = ctx.tensor(node.inputs[0])
    return [ctx.emit("softmax", [x], {"axis": node.attr_int("axis", -1)})]


def _reduce(op: str) -> Converter:
    def convert(ctx: Context, node: Node) -> list[Value]:
        x = ctx.tensor(node.inputs[0])
        axes = axes_input(ctx, node, 1, x.type.ndim)
        if not axes:
            if node.attr_int("noop_with_empty_axes", 0):
                return [x]
            axes = list(range(x.type.ndim))
        keep = bool(node.attr_int("keepdims", 1))
        return [ctx.emit(op, [x], {"axis": tuple(axes), "keepdims": keep})]

    return convert


def _last_axis(ctx: Context, node: Node, x: TensorVar) -> None:
    axis = node.attr_int("axis", -1)
    if axis % x.type.ndim != x.type.ndim - 1:
        raise ctx.error(f"normalization over axis {axis} (not the last) is unsupported")


def _norm_param(ctx: Context, name: str, x: TensorVar) -> TensorVar:
    """A scale or bias as a 1-D tensor over the last axis."""
    p = ctx.tensor(name)
    return reshape_to(ctx, p, dims_of(p)[-1:]) if p.type.ndim != 1 else p


def _layer_norm(ctx: Context, node: Node) -> list[Value]:
    x = ctx.tensor(node.inputs[0])
    _last_axis(ctx, node, x)
    scale = _norm_param(ctx, node.inputs[1], x)
    if len(node.inputs) > 2 and node.inputs[2]:
        bias = _norm_param(ctx, node.inputs[2], x)
    else:
        bias = ctx.const(
            np.zeros(scale.type.static_shape() or (), dtype=scale.type.dtype.numpy_name())
        )
    eps = node.attr_float("epsilon", 1e-5)
    return [ctx.emit("layer_norm", [x, scale, bias], {"eps": eps})]


def _rms_norm(ctx: Context, node: Node) -> list[Value]:
    x = ctx.tensor(node.inputs[0])
    _last_axis(ctx, node, x)
    scale = _norm_param(ctx, node.inputs[1], x)
    eps = node.attr_float("epsilon", 1e-5)
    return [ctx.emit("rms_norm", [x, scale], {"eps": eps})]


CONVERTERS: dict[str, Converter] = {
    **{k: _binary(v) for k, v in _BINARY.items()},
    **{k: _binary(v) for k, v in _COMPARE.items()},
    **{k: _unary(v) for k, v in _UNARY.items()},
    "Max": _variadic("maximum"),
    "Min": _variadic("minimum"),
    "Sum": _variadic("add"),
    "Pow": _pow,
    "Reciprocal": _reciprocal,
    "Clip": _clip,
    "Gelu": _gelu,
    "MatMul": _matmul,
    "Gemm": _gemm,
    "Softmax": _softmax,
    "ReduceMean": _reduce("mean"),
    "ReduceSum": _reduce("sum"),
    "ReduceMax": _reduce("max"),
    "ReduceMin": _reduce("min"),
    "LayerNormalization": _layer_norm,
    "SimplifiedLayerNormalization": _rms_norm,
    "RMSNormalization": _rms_norm,
}
