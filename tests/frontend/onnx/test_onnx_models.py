"""from_onnx on models built with onnx.helper, compiled with tc.compile, against onnxruntime."""

from __future__ import annotations

import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft as tc  # noqa: E402
from tilecraft.frontend.onnx import from_onnx  # noqa: E402

F = TensorProto.FLOAT
RNG = np.random.default_rng(0)


def _w(*shape: int, scale: float = 0.3) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def _model(nodes, inputs, output, inits, opset=17):  # type: ignore[no-untyped-def]
    graph = helper.make_graph(
        nodes,
        "g",
        inputs,
        [output],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    return model


def _reference(model, feeds):  # type: ignore[no-untyped-def]
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


def _check(model, feeds, exe=None, rtol=1e-4, atol=1e-5):  # type: ignore[no-untyped-def]
    if exe is None:
        mod, params = from_onnx(model)
        exe = tc.compile(mod, params=params)
    got = exe(**{k.replace(".", "_"): v for k, v in feeds.items()})
    want = _reference(model, feeds)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    return exe


def test_mlp_with_gemm() -> None:
    inits = {"fc1.weight": _w(32, 16), "fc1.bias": _w(32), "w2": _w(32, 8), "b2": _w(8)}
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], alpha=0.5, beta=2.0),
    ]
    x_info = helper.make_tensor_value_info("x", F, [4, 16])
    model = _model(nodes, [x_info], helper.make_tensor_value_info("y", F, [4, 8]), inits)
    mod, params = from_onnx(model)
    assert list(params) == ["fc1.weight", "fc1.bias", "w2", "b2"]
    assert mod["forward"].attrs["num_input"] == 1
    exe = _check(model, {"x": _w(4, 16, scale=1.0)})
    # unbound: the weights follow the input
    unbound = tc.compile(mod)
    x = _w(4, 16, scale=1.0)
    np.testing.assert_allclose(unbound(x, *params.values()), exe(x), rtol=1e-6)


def _conv_bn(name: str, cin: int, cout: int, k: int, stride: int, group: int, inits: dict) -> list:  # type: ignore[type-arg]
    inits[f"{name}.w"] = _w(cout, cin // group, k, k)
    inits[f"{name}.bn.scale"] = (1 + _w(cout)).astype(np.float32)
    inits[f"{name}.bn.bias"] = _w(cout)
    inits[f"{name}.bn.mean"] = _w(cout)
    inits[f"{name}.bn.var"] = (1 + np.abs(_w(cout))).astype(np.float32)
    bn_in = [f"{name}.{p}" for p in ("bn.scale", "bn.bias", "bn.mean", "bn.var")]
    return [
        helper.make_node(
            "Conv",
            [f"{name}.in", f"{name}.w"],
            [f"{name}.conv"],
            kernel_shape=[k, k],
            strides=[stride, stride],
            pads=[k // 2] * 4,
            group=group,
        ),
        helper.make_node(
            "BatchNormalization", [f"{name}.conv", *bn_in], [f"{name}.out"], epsilon=1e-3
        ),
    ]


def test_conv_block_batchnorm_pools_depthwise() -> None:
    inits: dict[str, np.ndarray] = {}
    nodes = [helper.make_node("Identity", ["x"], ["c1.in"])]
    nodes += _conv_bn("c1", 3, 8, 3, 2, 1, inits)  # strided conv
    nodes += [
        helper.make_node("Relu", ["c1.out"], ["r1"]),
        helper.make_node(
            "MaxPool", ["r1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]
        ),
        helper.make_node("Identity", ["p1"], ["dw.in"]),
    ]
    nodes += _conv_bn("dw", 8, 8, 3, 1, 8, inits)  # depthwise
    inits["lo"], inits["hi"] = np.array(0.0, np.float32), np.array(6.0, np.float32)
    inits["pw.b"] = _w(8)
    inits["fc.w"], inits["fc.b"] = _w(8, 5), _w(5)
    nodes += [
        helper.make_node("Clip", ["dw.out", "lo", "hi"], ["relu6"]),
        helper.make_node("Conv", ["relu6", "pw.w", "pw.b"], ["pw"], kernel_shape=[1, 1]),
        helper.make_node("Add", ["pw", "p1"], ["res"]),
        helper.make_node("GlobalAveragePool", ["res"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["y"]),
    ]
    inits["pw.w"] = _w(8, 8, 1, 1)
    x_info = helper.make_tensor_value_info("x", F, [2, 3, 16, 16])
    model = _model(nodes, [x_info], helper.make_tensor_value_info("y", F, [2, 5]), inits)
    _check(model, {"x": _w(2, 3, 16, 16, scale=1.0)})


def _linear(name: str, x: str, d_in: int, d_out: int, inits: dict) -> list:  # type: ignore[type-arg]
    inits[f"{name}.weight"], inits[f"{name}.bias"] = _w(d_in, d_out), _w(d_out)
    return [
        helper.make_node("MatMul", [x, f"{name}.weight"], [f"{name}.mm"]),
        helper.make_node("Add", [f"{name}.mm", f"{name}.bias"], [name]),
    ]


def _split_heads(src: str, dst: str, heads: int, head_dim: int, perm: list[int]) -> list:  # type: ignore[type-arg]
    """Reshape (b, s, h*d) -> (b, s, h, d) through the Shape/Gather/Concat subgraph."""
    return [
        helper.make_node("Reshape", [src, "heads_shape"], [f"{dst}.4d"]),
        helper.make_node("Transpose", [f"{dst}.4d"], [dst], perm=perm),
    ]


def _bert_model(hidden: int = 32, heads: int = 4) -> onnx.ModelProto:
    d = hidden // heads
    inits: dict[str, np.ndarray] = {
        "i0": np.array([0], np.int64),
        "i1": np.array([1], np.int64),
        "heads_dims": np.array([heads, d], np.int64),
        "hidden_dim": np.array([hidden], np.int64),
        "scale": np.array(math.sqrt(d), np.float32),
        "one": np.array(1.0, np.float32),
        "neg": np.array(-10000.0, np.float32),
        "sqrt2": np.array(math.sqrt(2.0), np.float32),
        "half": np.array(0.5, np.float32),
        "pos_table": _w(64, hidden),
        "ln1.weight": (1 + _w(hidden)).astype(np.float32),
        "ln1.bias": _w(hidden),
        "ln2.weight": (1 + _w(hidden)).astype(np.float32),
        "ln2.bias": _w(hidden),
    }
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "i0"], ["b"], axis=0),
        helper.make_node("Gather", ["shape", "i1"], ["s"], axis=0),
        helper.make_node("Concat", ["b", "s", "heads_dims"], ["heads_shape"], axis=0),
        helper.make_node("Concat", ["b", "s", "hidden_dim"], ["merged_shape"], axis=0),
        # position embeddings sliced to the (symbolic) sequence length
        helper.make_node("Slice", ["pos_table", "i0", "s", "i0"], ["pos"]),
        helper.make_node("Add", ["x", "pos"], ["xp"]),
    ]
    for n in ("q", "k", "v"):
        nodes += _linear(n, "xp", hidden, hidden, inits)
    nodes += _split_heads("q", "qh", heads, d, [0, 2, 1, 3])
    nodes += _split_heads("k", "kt", heads, d, [0, 2, 3, 1])
    nodes += _split_heads("v", "vh", heads, d, [0, 2, 1, 3])
    nodes += [
        helper.make_node("MatMul", ["qh", "kt"], ["scores0"]),
        helper.make_node("Div", ["scores0", "scale"], ["scores1"]),
        # BERT's extended mask: (1 - mask) * -10000, broadcast over heads and queries
        helper.make_node("Sub", ["one", "mask"], ["inv"]),
        helper.make_node("Mul", ["inv", "neg"], ["bias0"]),
        helper.make_node("Unsqueeze", ["bias0", "i1"], ["bias1"]),
        helper.make_node("Unsqueeze", ["bias1", "i1"], ["bias2"]),
        helper.make_node("Add", ["scores1", "bias2"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["probs"], axis=-1),
        helper.make_node("MatMul", ["probs", "vh"], ["ctx0"]),
        helper.make_node("Transpose", ["ctx0"], ["ctx1"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ctx1", "merged_shape"], ["ctx"]),
    ]
    nodes += _linear("o", "ctx", hidden, hidden, inits)
    nodes += [
        helper.make_node("Add", ["o", "xp"], ["res1"]),
        helper.make_node(
            "LayerNormalization", ["res1", "ln1.weight", "ln1.bias"], ["h1"], epsilon=1e-12
        ),
    ]
    nodes += _linear("ff1", "h1", hidden, 4 * hidden, inits)
    nodes += [  # GELU as exported: x * 0.5 * (1 + erf(x / sqrt(2)))
        helper.make_node("Div", ["ff1", "sqrt2"], ["g0"]),
        helper.make_node("Erf", ["g0"], ["g1"]),
        helper.make_node("Add", ["g1", "one"], ["g2"]),
        helper.make_node("Mul", ["ff1", "g2"], ["g3"]),
        helper.make_node("Mul", ["g3", "half"], ["gelu"]),
    ]
    nodes += _linear("ff2", "gelu", 4 * hidden, hidden, inits)
    nodes += [
        helper.make_node("Add", ["ff2", "h1"], ["res2"]),
        helper.make_node(
            "LayerNormalization", ["res2", "ln2.weight", "ln2.bias"], ["y"], epsilon=1e-12
        ),
    ]
    inputs = [
        helper.make_tensor_value_info("x", F, ["batch", "seq", hidden]),
        helper.make_tensor_value_info("mask", F, ["batch", "seq"]),
    ]
    out = helper.make_tensor_value_info("y", F, ["batch", "seq", hidden])
    return _model(nodes, inputs, out, inits)


def test_bert_block_symbolic_sequence_two_lengths() -> None:
    model = _bert_model()
    mod, params = from_onnx(model)
    func = mod["forward"]
    assert [v.name for v in func.shape_vars()] == ["batch", "seq"]
    exe = tc.compile(mod, params=params)
    for seq in (5, 11):
        mask = np.ones((2, seq), np.float32)
        mask[1, seq - 2 :] = 0.0
        _check(model, {"x": _w(2, seq, 32, scale=1.0), "mask": mask}, exe=exe)


def _llama_mlp_model(hidden: int = 32, inter: int = 48) -> onnx.ModelProto:
    inits = {
        "two": np.array(2.0, np.float32),
        "eps": np.array(1e-6, np.float32),
        "norm.weight": (1 + _w(hidden)).astype(np.float32),
        "gate.weight": _w(hidden, inter),
        "up.weight": _w(hidden, inter),
        "down.weight": _w(inter, hidden),
        "axes": np.array([-1], np.int64),
    }
    nodes = [  # RMSNorm as exported: x * rsqrt(mean(x^2) + eps) * w
        helper.make_node("Pow", ["x", "two"], ["sq"]),
        helper.make_node("ReduceMean", ["sq", "axes"], ["ms"], keepdims=1),
        helper.make_node("Add", ["ms", "eps"], ["mse"]),
        helper.make_node("Sqrt", ["mse"], ["rms"]),
        helper.make_node("Reciprocal", ["rms"], ["inv"]),
        helper.make_node("Mul", ["x", "inv"], ["xn"]),
        helper.make_node("Mul", ["norm.weight", "xn"], ["h"]),
        helper.make_node("MatMul", ["h", "gate.weight"], ["gate"]),
        helper.make_node("Sigmoid", ["gate"], ["sig"]),
        helper.make_node("Mul", ["gate", "sig"], ["silu"]),
        helper.make_node("MatMul", ["h", "up.weight"], ["up"]),
        helper.make_node("Mul", ["silu", "up"], ["act"]),
        helper.make_node("MatMul", ["act", "down.weight"], ["down"]),
        helper.make_node("Add", ["x", "down"], ["y"]),
    ]
    inputs = [helper.make_tensor_value_info("x", F, [1, "seq", hidden])]
    out = helper.make_tensor_value_info("y", F, [1, "seq", hidden])
    return _model(nodes, inputs, out, inits, opset=18)


def test_llama_rmsnorm_silu_gated_mlp() -> None:
    model = _llama_mlp_model()
    mod, params = from_onnx(model)
    exe = tc.compile(mod, params=params)
    for seq in (3, 8):
        _check(model, {"x": _w(1, seq, 32, scale=1.0)}, exe=exe)


def test_shapes_override_makes_symbolic_static() -> None:
    model = _llama_mlp_model()
    mod, _ = from_onnx(model, shapes={"x": (1, 4, 32)})
    assert mod["forward"].params[0].type.static_shape() == (1, 4, 32)
    assert mod["forward"].shape_vars() == []
