"""More ONNX operators against onnxruntime: math, reductions, Range, Pad, window geometry,
1-D windows, layer norm over several axes, models with several outputs."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft as tc  # noqa: E402
from tilecraft.frontend.onnx import from_onnx  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _info(name: str, shape: list[int | str | None], dtype: int = F):  # type: ignore[no-untyped-def]
    return helper.make_tensor_value_info(name, dtype, shape)


def _model(nodes, inputs, outputs, inits=None, opset=17):  # type: ignore[no-untyped-def]
    inits = inits or {}
    graph = helper.make_graph(
        nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits.items()]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    return model


def _ints(*v: int) -> np.ndarray:
    return np.array(v, np.int64)


def _check_all(model, sizes, make, rtol=1e-5, atol=1e-5):  # type: ignore[no-untyped-def]
    """Every output of ``model`` (one function returning them) against onnxruntime."""
    mod, params = from_onnx(model)
    assert list(mod.functions) == ["forward"]
    assert mod["forward"].returns_tuple == (len(model.graph.output) > 1)
    exe = tc.compile(mod, params=params)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for size in sizes:
        feeds = make(size)
        want = sess.run(None, feeds)
        outs = exe["forward"](*feeds.values())
        outs = outs if isinstance(outs, tuple) else (outs,)
        for got, w, out in zip(outs, want, model.graph.output, strict=True):
            assert got.shape == w.shape, (out.name, got.shape, w.shape)
            np.testing.assert_allclose(got, w, rtol=rtol, atol=atol, err_msg=out.name)
    return mod


def _normal(seed: int, *shape: int, scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def test_unary_math_and_activations_one_function_for_all_outputs() -> None:
    ops = [
        ("Log", {}), ("Abs", {}), ("Neg", {}), ("Exp", {}), ("Floor", {}), ("Ceil", {}),
        ("HardSwish", {}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
        ("LeakyRelu", {"alpha": 0.1}), ("Softplus", {}), ("Sign", {}), ("Identity", {}),
    ]  # fmt: skip
    nodes = [helper.make_node("Abs", ["x"], ["ax"])]
    for i, (op, attrs) in enumerate(ops):
        nodes.append(helper.make_node(op, ["ax" if op == "Log" else "x"], [f"y{i}"], **attrs))
    outs = [_info(f"y{i}", ["b", 7]) for i in range(len(ops))]
    mod = _check_all(
        _model(nodes, [_info("x", ["b", 7])], outs),
        (3, 5),
        lambda b: {"x": _normal(b, b, 7, scale=3)},
    )
    assert mod["forward"].attrs["num_input"] == 1
    assert len(mod["forward"].rets) == len(ops)


def test_reductions_argmax_and_log_softmax() -> None:
    nodes = [
        helper.make_node("ReduceSum", ["x", "a1"], ["s"], keepdims=0),
        helper.make_node("ReduceMax", ["x", "a2"], ["mx"]),
        helper.make_node("ReduceMin", ["x", "a12"], ["mn"], keepdims=0),
        helper.make_node("ReduceProd", ["x", "a2"], ["pr"], keepdims=0),
        helper.make_node("ReduceL2", ["x", "a2"], ["l2"], keepdims=0),
        helper.make_node("ArgMax", ["x"], ["am"], axis=1, keepdims=0),
        helper.make_node("ArgMin", ["x"], ["an"], axis=-1),
        helper.make_node("LogSoftmax", ["x"], ["ls"], axis=1),
    ]
    outs = [
        _info("s", ["b", 5]), _info("mx", ["b", 4, 1]), _info("mn", ["b"]), _info("pr", ["b", 4]),
        _info("l2", ["b", 4]), _info("am", ["b", 5], I64), _info("an", ["b", 4, 1], I64),
        _info("ls", ["b", 4, 5]),
    ]  # fmt: skip
    inits = {"a1": _ints(1), "a2": _ints(-1), "a12": _ints(1, 2)}
    model = _model(nodes, [_info("x", ["b", 4, 5])], outs, inits, opset=18)
    _check_all(model, (2, 3), lambda b: {"x": _normal(b, b, 4, 5)})


def test_range_to_a_symbolic_limit() -> None:
    nodes = [
        helper.make_node("Shape", ["x"], ["shp"]),
        helper.make_node("Gather", ["shp", "one"], ["n"]),
        helper.make_node("Range", ["zero", "n", "one"], ["pos"]),
        helper.make_node("Cast", ["pos"], ["posf"], to=F),
        helper.make_node("Add", ["x", "posf"], ["y"]),
        helper.make_node("Range", ["one", "n", "two"], ["odd"]),
    ]
    inits = {"zero": np.array(0, np.int64), "one": np.array(1, np.int64)}
    inits["two"] = np.array(2, np.int64)
    outs = [_info("y", ["b", "n"]), _info("odd", [None], I64)]
    model = _model(nodes, [_info("x", ["b", "n"])], outs, inits)
    _check_all(model, ((2, 6), (3, 9)), lambda s: {"x": _normal(s[1], *s)})


def test_constant_pad_with_negative_pads() -> None:
    nodes = [
        helper.make_node("Pad", ["x", "p", "v"], ["y"]),
        helper.make_node("Pad", ["x", "crop"], ["z"]),
        helper.make_node("Pad", ["x", "p2", "", "ax"], ["w"]),
    ]
    inits = {
        "p": _ints(0, 1, 2, 0, 0, 2, 1, 0),
        "v": np.array(0.5, np.float32),
        "crop": _ints(0, 0, -1, 1, 0, 0, 0, -2),
        "p2": _ints(1, 3),
        "ax": _ints(-1),
    }
    outs = [_info("y", ["b", 5, 9, 5]), _info("z", ["b", 2, 5, 4]), _info("w", ["b", 2, 6, 9])]
    model = _model(nodes, [_info("x", ["b", 2, 6, 5])], outs, inits, opset=18)
    _check_all(model, (1, 2), lambda b: {"x": _normal(b, b, 2, 6, 5)})


def test_pooling_ceil_mode_asymmetric_pads_and_auto_pad() -> None:
    w = _normal(0, 4, 3, 3, 3, scale=0.3)
    nodes = [
        helper.make_node("MaxPool", ["x"], ["m1"], kernel_shape=[3, 3], strides=[2, 2],
                         pads=[0, 1, 1, 0], ceil_mode=1),
        helper.make_node("AveragePool", ["x"], ["a1"], kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1),
        helper.make_node("AveragePool", ["x"], ["a2"], kernel_shape=[2, 3], strides=[2, 1],
                         pads=[1, 0, 0, 1], count_include_pad=0),
        helper.make_node("AveragePool", ["x"], ["a3"], kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 0, 1, 2], count_include_pad=1),
        helper.make_node("AveragePool", ["x"], ["a4"], kernel_shape=[2, 2], strides=[2, 2],
                         ceil_mode=1, count_include_pad=1),
        helper.make_node("MaxPool", ["x"], ["m2"], kernel_shape=[3, 2], strides=[2, 2],
                         auto_pad="SAME_UPPER"),
        helper.make_node("Conv", ["x", "w"], ["c1"], kernel_shape=[3, 3], strides=[2, 2],
                         auto_pad="SAME_LOWER"),
        helper.make_node("Conv", ["x", "w"], ["c2"], pads=[0, 1, 2, 0]),
    ]  # fmt: skip
    outs = [_info(n, ["b", 3, None, None]) for n in ("m1", "a1", "a2", "a3", "a4", "m2")]
    outs += [_info(n, ["b", 4, None, None]) for n in ("c1", "c2")]
    model = _model(nodes, [_info("x", ["b", 3, 9, 10])], outs, {"w": w})
    _check_all(model, (1, 2), lambda b: {"x": _normal(b, b, 3, 9, 10)})


def test_conv1d_and_pool1d_over_a_symbolic_length() -> None:
    inits = {"w": _normal(1, 6, 2, 3, scale=0.3), "bias": _normal(2, 6)}
    nodes = [
        helper.make_node("Conv", ["x", "w", "bias"], ["c"], group=2, pads=[1, 3], dilations=[2]),
        helper.make_node("AveragePool", ["x"], ["a"], kernel_shape=[3], pads=[1, 1]),
        helper.make_node("MaxPool", ["x"], ["m"], kernel_shape=[2], auto_pad="SAME_UPPER"),
    ]
    outs = [_info("c", ["b", 6, "n"]), _info("a", ["b", 4, "n"]), _info("m", ["b", 4, "n"])]
    model = _model(nodes, [_info("x", ["b", 4, "n"])], outs, inits)
    _check_all(model, ((1, 7), (2, 12)), lambda s: {"x": _normal(s[1], s[0], 4, s[1])})


def test_layer_normalization_over_several_axes() -> None:
    inits = {"g": _normal(3, 4, 5), "bb": _normal(4, 4, 5), "g3": _normal(5, 3, 4, 5)}
    nodes = [
        helper.make_node("LayerNormalization", ["x", "g", "bb"], ["y"], axis=-2),
        helper.make_node("LayerNormalization", ["x", "g3"], ["z"], axis=1, epsilon=1e-3),
    ]
    outs = [_info("y", ["b", 3, 4, 5]), _info("z", ["b", 3, 4, 5])]
    model = _model(nodes, [_info("x", ["b", 3, 4, 5])], outs, inits)
    _check_all(model, (1, 3), lambda b: {"x": _normal(b, b, 3, 4, 5)}, rtol=1e-4, atol=1e-4)


def test_trilu_over_symbolic_extents() -> None:
    nodes = [
        helper.make_node("Trilu", ["x", "k1"], ["u"]),
        helper.make_node("Trilu", ["x", "km1"], ["lo"], upper=0),
        helper.make_node("Trilu", ["x"], ["u0"]),
    ]
    inits = {"k1": np.array(1, np.int64), "km1": np.array(-1, np.int64)}
    outs = [_info(n, ["b", "m", "n"]) for n in ("u", "lo", "u0")]
    model = _model(nodes, [_info("x", ["b", "m", "n"])], outs, inits)
    _check_all(model, ((1, 4, 6), (2, 5, 3)), lambda s: {"x": _normal(s[2], *s)})


def test_slices_with_negative_steps_and_symbolic_bounds() -> None:
    big, small = 2**63 - 1, -(2**63)
    nodes = [
        helper.make_node("Slice", ["x", "s0", "e0", "a2", "m2"], ["rev2"]),  # x[..., ::-2]
        helper.make_node("Slice", ["x", "m1", "lo", "a1", "m1"], ["rev"]),  # x[:, ::-1]
        helper.make_node("Slice", ["x", "one", "m1", "a1", "two"], ["odd"]),  # x[:, 1:-1:2]
        helper.make_node("Slice", ["x", "one", "hi", "a1"], ["tail"]),  # x[:, 1:]
    ]
    inits = {
        "s0": _ints(-2), "e0": _ints(small), "a2": _ints(2), "m2": _ints(-2), "m1": _ints(-1),
        "lo": _ints(small), "a1": _ints(1), "one": _ints(1), "two": _ints(2), "hi": _ints(big),
    }  # fmt: skip
    outs = [_info(n, ["b", None, None]) for n in ("rev2", "rev", "odd", "tail")]
    model = _model(nodes, [_info("x", ["b", "n", 7])], outs, inits)
    _check_all(model, ((1, 6), (2, 9)), lambda s: {"x": _normal(s[1], s[0], s[1], 7)})
