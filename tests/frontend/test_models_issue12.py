"""The models of issue 12 (tests/models) through the zero and default pipelines vs numpy.

Small sizes run by default; the sizes of the issue (TinyLlama layer, BERT-base, ResNet-18
blocks) run under ``-m slow``.
"""

from __future__ import annotations

import importlib.util

import models
import numpy as np
import pytest
from models import llama
from models.common import ModelCase

import tilecraft as tc
from tilecraft.graph import get_pipeline

SMALL = {c.name: c for c in models.cases("small")}


def compile_default(case: ModelCase) -> tc.graph.Executable:
    """The default pipeline with bound weights, then build, no rules (tc.compile adds them)."""
    with tc.Target("cpu"):
        return tc.build(get_pipeline("default", params=case.params)(case.mod), "cpu")


def check(case: ModelCase, out: np.ndarray) -> None:
    want = case.expected()
    assert out.shape == want.shape
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, want, rtol=case.rtol, atol=case.atol, err_msg=case.name)


@pytest.mark.parametrize("name", list(SMALL))
def test_default_pipeline_with_bound_weights_matches_numpy(name: str) -> None:
    case = SMALL[name]
    check(case, compile_default(case)[case.entry](*case.inputs))


@pytest.mark.parametrize("name", ["llama_decode_small", "bert_layer_small", "resnet18_block_small"])
def test_zero_pipeline_with_weight_arguments_matches_numpy(name: str) -> None:
    case = SMALL[name]
    with tc.Target("cpu"):
        exe = tc.build(get_pipeline("zero")(case.mod), "cpu")
    check(case, exe[case.entry](*case.inputs, *case.params.values()))


def test_every_case_unpacks_and_names_its_entry() -> None:
    names = [c.name for c in models.cases("small")]
    assert len(names) == len(set(names)) == 9
    mod, params, inputs = SMALL["llama_decode_small"]
    assert list(mod.functions) == ["decode"]
    assert len(inputs) == 3
    assert [p.name for p in mod["decode"].params[:3]] == ["x", "past_k", "past_v"]
    assert list(params)[:2] == ["input_layernorm.weight", "self_attn.q_proj.weight"]


@pytest.fixture(scope="module")
def small_layer() -> tuple[llama.LlamaDecoderLayer, tc.graph.Executable, dict[str, np.ndarray]]:
    layer, mod, params = llama.export_layer(llama.SMALL, seed=3)
    with tc.Target("cpu"):
        exe = tc.build(get_pipeline("default", params=params)(mod), "cpu")
    return layer, exe, params


def test_prefill_has_a_symbolic_length(small_layer) -> None:  # type: ignore[no-untyped-def]
    _, exe, params = small_layer
    cfg = llama.SMALL
    for n in (1, 4, 9):
        (x,) = llama.example_inputs(cfg, "prefill", seed=n, tokens=n)
        out = exe["prefill"](x)
        np.testing.assert_allclose(out, llama.np_layer(x, params, cfg), rtol=2e-3, atol=2e-3)


def test_decode_continues_prefill_through_the_returned_cache(small_layer) -> None:  # type: ignore[no-untyped-def]
    # prefill of P + 1 tokens == prefill of P tokens, then decode of token P with their k/v
    _, exe, _ = small_layer
    cfg = llama.SMALL
    (x,) = llama.example_inputs(cfg, "prefill", seed=7, tokens=cfg.past + 1)
    whole = exe["prefill"](x)
    _, past_k, past_v = llama.unpack(exe["prefill"](x[:, : cfg.past].copy()), cfg)
    step = exe["decode"](x[:, cfg.past :].copy(), past_k.copy(), past_v.copy())
    np.testing.assert_allclose(step[:, 0], whole[:, -1], rtol=1e-4, atol=1e-4)
    hidden, k, v = llama.unpack(step, cfg)
    assert hidden.shape == (1, 1, cfg.hidden)
    assert k.shape == v.shape == (1, cfg.kv_heads, 1, cfg.head_dim)
    _, k_all, _ = llama.unpack(whole, cfg)
    np.testing.assert_allclose(k[:, :, 0], k_all[:, :, -1], rtol=1e-4, atol=1e-4)


def test_decode_of_several_tokens_masks_causally_after_the_cache() -> None:
    cfg = llama.SMALL
    layer, _, params = llama.export_layer(cfg, seed=4, entries=())
    mod, _ = layer.export({"decode": llama.specs(cfg, decode_tokens=3)["decode"]})
    with tc.Target("cpu"):
        exe = tc.build(get_pipeline("default", params=params)(mod), "cpu")
    x, past_k, past_v = llama.example_inputs(cfg, "decode", seed=5, tokens=3)
    want = llama.np_layer(x, params, cfg, (past_k, past_v))
    np.testing.assert_allclose(exe["decode"](x, past_k, past_v), want, rtol=2e-3, atol=2e-3)


def test_symbolic_cache_length_is_refused_with_a_frontend_error() -> None:
    cfg = llama.SMALL
    layer = llama.LlamaDecoderLayer(cfg)
    cache = tc.frontend.nn.spec.Tensor((1, cfg.kv_heads, "past", cfg.head_dim))
    x = tc.frontend.nn.spec.Tensor((1, 1, cfg.hidden))
    with pytest.raises(tc.frontend.nn.FrontendError, match="KV cache length must be static"):
        layer.export({"decode": {"x": x, "past_k": cache, "past_v": cache}})


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
@pytest.mark.parametrize("name", list(SMALL))
def test_torch_reference_computes_the_same_function(name: str) -> None:
    import torch
    from models import torch_ref

    case = SMALL[name]
    fn, inputs = torch_ref.for_case(case)
    with torch.no_grad():
        check(case, fn(*inputs).numpy())


@pytest.mark.slow
@pytest.mark.parametrize("name", [c.name for c in models.cases("full")])
def test_full_size_models_match_numpy(name: str) -> None:
    case = next(c for c in models.cases("full") if c.name == name)
    check(case, compile_default(case)[case.entry](*case.inputs))


def test_exported_layer_round_trips_through_script_and_json() -> None:
    # the new attributes (layout, offset=None) and the frontend's constants print and parse
    _, mod, _ = llama.export_layer(llama.SMALL, seed=0)
    assert tc.ir.structural_equal(tc.script.parse(mod.script()), mod)
    assert tc.ir.structural_equal(tc.ir.from_json(tc.ir.to_json(mod)), mod)
