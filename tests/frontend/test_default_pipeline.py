"""The "default" pipeline on the tutorial models, the decoder and the CNN: weights read in place,
parameter-only work folded, numerics against numpy, inputs untouched."""

from __future__ import annotations

import numpy as np
import pytest
from test_nn_decoder_cnn import HIDDEN, DecoderLayer, SmallCNN, np_cnn, np_decoder, random_state
from test_nn_models import EXAMPLE, MetaScheduleModel

import tilecraft as tc
from tilecraft.frontend import nn
from tilecraft.graph import (
    BindParams,
    Constant,
    DeadCodeElimination,
    FoldConstants,
    GraphError,
    Legalize,
    get_pipeline,
)
from tilecraft.graph.ir import CallTIR


def _demo(batch: int = 1) -> tuple[tc.IRModule, dict[str, np.ndarray]]:
    model = EXAMPLE.DemoModel()
    model.load_state_dict(random_state(model, 3, 0.05))
    return model.export({"forward": {"x": nn.spec.Tensor((batch, 768), "float32")}})


def _metaschedule(batch: int) -> tuple[tc.IRModule, dict[str, np.ndarray]]:
    return MetaScheduleModel().export({"forward": {"x": nn.spec.Tensor((batch, 784), "float32")}})


def _np_metaschedule(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    h = np.maximum(x.astype(np.float64) @ p["fc1.weight"].T + p["fc1.bias"], 0)
    return h @ p["fc2.weight"].T


def _decoder() -> tuple[tc.IRModule, dict[str, np.ndarray]]:
    model = DecoderLayer()
    model.load_state_dict(random_state(model, 0, 0.05))
    return model.export({"forward": {"x": nn.spec.Tensor((1, "seq_len", HIDDEN))}})


def _kernels(mod: tc.IRModule) -> list[str]:
    return [b.value.func for b in mod["forward"].bindings if isinstance(b.value, CallTIR)]


def _weight_reads(mod: tc.IRModule, kernel: str, weight: str) -> list[str]:
    """The index lists ``weight`` is read with inside ``kernel``'s blocks."""
    text = mod[kernel].script()
    return sorted({line.split(f"{weight}[")[1].split("]")[0] for line in text.splitlines()
                   if f" {weight}[" in line and "T.reads" not in line})  # fmt: skip


def test_linear_weights_are_read_in_their_stored_layout() -> None:
    mod, _ = _demo()
    with tc.Target("cpu"):
        out = get_pipeline("default")(mod)
    assert _kernels(out) == ["fused_matmul_add_relu", "layer_norm", "fused_matmul1_add1"]
    assert not any(n.startswith("transpose") for n, _ in out.prim_funcs())
    # the matmul block is C[i, j] += A[i, k] * W[j, k]: W (out, in) indexed [j, k]
    assert _weight_reads(out, "fused_matmul_add_relu", "fc1_weight") == ["vi1, vk"]
    assert _weight_reads(out, "fused_matmul1_add1", "fc2_weight") == ["vi1, vk"]
    dec, _ = _decoder()
    names = {n for n, _ in get_pipeline("default")(dec).prim_funcs()}
    assert not any(n.startswith("transpose") for n in names)
    assert {n for n, _ in get_pipeline("zero")(dec).prim_funcs()} - names == {
        "transpose",
        "transpose1",
        "transpose2",
    }


@pytest.mark.parametrize("batch", [1, 64])
def test_tutorial_models_match_numpy_with_and_without_bound_params(batch: int) -> None:
    rng = np.random.default_rng(batch)
    for export, reference, width in (
        (_demo, EXAMPLE.reference, 768),
        (_metaschedule, _np_metaschedule, 784),
    ):
        mod, params = export(batch)
        x = rng.standard_normal((batch, width)).astype("float32")
        expected = reference(x, params)
        unbound = tc.build(get_pipeline("default")(mod), "cpu")["forward"]
        np.testing.assert_allclose(unbound(x, *params.values()), expected, rtol=1e-4, atol=1e-4)
        bound_mod = get_pipeline("default", params=params)(mod)
        assert [p.name for p in bound_mod["forward"].params] == ["x"]
        bound = tc.build(bound_mod, "cpu")["forward"]
        assert bound.native is not None
        np.testing.assert_allclose(bound(x), expected, rtol=1e-4, atol=1e-4)
        with pytest.raises(GraphError, match=r"forward: expected 1 arguments \(x\)"):
            bound(x, *params.values())


def test_decoder_with_bound_params_matches_numpy_at_several_lengths() -> None:
    mod, params = _decoder()
    out = get_pipeline("default", params=params)(mod)
    fwd = out["forward"]
    assert [p.name for p in fwd.params] == ["x"]
    assert fwd.params[0].type.describe() == "Tensor((1, seq_len, 512), float32)"
    f = tc.build(out, "cpu")["forward"]
    for seq_len in (1, 4, 9):
        x = np.random.default_rng(seq_len).standard_normal((1, seq_len, HIDDEN)).astype("float32")
        got = f(x)
        np.testing.assert_array_equal(got, f.run([x]))
        np.testing.assert_allclose(got, np_decoder(x, params), rtol=2e-3, atol=2e-3)


def test_cnn_through_the_default_pipeline_matches_numpy() -> None:
    mod, params = SmallCNN().export(
        {"forward": {"x": nn.spec.Tensor(("batch", 3, 16, 16))}}, seed=4
    )
    f = tc.build(get_pipeline("default", params=params)(mod), "cpu")["forward"]
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 3, 16, 16)).astype("float32")
        np.testing.assert_allclose(f(x), np_cnn(x, params), rtol=1e-4, atol=1e-4)


def test_folding_computes_parameter_only_kernels_once() -> None:
    """Without FuseTransposeMatmul, the legalized weight transposes read only constants."""
    mod, params = _demo()
    with tc.Target("cpu"):
        legal = Legalize()(BindParams(params)(mod))
    assert _kernels(legal).count("transpose") == 1
    folded = DeadCodeElimination()(FoldConstants()(legal))
    kinds = {b.var.name: type(b.value).__name__ for b in folded["forward"].bindings}
    # the two transposes became constants; the weights only they read are gone
    assert sorted(n for n, k in kinds.items() if k == "Constant") == [
        "fc1_bias",
        "fc2_bias",
        "norm_bias",
        "norm_weight",
        "permute_dims",
        "permute_dims1",
    ]
    assert _kernels(folded) == ["matmul", "add", "relu", "layer_norm", "matmul1", "add1"]
    assert not any(k.startswith("transpose") for k in _kernels(folded))
    assert not any(n.startswith("transpose") for n, _ in folded.prim_funcs())
    consts = {b.var.name: b.value for b in folded["forward"].bindings}
    np.testing.assert_array_equal(consts["permute_dims"].data, params["fc1.weight"].T)
    assert isinstance(consts["permute_dims"], Constant)
    x = np.random.default_rng(0).standard_normal((1, 768)).astype("float32")
    got = tc.build(folded, "cpu")["forward"](x)
    np.testing.assert_allclose(got, EXAMPLE.reference(x, params), rtol=1e-4, atol=1e-4)


def test_the_passes_leave_their_input_module_unchanged() -> None:
    mod, params = _decoder()
    before = mod.script()
    funcs = dict(mod.functions)
    with tc.Target("cpu"):
        get_pipeline("default", params=params)(mod)
        legal = Legalize()(BindParams(params)(mod))
    legal_text = legal.script()
    FoldConstants()(legal)
    assert legal.script() == legal_text
    assert mod.script() == before
    assert all(mod.functions[n] is f for n, f in funcs.items())
