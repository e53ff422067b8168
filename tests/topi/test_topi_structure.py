"""Shapes, stage names and argument checks of the operator library (no compiler needed)."""

from __future__ import annotations

import pytest

import tilecraft as tc
from tilecraft import te, topi
from tilecraft.errors import TilecraftError
from tilecraft.ir import Block, IntImm, IterKind, post_order_visit


def block_names(*tensors: te.Tensor, inputs: list[te.Tensor]) -> list[str]:
    func = te.create_prim_func([*inputs, *tensors])
    found: list[str] = []
    post_order_visit(func.body, lambda n: found.append(n.name) if isinstance(n, Block) else None)
    return found[:-1]  # drop "root"


def static(t: te.Tensor) -> tuple[int, ...]:
    assert all(isinstance(s, IntImm) for s in t.shape), t.shape
    return tuple(s.value for s in t.shape)  # type: ignore[attr-defined]


def test_broadcast_shapes_and_names() -> None:
    a = te.placeholder((2, 1, 5), "float32", name="a")
    b = te.placeholder((3, 1), "float32", name="b")
    c = topi.add(a, b)
    assert static(c) == (2, 3, 5)
    assert c.name == "T_add"
    assert static(topi.multiply(a, 2.0)) == (2, 1, 5)
    with pytest.raises(TilecraftError, match="cannot broadcast"):
        topi.add(a, te.placeholder((4,), "float32"))
    with pytest.raises(TilecraftError, match="dtypes differ"):
        topi.add(a, te.placeholder((5,), "float16"))


def test_symbolic_broadcast_prefers_static_extent() -> None:
    n = te.size_var("n")
    a = te.placeholder((n, 1), "float32", name="a")
    b = te.placeholder((1, 7), "float32", name="b")
    c = topi.subtract(a, b)
    assert c.shape[0] is n
    assert c.shape[1].value == 7


def test_matmul_batch_broadcast_and_transpose() -> None:
    a = te.placeholder((2, 1, 5, 3), "float32", name="a")
    b = te.placeholder((4, 6, 3), "float32", name="b")
    c = topi.matmul(a, b, transpose_b=True)
    assert static(c) == (2, 4, 5, 6)
    assert c.name == "matmul"
    assert static(topi.matmul(te.placeholder((3, 5)), te.placeholder((3, 2)), True)) == (5, 2)
    with pytest.raises(TilecraftError, match="reduction extents differ"):
        topi.matmul(a, b)
    func = te.create_prim_func([a, b, c])
    blk = []
    post_order_visit(func.body, lambda n: blk.append(n) if isinstance(n, Block) else None)
    kinds = [iv.kind for iv in blk[0].iter_vars]
    assert kinds == [IterKind.SPATIAL] * 4 + [IterKind.REDUCE]


def test_softmax_has_four_stages() -> None:
    x = te.placeholder((4, 9), "float32", name="x")
    y = topi.softmax(x)
    # the exponentials are a stage of their own, read by the sum and the result
    assert block_names(y, inputs=[x]) == [
        "T_softmax_maxelem", "T_softmax_exp", "T_softmax_expsum", "T_softmax_norm",
    ]  # fmt: skip
    assert static(y) == (4, 9)


def test_dense_with_bias_and_norm_stage_names() -> None:
    x = te.placeholder((2, 3, 8), "float32", name="x")
    w = te.placeholder((5, 8), "float32", name="w")
    b = te.placeholder((5,), "float32", name="b")
    y = topi.dense(x, w, b)
    assert static(y) == (2, 3, 5)
    assert block_names(y, inputs=[x, w, b]) == ["dense", "T_add"]
    g = te.placeholder((8,), "float32", name="g")
    ln = topi.layer_norm(x, g, g)
    assert block_names(ln, inputs=[x, g]) == [
        "T_layer_norm_sum", "T_layer_norm_var", "T_layer_norm",
    ]  # fmt: skip


def test_conv_and_pool_shapes() -> None:
    x = te.placeholder((1, 4, 13, 13), "float32", name="x")
    w = te.placeholder((6, 2, 3, 3), "float32", name="w")
    y = topi.conv2d(x, w, stride=2, padding=1, dilation=1, groups=2)
    assert static(y) == (1, 6, 7, 7)
    assert block_names(y, inputs=[x, w]) == ["pad_temp", "conv2d"]
    xh = te.placeholder((1, 13, 13, 4), "float32", name="xh")
    wh = te.placeholder((3, 3, 4, 8), "float32", name="wh")
    assert static(topi.conv2d(xh, wh, dilation=2, layout="NHWC")) == (1, 9, 9, 8)
    assert static(topi.max_pool2d(x, 3, 2, 1)) == (1, 4, 7, 7)
    assert static(topi.avg_pool2d(xh, 2, layout="NHWC")) == (1, 6, 6, 4)
    with pytest.raises(TilecraftError, match="not divisible by groups"):
        topi.conv2d(x, w, groups=3)
    with pytest.raises(TilecraftError, match="layout"):
        topi.conv2d(x, w, layout="CHWN")


def test_transform_shapes() -> None:
    x = te.placeholder((2, 3, 4), "float32", name="x")
    assert static(topi.transpose(x, (2, 0, 1))) == (4, 2, 3)
    assert static(topi.transpose(x)) == (4, 3, 2)
    assert static(topi.reshape(x, (-1, 6))) == (4, 6)
    with pytest.raises(TilecraftError, match="cannot"):
        topi.reshape(x, (5, -1))
    assert static(topi.concat([x, x], axis=-1)) == (2, 3, 8)
    parts = topi.split(x, [1, 3], axis=2)
    assert [static(p) for p in parts] == [(2, 3, 1), (2, 3, 2), (2, 3, 1)]
    assert [p.name for p in parts] == ["T_split", "T_split_1", "T_split_2"]
    ids = te.placeholder((5, 2), "int32", name="ids")
    assert static(topi.take(x, ids, axis=1)) == (2, 5, 2, 4)
    assert static(topi.sum(x, axis=(0, 2), keepdims=True)) == (1, 3, 1)
    assert static(topi.max(x)) == ()
    assert topi.argmax(x, axis=1).dtype == tc.ir.dtype("int32")


def test_rotary_offset_var_is_scalar_param() -> None:
    x = te.placeholder((1, 2, 5, 8), "float32", name="x")
    cos = te.placeholder((16, 8), "float32", name="cos")
    sin = te.placeholder((16, 8), "float32", name="sin")
    off = tc.ir.Var("offset")
    y = topi.rotary_embedding(x, cos, sin, off)
    func = te.create_prim_func([x, cos, sin, y])
    assert func.params[-1] is off
    with pytest.raises(TilecraftError, match="odd"):
        topi.rotary_embedding(te.placeholder((2, 7)), cos, sin)


def test_attention_is_a_composition() -> None:
    q = te.placeholder((1, 2, 4, 8), "float32", name="q")
    k = te.placeholder((1, 2, 6, 8), "float32", name="k")
    out = topi.causal_attention(q, k, k)
    assert static(out) == (1, 2, 4, 8)
    assert block_names(out, inputs=[q, k]) == [
        "attention_scores", "attention_masked", "attention_softmax_maxelem",
        "attention_softmax_exp", "attention_softmax_expsum", "attention_softmax_norm",
        "attention",
    ]  # fmt: skip


def test_gelu_rejects_unknown_approximation() -> None:
    with pytest.raises(TilecraftError, match="approximate"):
        topi.gelu(te.placeholder((3,)), approximate="fast")
    with pytest.raises(TilecraftError, match="floating-point"):
        topi.exp(te.placeholder((3,), "int32"))
