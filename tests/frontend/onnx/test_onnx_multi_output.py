"""An ONNX model with two outputs: one ``forward`` returning both, matched to onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft as tc  # noqa: E402
from tilecraft.frontend.onnx import from_onnx  # noqa: E402


def _two_output_model() -> onnx.ModelProto:
    """hidden = Relu(x @ W1 + b1); logits = hidden @ W2; outputs (logits, hidden, x)."""
    rng = np.random.default_rng(0)
    inits = {
        "fc1.weight": rng.standard_normal((16, 32)).astype(np.float32),
        "fc1.bias": rng.standard_normal(32).astype(np.float32),
        "fc2.weight": rng.standard_normal((32, 4)).astype(np.float32),
    }
    nodes = [
        helper.make_node("MatMul", ["x", "fc1.weight"], ["h0"]),
        helper.make_node("Add", ["h0", "fc1.bias"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["hidden"]),
        helper.make_node("MatMul", ["hidden", "fc2.weight"], ["logits"]),
    ]
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        nodes,
        "two_heads",
        [helper.make_tensor_value_info("x", f, ["b", 16])],
        [
            helper.make_tensor_value_info("logits", f, ["b", 4]),
            helper.make_tensor_value_info("hidden", f, ["b", 32]),
            helper.make_tensor_value_info("x", f, ["b", 16]),
        ],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def test_two_output_model_is_one_function_matching_onnxruntime() -> None:
    model = _two_output_model()
    mod, params = from_onnx(model)
    assert list(mod.functions) == ["forward"]
    fwd = mod["forward"]
    assert fwd.returns_tuple
    assert len(fwd.rets) == 3
    assert fwd.rets[2] is fwd.params[0]  # an input returned as is: the executor copies it
    assert sum(b.value.op == "matmul" for b in fwd.bindings) == 2  # shared work once
    exe = tc.compile(mod, params=params)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for b in (3, 9):
        x = np.random.default_rng(b).standard_normal((b, 16)).astype(np.float32)
        want = sess.run(None, {"x": x})
        got = exe(x)
        assert isinstance(got, tuple)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
        assert not np.shares_memory(got[2], x)
