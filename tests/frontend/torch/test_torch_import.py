"""torch.export programs imported, compiled with tc.compile, compared with torch eager."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch_models import MLP, BertLayer, ConvNet, GPT2Block, LlamaBlock  # noqa: E402

import tilecraft as tc  # noqa: E402
from tilecraft.frontend.torch import (  # noqa: E402
    UnsupportedOpsError,
    from_exported_program,
)

Dim = torch.export.Dim


def _check(model, example, dynamic, sizes):
    """Export with one dynamic axis, compile once, match eager at every size."""
    torch.manual_seed(0)
    model.eval()
    axis = next(iter(dynamic))
    ep = torch.export.export(model, (example,), dynamic_shapes=({axis: dynamic[axis]},))
    mod, params = from_exported_program(ep)
    exe = tc.compile(mod, params=params)
    for n in sizes:
        shape = list(example.shape)
        shape[axis] = n
        x = torch.randn(*shape)
        with torch.no_grad():
            ref = model(x).numpy()
        out = np.asarray(exe["main"](x.numpy()))
        assert out.shape == ref.shape
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    return mod


def test_mlp_dynamic_batch():
    mod = _check(MLP(), torch.randn(4, 16), {0: Dim("b", max=64)}, [4, 7])
    (bounds,) = mod["main"].attrs["tc.shape_bounds"].values()
    assert bounds[1] == 64  # torch's range constraint kept as the shape variable's bound


def test_gpt2_block_dynamic_sequence():
    _check(GPT2Block(), torch.randn(2, 8, 32), {1: Dim("s", max=64)}, [8, 5])


@pytest.mark.slow  # the default run imports Llama decode with a KV cache (test_torch_multi_output)
def test_llama_block_dynamic_sequence():
    _check(LlamaBlock(), torch.randn(2, 8, 32), {1: Dim("s", max=64)}, [8, 5])


def test_bert_layer_dynamic_batch():
    _check(BertLayer(), torch.randn(2, 8, 32), {0: Dim("b", max=64)}, [2, 3])


def test_conv_net_with_batch_norm_dynamic_batch():
    model = ConvNet()
    with torch.no_grad():  # batch-norm statistics that are not the identity
        for bn in (model.b1, model.b2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 1.5)
    _check(model, torch.randn(2, 3, 16, 16), {0: Dim("b", max=64)}, [2, 3])


class _Unsupported(torch.nn.Module):
    def forward(self, x):
        y = torch.fft.rfft(x).abs().sum() + x + torch.nonzero(x > 0).sum()
        return y + torch.linalg.det(y[:, :4])


def test_every_unsupported_op_in_one_error():
    ep = torch.export.export(_Unsupported(), (torch.randn(4, 8),))
    with pytest.raises(UnsupportedOpsError) as info:
        from_exported_program(ep)
    missing = info.value.missing
    assert {"aten::_linalg_det"} <= set(missing)
    assert "aten::nonzero" not in missing  # converted (a data-dependent row count)
    assert all(places for places in missing.values())  # each with where it occurs
    assert "aten::_fft_r2c" not in missing  # complex values are supported
    assert "aten::_linalg_det" in str(info.value)


def test_scalars_comparisons_and_where():
    class M(torch.nn.Module):
        def forward(self, x):
            y = torch.where(x > 0.5, x * 2.0, 1 - x) / 3
            return torch.clamp(y, -0.2, 0.7) + x.abs().sqrt().amax(-1, keepdim=True)

    _check(M(), torch.randn(3, 8), {0: Dim("b", max=16)}, [3, 5])


def test_slice_starting_at_a_symbolic_extent():
    # the start names n, which the sliced buffer's shape does not hold: the kernel gets a
    # tensor that brings n into scope (a rotary table read at the cache position)
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("table", torch.randn(32, 8))

        def forward(self, x):
            n = x.shape[0]
            return x + self.table[n : n + 1]

    _check(M(), torch.randn(3, 8), {0: Dim("n", max=16)}, [3, 6])
