"""Graph IR nodes, the op registry's type inference and its errors."""

from __future__ import annotations

import pytest

import tilecraft as tc
from tilecraft.errors import IRError, TilecraftError
from tilecraft.graph import GraphBuilder, GraphError, TensorType, infer_type
from tilecraft.graph.ir import Binding, CallTIR, Function, OpCall, TensorVar


def T(shape, dtype="float32") -> TensorType:
    return TensorType(shape, dtype)


def test_graph_error_is_a_tilecraft_error() -> None:
    assert issubclass(GraphError, TilecraftError)


def test_broadcast_and_matmul_types() -> None:
    n = tc.ir.Var("n", "int32")
    out = infer_type("add", [T((n, 1, 8)), T((4, 1))], {})
    assert out.describe() == "Tensor((n, 4, 8), float32)"
    out = infer_type("matmul", [T((2, n, 16)), T((16, 32))], {})
    assert out.describe() == "Tensor((2, n, 32), float32)"
    assert (
        infer_type("linear", [T((n, 16)), T((8, 16)), T((8,))], {}).describe()
        == "Tensor((n, 8), float32)"
    )


def test_reshape_with_symbolic_extent_and_inferred_axis() -> None:
    n = tc.ir.Var("n", "int32")
    out = infer_type("reshape", [T((1, n, 512))], {"shape": (1, "n", 8, -1)})
    assert out.describe() == "Tensor((1, n, 8, 64), float32)"


def test_conv_pool_take_concat_reduce_types() -> None:
    assert (
        infer_type(
            "conv2d", [T((2, 3, 16, 16)), T((8, 3, 3, 3))], {"padding": 1, "strides": 2}
        ).describe()
        == "Tensor((2, 8, 8, 8), float32)"
    )
    assert (
        infer_type("max_pool2d", [T((1, 8, 8, 8))], {"pool_size": 2}).describe()
        == "Tensor((1, 8, 4, 4), float32)"
    )
    assert (
        infer_type("take", [T((100, 16)), T((3, 5), "int32")], {"axis": 0}).describe()
        == "Tensor((3, 5, 16), float32)"
    )
    assert (
        infer_type("concat", [T((2, 3)), T((2, 5))], {"axis": 1}).describe()
        == "Tensor((2, 8), float32)"
    )
    assert (
        infer_type("sum", [T((2, 3, 4))], {"axis": (0, 2), "keepdims": True}).describe()
        == "Tensor((1, 3, 1), float32)"
    )
    assert infer_type("astype", [T((2,))], {"dtype": "float16"}).dtype == tc.ir.dtype("float16")


@pytest.mark.parametrize(
    ("op", "types", "attrs", "message"),
    [
        ("matmul", [T((4, 8)), T((16, 2))], {}, r"matmul: inner dimensions differ.*8 vs 16"),
        ("add", [T((4, 8)), T((3, 8))], {}, r"add: shapes \(4, 8\) and \(3, 8\) do not broadcast"),
        ("add", [T((4,)), T((4,), "float16")], {}, r"add: argument 1 has dtype float16"),
        ("relu", [T((4,)), T((4,))], {}, r"relu: expected 1 tensor arguments, got 2"),
        ("reshape", [T((4, 6))], {"shape": (5, 5)}, r"reshape: cannot reshape .* element counts"),
        ("permute_dims", [T((4, 6))], {"axes": (0, 0)}, r"not a permutation"),
        ("softmax", [T((4,), "int32")], {}, r"softmax: expected a floating-point tensor"),
        ("layer_norm", [T((2, 8)), T((4,)), T((8,))], {}, r"layer_norm: argument 1 must be \(8,\)"),
        ("conv2d", [T((1, 3, 8, 8)), T((4, 2, 3, 3))], {}, r"conv2d: data has 3 channels"),
        ("take", [T((10, 4)), T((3,))], {}, r"take: indices must be integers"),
        ("attention", [T((1, 4, 2, 8)), T((1, 4, 2, 8)), T((1, 4, 3, 8))], {}, r"incompatible"),
        ("no_such_op", [T((1,))], {}, r"unknown graph operator 'no_such_op'"),
    ],
)
def test_ill_typed_calls_are_rejected(op, types, attrs, message) -> None:
    with pytest.raises(GraphError, match=message):
        infer_type(op, types, attrs)


def test_builder_rejects_ill_typed_emit_with_clear_error() -> None:
    bb = GraphBuilder()
    x = bb.param("x", ("n", 16), "float32")
    w = bb.param("w", (8, 32), "float32")
    with pytest.raises(GraphError, match=r"matmul: inner dimensions differ.*16 vs 8"):
        bb.emit("matmul", [x, w])


def test_function_checks_scoping() -> None:
    x = TensorVar("x", T((4,)))
    y = TensorVar("y", T((4,)))
    z = TensorVar("z", T((4,)))
    with pytest.raises(IRError, match="uses y before it is defined"):
        Function((x,), (Binding(z, OpCall("add", (x, y))),), z)
    with pytest.raises(IRError, match="result y is not defined"):
        Function((x,), (), y)
    with pytest.raises(IRError, match="bound twice"):
        Function((x,), (Binding(z, OpCall("relu", (x,))), Binding(z, OpCall("relu", (x,)))), z)
    with pytest.raises(IRError, match="must be an identifier"):
        TensorVar("not a name", T((4,)))
    with pytest.raises(IRError, match="arguments must be TensorVars"):
        CallTIR("f", (1,), T((4,)))  # type: ignore[arg-type]


def test_symbolic_names_share_one_var() -> None:
    bb = GraphBuilder()
    x = bb.param("x", ("n", 4), "float32")
    y = bb.param("y", ("n", 4), "float32")
    assert x.type.shape[0] is y.type.shape[0]
    f = bb.finish(bb.emit("add", [x, y]), "main")
    assert [v.name for v in f.shape_vars()] == ["n"]
    assert f.ret.name == "gv"
