"""Data-movement ops on symbolic shapes, and the importer's errors."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft as tc  # noqa: E402
from tilecraft.frontend.onnx import ONNXImportError, UnsupportedOpsError, from_onnx  # noqa: E402
from tilecraft.graph import GraphBuilder  # noqa: E402

F = TensorProto.FLOAT
I64_MIN = -(2**63)


def _model(nodes, inputs, outputs, inits, opset=17):  # type: ignore[no-untyped-def]
    graph = helper.make_graph(
        nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits.items()]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _ints(*v: int) -> np.ndarray:
    return np.array(v, np.int64)


def test_slice_split_expand_where_on_symbolic_shapes() -> None:
    inits = {
        "m1": _ints(-1),
        "min": _ints(I64_MIN),
        "ax2": _ints(2),
        "neg2": _ints(-2),
        "z": _ints(0),
        "three": _ints(3),
        "sizes": _ints(2, 4),
        "bias": np.linspace(-1, 1, 6).astype(np.float32),
        "zero": np.array(0.0, np.float32),
    }
    nodes = [
        helper.make_node("Slice", ["x", "m1", "min", "ax2", "neg2"], ["rev"]),  # x[..., ::-2]
        helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=2),
        helper.make_node("Concat", ["b", "a"], ["cat"], axis=2),
        helper.make_node("Shape", ["x"], ["shp"]),
        helper.make_node(
            "ConstantOfShape",
            ["shp"],
            ["ones"],
            value=helper.make_tensor("v", F, [1], [1.0]),
        ),
        helper.make_node("Greater", ["x", "zero"], ["pos"]),
        helper.make_node("Where", ["pos", "cat", "ones"], ["w"]),
        helper.make_node("Expand", ["bias", "shp"], ["e"]),
        helper.make_node("Add", ["w", "e"], ["s"]),
        helper.make_node("Slice", ["s", "z", "three", "ax2"], ["t"]),
        helper.make_node("Concat", ["rev", "t"], ["u"], axis=2),
        helper.make_node("ReduceMax", ["u"], ["mx"], axes=[2], keepdims=1),
        helper.make_node("Sub", ["u", "mx"], ["d"]),
        helper.make_node("Tanh", ["d"], ["y"]),
    ]
    x_info = helper.make_tensor_value_info("x", F, [2, "n", 6])
    y_info = helper.make_tensor_value_info("y", F, [2, "n", 6])
    model = _model(nodes, [x_info], [y_info], inits)
    onnx.checker.check_model(model)
    mod, params = from_onnx(model)
    exe = tc.compile(mod, params=params)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    for n in (3, 5):
        x = rng.standard_normal((2, n, 6)).astype(np.float32)
        np.testing.assert_allclose(exe(x), sess.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_every_unsupported_op_is_listed_in_one_error() -> None:
    nodes = [
        helper.make_node("NonZero", ["x"], ["nz1"], name="nz_a"),
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("NonZero", ["r"], ["nz2"], name="nz_b"),
        helper.make_node("Celu", ["r"], ["y"], name="hs"),
    ]
    x_info = helper.make_tensor_value_info("x", F, [4])
    model = _model(nodes, [x_info], [helper.make_tensor_value_info("y", F, [4])], {})
    with pytest.raises(UnsupportedOpsError) as info:
        from_onnx(model)
    assert info.value.missing == [("Celu", ["hs"]), ("NonZero", ["nz_a", "nz_b"])]
    text = str(info.value)
    assert "2 unsupported operator type(s) in 3 node(s)" in text
    assert "NonZero x2 (nodes: 'nz_a', 'nz_b')" in text


def test_malformed_and_unsupported_models_raise_tilecraft_errors() -> None:
    x_info = helper.make_tensor_value_info("x", F, [4])
    y_info = helper.make_tensor_value_info("y", F, [4])
    dangling = _model([helper.make_node("Relu", ["nowhere"], ["y"])], [x_info], [y_info], {})
    with pytest.raises(ONNXImportError, match="malformed"):
        from_onnx(dangling)
    old = _model([helper.make_node("Relu", ["x"], ["y"])], [x_info], [y_info], {}, opset=11)
    with pytest.raises(ONNXImportError, match="opset 11 is older than 13"):
        from_onnx(old)
    with pytest.raises(ONNXImportError, match=r"expected an onnx\.ModelProto"):
        from_onnx(GraphBuilder())
    with pytest.raises(ONNXImportError, match="not an ONNX model"):
        from_onnx(b"\x00garbage\xff")
    with pytest.raises(ONNXImportError, match="cannot load"):
        from_onnx("/nonexistent/model.onnx")
    bad_pad = _model(
        [helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect")],
        [x_info],
        [helper.make_tensor_value_info("y", F, [6])],
        {"p": _ints(1, 1)},
    )
    with pytest.raises(ONNXImportError, match=r"Pad node .*mode='reflect' is unsupported"):
        from_onnx(bad_pad)
    good = _model([helper.make_node("Relu", ["x"], ["y"])], [x_info], [y_info], {})
    with pytest.raises(ONNXImportError, match="names no model input"):
        from_onnx(good, shapes={"nope": (4,)})


def test_unsupported_attribute_names_the_node() -> None:
    x_info = helper.make_tensor_value_info("x", F, [1, 2, "h", "w"])
    y_info = helper.make_tensor_value_info("y", F, [1, 2, None, None])
    node = helper.make_node(
        "MaxPool", ["x"], ["y"], name="pool7", kernel_shape=[3, 3], strides=[2, 2],
        auto_pad="SAME_UPPER",
    )  # fmt: skip
    with pytest.raises(ONNXImportError, match=r'MaxPool node "pool7": auto_pad .* stride 1'):
        from_onnx(_model([node], [x_info], [y_info], {}))


def test_reshape_to_a_product_of_symbolic_extents() -> None:
    inits = {"flat": _ints(-1, 6)}
    x_info = helper.make_tensor_value_info("x", F, ["b", "n", 6])
    y_info = helper.make_tensor_value_info("y", F, [None, 6])
    model = _model([helper.make_node("Reshape", ["x", "flat"], ["y"])], [x_info], [y_info], inits)
    mod, _ = from_onnx(model)
    assert "b * n" in mod["forward"].script().replace("(", "").replace(")", "")
    exe = tc.compile(mod)
    for b, n in ((2, 3), (1, 5)):
        x = np.arange(b * n * 6, dtype=np.float32).reshape(b, n, 6)
        np.testing.assert_array_equal(exe(x), x.reshape(b * n, 6))
    mod, _ = from_onnx(model, shapes={"x": (2, 3, 6)})
    x = np.arange(36, dtype=np.float32).reshape(2, 3, 6)
    np.testing.assert_array_equal(tc.compile(mod)(x), x.reshape(6, 6))
