"""Valid PrimFuncs of every kind the project produces, for proving ``tc.ir.verify`` silent on them.

``topi_functions`` builds every topi operator on static, odd and symbolic shapes;
``workload_functions`` adds the schedule tests' workloads, the script reference kernels and the
GPU kernels (scheduled by the Schedule API). Lowered forms come from running the CPU and GPU
pipelines on these under ``VerifyIR``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import tilecraft as tc
from tilecraft import te, topi
from tilecraft.ir import PrimFunc, Var

TESTS = Path(__file__).resolve().parents[1]
for sub in ("schedule", "script", "gpu"):
    if str(TESTS / sub) not in sys.path:
        sys.path.insert(0, str(TESTS / sub))


def _ph(shape: tuple[object, ...], name: str, dtype: str = "float32") -> te.Tensor:
    return te.placeholder(shape, dtype, name=name)  # type: ignore[arg-type]


def _cases(d: Callable[[int], object]) -> Iterator[tuple[str, list[te.Tensor], list[te.Tensor]]]:
    """(name, inputs, outputs) per operator; ``d(k)`` is a static extent or a symbolic one."""
    x, y = _ph((d(4), d(6)), "x"), _ph((d(4), d(6)), "y")
    row = _ph((d(6),), "row")
    for op in ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power"):
        yield op, [x, y], [getattr(topi, op)(x, y)]
    yield "broadcast_row", [x, row], [topi.add(x, row)]
    for op in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"):
        yield op, [x, y], [getattr(topi, op)(x, y)]
    b1, b2 = _ph((d(4), d(6)), "b1", "bool"), _ph((d(4), d(6)), "b2", "bool")
    yield "logical", [b1, b2], [topi.logical_and(b1, b2), topi.logical_or(b1, b2)]
    yield "where", [b1, x, y], [topi.where(b1, x, y)]
    xi, yi = _ph((d(4), d(6)), "xi", "int32"), _ph((d(4), d(6)), "yi", "int32")
    yield "floor_divide", [xi, yi], [topi.floor_divide(xi, yi)]
    for op in ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "sin", "cos", "abs",
               "negative", "relu", "gelu", "silu", "floor", "ceil", "identity"):  # fmt: skip
        yield op, [x], [getattr(topi, op)(x)]
    yield "clip", [x], [topi.clip(x, -1.0, 1.0)]
    yield "cast", [x], [topi.cast(x, "float16")]
    yield from _reductions_and_nn(d, x, y)


def _reductions_and_nn(
    d: Callable[[int], object], x: te.Tensor, y: te.Tensor
) -> Iterator[tuple[str, list[te.Tensor], list[te.Tensor]]]:
    """Reductions, normalizations, matmuls, layout ops, convolutions and attention."""
    for op in ("sum", "max", "min", "prod", "mean"):
        yield op, [x], [getattr(topi, op)(x, axis=1)]
        yield op + "_all", [x], [getattr(topi, op)(x)]
    yield "argmax", [x], [topi.argmax(x, axis=1)]
    yield "argmin", [x], [topi.argmin(x, axis=0)]
    yield "softmax", [x], [topi.softmax(x)]
    yield "log_softmax", [x], [topi.log_softmax(x, axis=0)]
    g, bias = _ph((d(6),), "g"), _ph((d(6),), "bias")
    yield "layer_norm", [x, g, bias], [topi.layer_norm(x, g, bias)]
    yield "rms_norm", [x, g], [topi.rms_norm(x, g)]
    w = _ph((d(6), d(5)), "w")
    yield "matmul", [x, w], [topi.matmul(x, w)]
    wt = _ph((d(5), d(6)), "wt")
    yield "matmul_t", [x, wt], [topi.matmul(x, wt, transpose_b=True)]
    db = _ph((d(5),), "db")
    yield "dense", [x, wt, db], [topi.dense(x, wt, db)]
    a3, b3 = _ph((2, d(4), 6), "a3"), _ph((2, 6, 3), "b3")
    yield "batch_matmul", [a3, b3], [topi.matmul(a3, b3)]
    yield "transpose", [x], [topi.transpose(x)]
    yield "permute", [a3], [topi.permute(a3, (2, 0, 1))]
    yield "reshape", [x], [topi.reshape(x, (-1,))]
    yield "concat", [x, y], [topi.concat([x, y], axis=1)]
    yield "split", [x], list(topi.split(x, [2, 4], axis=1))
    yield "pad", [x], [topi.pad(x, (1, 2), (3, 0))]
    ids = _ph((d(3),), "ids", "int32")
    table = _ph((d(10), 6), "table")
    yield "take", [table, ids], [topi.take(table, ids)]
    yield "embedding", [table, ids], [topi.embedding(table, ids)]
    yield from _images_and_attention(d)


def _images_and_attention(
    d: Callable[[int], object],
) -> Iterator[tuple[str, list[te.Tensor], list[te.Tensor]]]:
    """Convolutions, pooling, group norm, attention and rotary embedding."""
    img = _ph((1, 3, d(9), d(8)), "img")
    ker = _ph((4, 3, 3, 3), "ker")
    yield "conv2d", [img, ker], [topi.conv2d(img, ker, padding=1)]
    yield "conv2d_stride", [img, ker], [topi.conv2d(img, ker, stride=2, padding=(1, 0, 2, 1))]
    gk = _ph((3, 1, 3, 3), "gk")
    yield "conv2d_depthwise", [img, gk], [topi.conv2d(img, gk, padding=1, groups=3)]
    yield "max_pool2d", [img], [topi.max_pool2d(img, 2)]
    yield "max_pool2d_pad", [img], [topi.max_pool2d(img, 3, stride=2, padding=1)]
    yield "avg_pool2d", [img], [topi.avg_pool2d(img, 3, stride=1, padding=1)]
    gg, gb = _ph((3,), "gg"), _ph((3,), "gb")
    yield "group_norm", [img, gg, gb], [topi.group_norm(img, gg, gb, 3)]
    q = _ph((2, d(5), 8), "q")
    yield "attention", [q], [topi.causal_attention(q, q, q)]
    cs = _ph((d(5), 8), "cs")
    yield "rotary", [q, cs], [topi.rotary_embedding(q, cs, cs)]


def _static(k: int) -> object:
    return k


def _odd(k: int) -> object:
    return k + 3


def topi_functions() -> Iterator[tuple[str, PrimFunc]]:
    """Every topi operator on static, odd and symbolic shapes (one symbolic var per extent)."""
    syms: dict[int, Var] = {}

    def symbolic(k: int) -> object:
        return syms.setdefault(k, Var(f"n{k}", "int32"))

    for label, d in (("static", _static), ("odd", _odd), ("symbolic", symbolic)):
        for name, inputs, outputs in _cases(d):
            if not outputs:
                continue
            yield f"{name}/{label}", _create(inputs, outputs)


def _create(inputs: list[te.Tensor], outputs: list[te.Tensor]) -> PrimFunc:
    """create_prim_func with unused placeholders dropped (they would be extra parameters)."""
    return te.create_prim_func([*inputs, *outputs])


def workload_functions() -> Iterator[tuple[str, PrimFunc]]:
    """Schedule-test workloads, script reference kernels and the scheduled GPU kernels."""
    import compute_workloads as cw
    import kernels
    import reference_kernels

    for name in ("matmul", "elementwise_chain", "row_sum_scale", "layer_norm", "conv2d"):
        yield f"workload/{name}", getattr(cw, name)()
    yield "workload/matmul_relu", cw.matmul(8, relu=True)
    for name, text in reference_kernels.ALL.items():
        parsed = tc.script.parse(text)
        funcs = [parsed] if isinstance(parsed, PrimFunc) else [f for _, f in parsed.prim_funcs()]
        for f in funcs:
            yield f"reference/{name}", f
    for name in sorted(dir(kernels)):
        if name.startswith("make_"):
            made = getattr(kernels, name)()
            yield f"gpu/{name[5:]}", made[0]
