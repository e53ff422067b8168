"""The done-when models exported with torch.onnx.export (TorchScript exporter, dynamic batch,
sequence or cache axes): imported with from_onnx, compiled once with tc.compile and matched
against onnxruntime at two sizes (fp32, 1e-4 relative).

The Llama block (prefill: RoPE, grouped-query heads by ``repeat_interleave``, which exports
as ``Tile``; decode: a KV cache of symbolic length, three outputs) and the ViT patch
embedding plus block (``nn.MultiheadAttention``'s shape arithmetic, a ``flatten(2)`` of a
symbolic batch) run at small width by default; the GPT-2 block, the Llama block at TinyLlama's
widths, BERT-base, ViT-B/16 on 224x224 images, the ResNet-18 and MobileNetV2 blocks and
both networks whole are ``slow``.
"""

from __future__ import annotations

import importlib.util
import io
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import tilecraft as tc  # noqa: E402
from tilecraft.frontend.onnx import from_onnx  # noqa: E402


def _torch_models():  # type: ignore[no-untyped-def]
    path = Path(__file__).parents[1] / "torch" / "torch_models.py"
    spec = importlib.util.spec_from_file_location("onnx_done_when_torch_models", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tm = _torch_models()
Make = Callable[[int], tuple[np.ndarray, ...]]


def _export(net, example, names, outputs, axes):  # type: ignore[no-untyped-def]
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            net, tuple(torch.from_numpy(a) for a in example), buf, dynamo=False,
            input_names=names, output_names=outputs, dynamic_axes=axes, opset_version=17,
        )  # fmt: skip
    return onnx.load_from_string(buf.getvalue())


def _check(net, make: Make, sizes, names, outputs, axes) -> None:  # type: ignore[no-untyped-def]
    """Export at ``sizes[0]``; one compile; tilecraft against onnxruntime at each size."""
    net.eval()
    model = _export(net, make(sizes[0]), names, outputs, axes)
    mod, params = from_onnx(model)
    want_vars = {v for a in axes.values() for v in a.values() if a}
    assert {v.name for v in mod["forward"].shape_vars()} <= want_vars
    exe = tc.compile(mod, params=params)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in sizes:
        feeds = make(n)
        wants = sess.run(None, dict(zip(names, feeds, strict=True)))
        got = exe(*feeds)
        gots = got if isinstance(got, tuple) else (got,)
        assert len(gots) == len(wants)
        for g, w in zip(gots, wants, strict=True):
            assert g.shape == w.shape
            scale = float(np.abs(w).max())
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * max(scale, 1e-6))


def _randn(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


SEQ = {0: "batch", 1: "seq"}
BATCH = {0: "batch"}


def _sequence(net, d: int, sizes) -> None:  # type: ignore[no-untyped-def]
    # batch and sequence both dynamic: (1, s) then (2, s') through one compile
    def make(s: int) -> tuple[np.ndarray, ...]:
        return (_randn(s, 1 + (s % 2), s, d),)

    _check(net, make, sizes, ["x"], ["y"], {"x": SEQ, "y": SEQ})


def _images(net, side: int, sizes) -> None:  # type: ignore[no-untyped-def]
    def make(b: int) -> tuple[np.ndarray, ...]:
        return (_randn(b, b, 3, side, side),)

    _check(net, make, sizes, ["x"], ["y"], {"x": BATCH, "y": BATCH})


def _decode(net, sizes) -> None:  # type: ignore[no-untyped-def]
    blk = net.blk

    def make(p: int) -> tuple[np.ndarray, ...]:
        kv = (1, blk.kv, p, blk.hd)
        return _randn(p, 1, 1, blk.h * blk.hd), _randn(p + 1, *kv), _randn(p + 2, *kv)

    past, total = {2: "past"}, {2: "total"}
    axes = {"k": past, "v": past, "k_out": total, "v_out": total}
    _check(net, make, sizes, ["x", "k", "v"], ["y", "k_out", "v_out"], axes)


def test_llama_block_prefill_tile_heads() -> None:
    # regression: repeat_interleave exports as Tile, which had no converter
    torch.manual_seed(0)
    _sequence(tm.LlamaBlock(), 32, [7, 12])


def test_llama_decode_kv_cache_of_symbolic_length() -> None:
    # regression: RoPE's cos[P:P + 1] is a slice of a weight starting at the cache length,
    # which only the cache brings into scope; it was folded as a constant and failed
    torch.manual_seed(0)
    _decode(tm.LlamaDecodeKV(), [6, 11])


def test_vit_patch_embedding_and_block_dynamic_batch() -> None:
    # regressions: nn.MultiheadAttention's shape arithmetic has a Mod of constants (not
    # folded at import), and flatten(2) of (batch, 32, 2, 2) computed its -1 as
    # (batch * 128) // (batch * 32), which did not simplify to 4
    torch.manual_seed(0)
    _images(tm.ViTPatchBlock(), 32, [2, 3])


@pytest.mark.slow
def test_resnet18_blocks_dynamic_batch() -> None:
    torch.manual_seed(0)
    _images(tm.randomize_batch_norms(tm.ResNetStem()), 32, [2, 3])


@pytest.mark.slow
def test_mobilenet_v2_blocks_dynamic_batch() -> None:
    torch.manual_seed(0)
    _images(tm.randomize_batch_norms(tm.MobileNetV2Blocks()), 32, [2, 3])


@pytest.mark.slow
def test_gpt2_block_768() -> None:
    torch.manual_seed(0)
    _sequence(tm.GPT2Block(768, 12), 768, [16, 7])


@pytest.mark.slow
def test_bert_base_layer() -> None:
    torch.manual_seed(0)
    _sequence(tm.BertLayer(768, 12, 3072), 768, [16, 9])


@pytest.mark.slow
def test_vit_b16_patch_embedding_and_block() -> None:
    torch.manual_seed(0)
    _images(tm.ViTPatchBlock(768, 224, 16, 12, 3072), 224, [2, 3])


TINY_LLAMA = {"d": 2048, "h": 32, "kv": 4, "maxlen": 512, "ff": 5632}


@pytest.mark.slow
def test_llama_block_tinyllama_widths_prefill() -> None:
    torch.manual_seed(0)
    _sequence(tm.LlamaBlock(**TINY_LLAMA), 2048, [16, 7])


@pytest.mark.slow
def test_llama_block_tinyllama_widths_decode() -> None:
    torch.manual_seed(0)
    _decode(tm.LlamaDecodeKV(**TINY_LLAMA), [37, 200])


def test_tile_over_a_symbolic_axis_matches_onnxruntime() -> None:
    from onnx import TensorProto, helper, numpy_helper

    reps = numpy_helper.from_array(np.array([2, 1, 3], np.int64), "reps")
    graph = helper.make_graph(
        [helper.make_node("Tile", ["x", "reps"], ["y"])],
        "tile",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m", 3, 6])],
        [reps],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    mod, params = from_onnx(model)
    assert mod["forward"].ret_type.describe() == "Tensor(((n * 2), 3, 6), float32)"
    exe = tc.compile(mod, params=params)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in (1, 4):
        x = _randn(n, n, 3, 2)
        np.testing.assert_array_equal(exe(x), sess.run(None, {"x": x})[0])


@pytest.mark.slow
def test_resnet18_whole() -> None:
    torch.manual_seed(0)
    _images(tm.randomize_batch_norms(tm.ResNet18()), 224, [2, 3])


@pytest.mark.slow
def test_mobilenet_v2_whole() -> None:
    torch.manual_seed(0)
    _images(tm.randomize_batch_norms(tm.MobileNetV2()), 224, [2, 3])
