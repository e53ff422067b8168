"""The models users bring, in plain PyTorch with random weights.

Each imports through ``torch.export`` with a dynamic batch or sequence dimension, compiles
once with ``tc.compile`` and matches torch eager at two sizes (1e-4 relative, fp32); each also
runs through ``torch.compile(backend="tilecraft")`` at two sizes, the same axis marked
dynamic (one symbolic compile). The models run at reduced width and, for the GPT-2 block, the
Llama block (prefill and KV-cache decode), the BERT-base layer and the ViT-B/16 patch
embedding plus block, at their real widths, and torchvision's ResNet-18 and MobileNetV2
whole on 224x224 images. Compiling them all takes minutes on a shared
two-core machine, so the full set is marked ``slow`` (``pytest -m slow``); the default run
keeps the regression tests, through ``tc.compile`` only."""

import pytest

torch = pytest.importorskip("torch")

import torch_models as tm  # noqa: E402

import tilecraft as tc  # noqa: E402
from tilecraft.frontend.torch import from_exported_program, tilecraft_backend  # noqa: E402

Dim = torch.export.Dim


def _close(out, ref):
    scale = float(ref.abs().max())
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4 * max(scale, 1e-6))


def _backend():
    # "tilecraft" once the package is installed (torch's backend entry point); else the function
    return "tilecraft" if "tilecraft" in torch._dynamo.list_backends() else tilecraft_backend


def _check(model, make, dynamic, sizes, backend=True):
    """Export with ``dynamic`` axes, compile once; then torch.compile; eager at each size."""
    marks = [(i, next(iter(d))) for i, d in enumerate(dynamic) if d]
    model.eval()
    ep = torch.export.export(model, make(sizes[0]), dynamic_shapes=dynamic)
    mod, params = from_exported_program(ep)
    exe = tc.compile(mod, params=params)
    assert list(mod.functions) == ["main"]  # one function, whatever the number of outputs
    torch._dynamo.reset()
    fast = torch.compile(model, backend=_backend()) if backend else model
    for n in sizes:
        args = make(n)
        for i, axis in marks:
            torch._dynamo.mark_dynamic(args[i], axis)
        with torch.no_grad():
            ref = model(*args)
            via = fast(*args)
        refs = ref if isinstance(ref, tuple) else (ref,)
        vias = via if isinstance(via, tuple) else (via,)
        got = exe["main"](*args)  # torch tensors in, torch tensors out
        gots = got if isinstance(got, tuple) else (got,)
        assert len(vias) == len(refs) == len(gots)
        for g, r, v in zip(gots, refs, vias, strict=True):
            _close(g, r)
            _close(v, r)


def _image(n):
    return (torch.randn(n, 3, 32, 32),)


@pytest.mark.slow
def test_gpt2_block_dynamic_sequence():
    torch.manual_seed(0)
    _check(tm.GPT2Block(), lambda s: (torch.randn(2, s, 32),), ({1: Dim("s", max=64)},), [8, 5])


@pytest.mark.slow
def test_llama_decode_with_kv_cache_dynamic_batch():
    torch.manual_seed(0)
    b = Dim("b", max=16)

    def make(n):
        return torch.randn(n, 1, 32), torch.randn(n, 2, 6, 8), torch.randn(n, 2, 6, 8)

    _check(tm.LlamaDecode(), make, ({0: b}, {0: b}, {0: b}), [2, 3])


@pytest.mark.slow
def test_bert_layer_multihead_attention_dynamic_batch():
    # regression: the sequence-first layout flattens (L, b, 32) to (L, 4 * b, 8) and
    # permutes it, which did not lower with a dynamic b
    torch.manual_seed(0)
    _check(tm.BertMHALayer(), lambda b: (torch.randn(6, b, 32),), ({1: Dim("b", max=16)},), [2, 3])


@pytest.mark.slow
def test_bert_layer_multihead_attention_dynamic_sequence():
    # regression: the output projection's matmul saw (2 * L, 32) with no L of its own
    torch.manual_seed(0)
    _check(tm.BertMHALayer(), lambda s: (torch.randn(s, 2, 32),), ({0: Dim("s", max=64)},), [6, 9])


@pytest.mark.slow
def test_vit_patch_embedding_and_block_dynamic_batch():
    torch.manual_seed(0)
    _check(tm.ViTPatchBlock(), _image, ({0: Dim("b", max=16)},), [2, 3])


@pytest.mark.slow
def test_resnet18_blocks_dynamic_batch():
    torch.manual_seed(0)
    model = tm.randomize_batch_norms(tm.ResNetStem())
    _check(model, _image, ({0: Dim("b", max=16)},), [2, 3])


@pytest.mark.slow
def test_mobilenet_v2_blocks_dynamic_batch():
    torch.manual_seed(0)
    model = tm.randomize_batch_norms(tm.MobileNetV2Blocks())
    _check(model, _image, ({0: Dim("b", max=16)},), [2, 3])


def test_multihead_attention_regression_dynamic_batch():
    # the sequence-first layout flattens (L, b, 32) to (L, 4 * b, 8) and permutes it, which
    # did not lower with a symbolic b (a symbolic L: the slow test above)
    torch.manual_seed(0)
    layer = tm.BertMHALayer(d=16, h=2, ff=16)
    _check(layer, lambda b: (torch.randn(3, b, 16),), ({1: Dim("b", max=8)},), [2, 3], False)


# The done-when models at their real widths: BERT-base, ViT-B/16 on 224x224 images, GPT-2
# (small), and a Llama block at TinyLlama's widths (2048 hidden, 32 query heads, 4 KV heads,
# 5632 intermediate), prefill and KV-cache decode.


@pytest.mark.slow
def test_bert_base_layer_dynamic_sequence():
    torch.manual_seed(0)
    model = tm.BertLayer(768, 12, 3072)
    make = lambda s: (torch.randn(2, s, 768),)  # noqa: E731
    _check(model, make, ({1: Dim("s", max=512)},), [16, 9])


@pytest.mark.slow
def test_vit_b16_patch_embedding_and_block_dynamic_batch():
    torch.manual_seed(0)
    model = tm.ViTPatchBlock(768, 224, 16, 12, 3072)
    make = lambda b: (torch.randn(b, 3, 224, 224),)  # noqa: E731
    _check(model, make, ({0: Dim("b", max=64)},), [2, 3])


@pytest.mark.slow
def test_gpt2_block_768_dynamic_sequence():
    torch.manual_seed(0)
    make = lambda s: (torch.randn(1, s, 768),)  # noqa: E731
    _check(tm.GPT2Block(768, 12), make, ({1: Dim("s", max=1024)},), [16, 7])


TINY_LLAMA = {"d": 2048, "h": 32, "kv": 4, "maxlen": 512, "ff": 5632}


@pytest.mark.slow
def test_llama_block_tinyllama_widths_prefill_dynamic_sequence():
    torch.manual_seed(0)
    make = lambda s: (torch.randn(1, s, 2048),)  # noqa: E731
    _check(tm.LlamaBlock(**TINY_LLAMA), make, ({1: Dim("s", max=512)},), [16, 7])


@pytest.mark.slow
def test_llama_block_tinyllama_widths_decode_kv_cache_dynamic_length():
    torch.manual_seed(0)
    model = tm.LlamaDecodeKV(**TINY_LLAMA)

    def make(p):
        kv = (1, 4, p, 64)
        return torch.randn(1, 1, 2048), torch.randn(kv), torch.randn(kv)

    auto = Dim.AUTO  # torch proves the cache's guards itself
    _check(model, make, (None, {2: auto}, {2: auto}), [37, 200])


# torchvision's ResNet-18 and MobileNetV2 whole (11,689,512 and 3,504,872 parameters, as
# torchvision's), written in plain PyTorch, on 224x224 images


def _image224(n):
    return (torch.randn(n, 3, 224, 224),)


@pytest.mark.slow
def test_resnet18_whole_dynamic_batch():
    torch.manual_seed(0)
    model = tm.randomize_batch_norms(tm.ResNet18())
    assert sum(p.numel() for p in model.parameters()) == 11_689_512
    _check(model, _image224, ({0: Dim("b", max=64)},), [2, 3])


@pytest.mark.slow
def test_mobilenet_v2_whole_dynamic_batch():
    torch.manual_seed(0)
    model = tm.randomize_batch_norms(tm.MobileNetV2())
    assert sum(p.numel() for p in model.parameters()) == 3_504_872
    _check(model, _image224, ({0: Dim("b", max=64)},), [2, 3])
