"""Every topi operator as a PrimFunc, for the block-analysis tests (static and symbolic shapes).

``WORKLOADS`` maps a workload name to a zero-argument builder, so a test parametrized over
the names builds only what it uses. Symbolic workloads use the extent ``n``.
"""

from __future__ import annotations

from collections.abc import Callable

import tilecraft as tc
from tilecraft import te, topi

N = tc.ir.Var("n", "int32")


def _ph(shape: tuple[object, ...], name: str, dtype: str = "float32") -> te.Tensor:
    return te.placeholder(shape, dtype, name=name)


def _unary(op: Callable[..., te.Tensor], **kw: object) -> Callable[[], tc.ir.PrimFunc]:
    def build() -> tc.ir.PrimFunc:
        x = _ph((8, 64), "x")
        return te.create_prim_func([x, op(x, **kw)])

    return build


def _binary(
    op: Callable[..., te.Tensor], bshape: tuple[object, ...]
) -> Callable[[], tc.ir.PrimFunc]:
    def build() -> tc.ir.PrimFunc:
        a, b = _ph((8, 64), "a"), _ph(bshape, "b")
        return te.create_prim_func([a, b, op(a, b)])

    return build


def matmul() -> tc.ir.PrimFunc:
    a, b = _ph((64, 32), "A"), _ph((32, 16), "B")
    return te.create_prim_func([a, b, topi.matmul(a, b)])


def matmul_symbolic() -> tc.ir.PrimFunc:
    a, b = _ph((N, 32), "A"), _ph((32, 16), "B")
    return te.create_prim_func([a, b, topi.matmul(a, b)])


def matmul_transpose_b() -> tc.ir.PrimFunc:
    a, b = _ph((64, 32), "A"), _ph((16, 32), "B")
    return te.create_prim_func([a, b, topi.matmul(a, b, transpose_b=True)])


def matmul_transpose_a() -> tc.ir.PrimFunc:
    a, b = _ph((32, 64), "A"), _ph((32, 16), "B")
    return te.create_prim_func([a, b, topi.matmul(a, b, transpose_a=True)])


def batch_matmul() -> tc.ir.PrimFunc:
    a, b = _ph((4, 64, 32), "A"), _ph((4, 32, 16), "B")
    return te.create_prim_func([a, b, topi.matmul(a, b)])


def batch_matmul_broadcast() -> tc.ir.PrimFunc:
    a, b = _ph((4, 64, 32), "A"), _ph((1, 32, 16), "B")
    return te.create_prim_func([a, b, topi.matmul(a, b)])


def dense_bias_symbolic() -> tc.ir.PrimFunc:
    x, w, bias = _ph((N, 32), "x"), _ph((16, 32), "W"), _ph((16,), "bias")
    return te.create_prim_func([x, w, bias, topi.dense(x, w, bias)])


def dense_gemv() -> tc.ir.PrimFunc:
    x, w = _ph((1, 32), "x"), _ph((16, 32), "W")
    return te.create_prim_func([x, w, topi.dense(x, w)])


def conv2d() -> tc.ir.PrimFunc:
    x, w = _ph((2, 4, 8, 8), "X"), _ph((16, 4, 3, 3), "W")
    return te.create_prim_func([x, w, topi.conv2d(x, w, padding=1)])


def conv2d_symbolic() -> tc.ir.PrimFunc:
    x, w = _ph((N, 4, 8, 8), "X"), _ph((16, 4, 3, 3), "W")
    return te.create_prim_func([x, w, topi.conv2d(x, w, padding=1)])


def max_pool2d() -> tc.ir.PrimFunc:
    x = _ph((2, 4, 8, 8), "X")
    return te.create_prim_func([x, topi.max_pool2d(x, 2, 2)])


def avg_pool2d() -> tc.ir.PrimFunc:
    x = _ph((2, 4, 8, 8), "X")
    return te.create_prim_func([x, topi.avg_pool2d(x, 2, 2)])


def softmax_symbolic() -> tc.ir.PrimFunc:
    x = _ph((N, 64), "x")
    return te.create_prim_func([x, topi.softmax(x)])


def layer_norm() -> tc.ir.PrimFunc:
    x, g, b = _ph((8, 64), "x"), _ph((64,), "gamma"), _ph((64,), "beta")
    return te.create_prim_func([x, g, b, topi.layer_norm(x, g, b)])


def rms_norm() -> tc.ir.PrimFunc:
    x, w = _ph((8, 64), "x"), _ph((64,), "w")
    return te.create_prim_func([x, w, topi.rms_norm(x, w)])


def group_norm() -> tc.ir.PrimFunc:
    x = _ph((2, 8, 4, 4), "x")
    return te.create_prim_func([x, topi.group_norm(x, None, None, num_groups=2)])


def take() -> tc.ir.PrimFunc:
    x, idx = _ph((8, 64), "x"), _ph((5,), "idx", "int32")
    return te.create_prim_func([x, idx, topi.take(x, idx, axis=0)])


def embedding() -> tc.ir.PrimFunc:
    table, ids = _ph((100, 16), "table"), _ph((2, 5), "ids", "int32")
    return te.create_prim_func([table, ids, topi.embedding(table, ids)])


def concat() -> tc.ir.PrimFunc:
    x, y = _ph((8, 64), "x"), _ph((8, 32), "y")
    return te.create_prim_func([x, y, topi.concat([x, y], axis=1)])


def split() -> tc.ir.PrimFunc:
    x = _ph((8, 64), "x")
    return te.create_prim_func([x, *topi.split(x, 2, axis=1)])


def where() -> tc.ir.PrimFunc:
    c, a, b = _ph((8, 64), "c", "bool"), _ph((8, 64), "a"), _ph((64,), "b")
    return te.create_prim_func([c, a, b, topi.where(c, a, b)])


def rotary() -> tc.ir.PrimFunc:
    x, cos, sin = _ph((2, 16, 8), "x"), _ph((16, 8), "cos"), _ph((16, 8), "sin")
    return te.create_prim_func([x, cos, sin, topi.rotary_embedding(x, cos, sin)])


def rotary_positions() -> tc.ir.PrimFunc:
    x, pos = _ph((1, 4, N, 16), "x"), _ph((N,), "pos", "int32")
    return te.create_prim_func([x, pos, topi.rotary(x, pos, seq_axis=2)])


def causal_mask() -> tc.ir.PrimFunc:
    return te.create_prim_func([s := _ph((2, 3, 9), "s"), topi.causal_mask(s)])


def attention() -> tc.ir.PrimFunc:
    q, k, v = _ph((2, 16, 8), "q"), _ph((2, 16, 8), "k"), _ph((2, 16, 8), "v")
    return te.create_prim_func([q, k, v, topi.causal_attention(q, k, v)])


def fused_attention() -> tc.ir.PrimFunc:
    q, k, v = _ph((2, 16, 8), "q"), _ph((2, 16, 8), "k"), _ph((2, 16, 8), "v")
    return te.create_prim_func([q, k, v, topi.attention(q, k, v, causal=True)])


WORKLOADS: dict[str, Callable[[], tc.ir.PrimFunc]] = {
    "matmul": matmul,
    "matmul_symbolic": matmul_symbolic,
    "matmul_transpose_a": matmul_transpose_a,
    "matmul_transpose_b": matmul_transpose_b,
    "batch_matmul": batch_matmul,
    "batch_matmul_broadcast": batch_matmul_broadcast,
    "dense_bias_symbolic": dense_bias_symbolic,
    "dense_gemv": dense_gemv,
    "conv2d": conv2d,
    "conv2d_symbolic": conv2d_symbolic,
    "max_pool2d": max_pool2d,
    "avg_pool2d": avg_pool2d,
    "softmax_symbolic": softmax_symbolic,
    "log_softmax": _unary(topi.log_softmax),
    "layer_norm": layer_norm,
    "rms_norm": rms_norm,
    "group_norm": group_norm,
    "sum_last": _unary(topi.sum, axis=1),
    "sum_first": _unary(topi.sum, axis=0),
    "sum_all": _unary(topi.sum),
    "prod": _unary(topi.prod, axis=1),
    "max": _unary(topi.max, axis=1, keepdims=True),
    "min": _unary(topi.min, axis=1),
    "mean": _unary(topi.mean, axis=1),
    "argmax": _unary(topi.argmax, axis=1),
    "argmin": _unary(topi.argmin, axis=0),
    "relu": _unary(topi.relu),
    "gelu": _unary(topi.gelu),
    "silu": _unary(topi.silu),
    "sigmoid": _unary(topi.sigmoid),
    "tanh": _unary(topi.tanh),
    "exp": _unary(topi.exp),
    "rsqrt": _unary(topi.rsqrt),
    "abs": _unary(topi.abs),
    "negative": _unary(topi.negative),
    "clip": _unary(topi.clip, lo=-1.0, hi=1.0),
    "cast": _unary(topi.cast, dtype="float16"),
    "identity": _unary(topi.identity),
    "add_same_shape": _binary(topi.add, (8, 64)),
    "add_row_bias": _binary(topi.add, (64,)),
    "multiply_column": _binary(topi.multiply, (8, 1)),
    "subtract_scalar": _binary(topi.subtract, ()),
    "maximum": _binary(topi.maximum, (8, 64)),
    "power": _binary(topi.power, (8, 64)),
    "less": _binary(topi.less, (8, 64)),
    "divide": _binary(topi.divide, (1, 64)),
    "where": where,
    "transpose": _unary(topi.transpose),
    "permute": _unary(topi.permute, axes=[1, 0]),
    "reshape": _unary(topi.reshape, newshape=(16, 32)),
    "pad": _unary(topi.pad, pad_before=[1, 2]),
    "concat": concat,
    "split": split,
    "take": take,
    "embedding": embedding,
    "rotary": rotary,
    "rotary_positions": rotary_positions,
    "causal_mask": causal_mask,
    "attention": attention,
    "fused_attention": fused_attention,
}
