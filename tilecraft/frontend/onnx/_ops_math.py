"""Converters of elementwise, matrix, reduction and normalization operators."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ...graph import TensorVar
from ._context import Context, Dim, Node, Value, dims_of
from ._fold import simplify
from ._ops_shape import axes_input, broadcast_to, reshape_to

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
    "Log": "log",
    "Abs": "abs",
    "Floor": "floor",
    "Ceil": "ceil",
    "Round": "round",
    "Sign": "sign",
    "Sin": "sin",
    "Cos": "cos",
    "Tan": "tan",
    "Asin": "asin",
    "Acos": "acos",
    "Atan": "atan",
    "Sinh": "sinh",
    "Cosh": "cosh",
    "Asinh": "asinh",
    "Acosh": "acosh",
    "Atanh": "atanh",
    "Not": "logical_not",
    "IsNaN": "isnan",
}
_LOGIC = {"And": "logical_and", "Or": "logical_or", "Xor": "logical_xor"}


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
    if (lo is not None or not lo_name) and (hi is not None or not hi_name):
        return [ctx.emit("clip", [x], {"min": lo, "max": hi})]
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


def _reduce(op: str, pre: str | None = None, post: str | None = None) -> Converter:
    """A Reduce* node: ``post(op(pre(x)))`` over the node's axes (``pre`` "square": x * x)."""

    def convert(ctx: Context, node: Node) -> list[Value]:
        x = ctx.tensor(node.inputs[0])
        # opset 18 moved every reduction's axes to an input; ReduceSum did at opset 13
        axes = axes_input(ctx, node, 1, x.type.ndim)
        if not axes:
            if node.attr_int("noop_with_empty_axes", 0):
                return [x]
            axes = list(range(x.type.ndim))
        keep = bool(node.attr_int("keepdims", 1))
        if pre == "square":
            x = ctx.emit("multiply", [x, x])
        elif pre is not None:
            x = ctx.emit(pre, [x])
        y = ctx.emit(op, [x], {"axis": tuple(axes), "keepdims": keep})
        return [ctx.emit(post, [y]) if post else y]

    return convert


def _arg_reduce(op: str) -> Converter:
    def convert(ctx: Context, node: Node) -> list[Value]:
        if node.attr_int("select_last_index", 0):
            raise ctx.error("select_last_index=1 is unsupported")
        x = ctx.tensor(node.inputs[0])
        attrs = {"axis": node.attr_int("axis", 0), "keepdims": bool(node.attr_int("keepdims", 1))}
        return [ctx.emit(op, [x], attrs)]

    return convert


def _log_softmax(ctx: Context, node: Node) -> list[Value]:
    x = ctx.tensor(node.inputs[0])
    return [ctx.emit("log_softmax", [x], {"axis": node.attr_int("axis", -1)})]


def _hard_sigmoid_of(ctx: Context, x: TensorVar, alpha: float, beta: float) -> TensorVar:
    """``clip(alpha * x + beta, 0, 1)``."""
    y = ctx.emit("add", [ctx.emit("multiply", [x, ctx.const(alpha, x)]), ctx.const(beta, x)])
    return ctx.emit("clip", [y], {"min": 0.0, "max": 1.0})


def _hard_sigmoid(ctx: Context, node: Node) -> list[Value]:
    x = ctx.tensor(node.inputs[0])
    alpha, beta = node.attr_float("alpha", 0.2), node.attr_float("beta", 0.5)
    return [_hard_sigmoid_of(ctx, x, alpha, beta)]


def _hard_swish(ctx: Context, node: Node) -> list[Value]:
    x = ctx.tensor(node.inputs[0])
    return [ctx.emit("multiply", [x, _hard_sigmoid_of(ctx, x, 1.0 / 6.0, 0.5)])]


def _leaky_relu(ctx: Context, node: Node) -> list[Value]:
    x = ctx.tensor(node.inputs[0])
    alpha = ctx.const(node.attr_float("alpha", 0.01), x)
    pos = ctx.emit("greater", [x, ctx.const(0.0, x)])
    return [ctx.emit("where", [pos, x, ctx.emit("multiply", [x, alpha])])]


def _prelu(ctx: Context, node: Node) -> list[Value]:
    x, slope = ctx.tensor(node.inputs[0]), ctx.tensor(node.inputs[1])
    pos = ctx.emit("greater", [x, ctx.const(0.0, x)])
    return [ctx.emit("where", [pos, x, ctx.emit("multiply", [x, slope])])]


def _softplus(ctx: Context, node: Node) -> list[Value]:
    x = ctx.tensor(node.inputs[0])
    return [ctx.emit("log1p", [ctx.emit("exp", [x])])]


def _trilu(ctx: Context, node: Node) -> list[Value]:
    """``x`` where ``j - i >= k`` (upper) or ``j - i <= k`` (lower) over the last two axes,
    else 0: the mask is built from two ``arange``s, so the extents may be symbolic."""
    k = 0
    if len(node.inputs) > 1 and node.inputs[1]:
        k = int(ctx.ints(node.inputs[1], "k")[0])
    upper = bool(node.attr_int("upper", 1))
    data = ctx.value(node.inputs[0])
    if isinstance(data, np.ndarray) and data.dtype != object:
        return [np.triu(data, k) if upper else np.tril(data, k)]
    x = ctx.tensor(node.inputs[0])
    dims = dims_of(x)
    if len(dims) < 2:
        raise ctx.error(f"Trilu needs a tensor of rank >= 2, got {x.type.describe()}")
    attrs = {"start": 0, "step": 1, "dtype": "int64"}
    rows = reshape_to(ctx, ctx.emit_shaped("arange", [x], attrs, [dims[-2]]), [dims[-2], 1])
    cols = ctx.emit_shaped("arange", [x], attrs, [dims[-1]])
    diff = ctx.emit("subtract", [cols, rows])
    keep = ctx.emit("greater_equal" if upper else "less_equal", [diff, ctx.const(k, diff)])
    return [ctx.emit("where", [keep, x, ctx.const(0, x)])]


def _mod(ctx: Context, node: Node) -> list[Value]:
    a, b = ctx.tensor(node.inputs[0]), ctx.tensor(node.inputs[1])
    if node.attr_int("fmod", 0):
        return [ctx.emit("fmod", [a, b])]
    if a.type.dtype.is_float:
        raise ctx.error("Mod of floats needs fmod=1")
    return [ctx.emit("floor_mod", [a, b])]


def _norm_operands(ctx: Context, node: Node, n_params: int) -> tuple[TensorVar, list[TensorVar]]:
    """x flattened over the normalized axes (``axis`` to the last) and the scale (and bias)
    as vectors over them: the graph's norms work on the last axis."""
    x = ctx.tensor(node.inputs[0])
    dims = dims_of(x)
    axis = node.attr_int("axis", -1) % len(dims)
    inner = dims[axis:]
    if len(inner) > 1:
        x = reshape_to(ctx, x, [*dims[:axis], simplify(_product(inner))])
    params = []
    for name in node.inputs[1 : 1 + n_params]:
        if not name:
            continue
        p = ctx.tensor(name)
        if len(dims_of(p)) != len(inner) or not all(
            isinstance(a, int) and a == b for a, b in zip(dims_of(p), inner, strict=True)
        ):
            p = broadcast_to(ctx, p, inner)
        params.append(reshape_to(ctx, p, [simplify(_product(inner))]))
    return x, params


def _product(dims: list[Dim]) -> Dim:
    out: Dim = 1
    for d in dims:
        out = simplify(out * d)
    return out


def _layer_norm(ctx: Context, node: Node) -> list[Value]:
    x0 = ctx.tensor(node.inputs[0])
    x, params = _norm_operands(ctx, node, 2)
    if len(params) == 1:
        zeros = np.zeros(params[0].type.static_shape() or (), params[0].type.dtype.numpy_name())
        params.append(ctx.const(zeros))
    eps = node.attr_float("epsilon", 1e-5)
    y = ctx.emit("layer_norm", [x, *params], {"eps": eps})
    if len(node.outputs) > 1 and any(node.outputs[1:]):
        raise ctx.error("the Mean and InvStdDev outputs are unsupported")
    return [reshape_to(ctx, y, dims_of(x0))]


def _rms_norm(ctx: Context, node: Node) -> list[Value]:
    x0 = ctx.tensor(node.inputs[0])
    x, params = _norm_operands(ctx, node, 1)
    eps = node.attr_float("epsilon", 1e-5)
    y = ctx.emit("rms_norm", [x, *params], {"eps": eps})
    return [reshape_to(ctx, y, dims_of(x0))]


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
    **{k: _binary(v) for k, v in _LOGIC.items()},
    "ReduceMean": _reduce("mean"),
    "ReduceSum": _reduce("sum"),
    "ReduceMax": _reduce("max"),
    "ReduceMin": _reduce("min"),
    "ReduceProd": _reduce("prod"),
    "ReduceSumSquare": _reduce("sum", pre="square"),
    "ReduceL1": _reduce("sum", pre="abs"),
    "ReduceL2": _reduce("sum", pre="square", post="sqrt"),
    "ReduceLogSum": _reduce("sum", post="log"),
    "ArgMax": _arg_reduce("argmax"),
    "ArgMin": _arg_reduce("argmin"),
    "LogSoftmax": _log_softmax,
    "HardSigmoid": _hard_sigmoid,
    "HardSwish": _hard_swish,
    "LeakyRelu": _leaky_relu,
    "PRelu": _prelu,
    "Softplus": _softplus,
    "Mod": _mod,
    "Trilu": _trilu,
    "LayerNormalization": _layer_norm,
    "SimplifiedLayerNormalization": _rms_norm,
    "RMSNormalization": _rms_norm,
}
