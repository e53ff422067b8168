"""Programs with several outputs: one graph function returning a tuple, shared work once.

A Llama decode block whose KV cache length is symbolic returns ``(out, cat(k_cache, k),
cat(v_cache, v))`` with cache extent ``s + 1``: imported with ``torch.export``, compiled
with ``tc.compile`` and through ``torch.compile(backend="tilecraft")``, at two cache lengths.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import tilecraft as tc  # noqa: E402
from tilecraft.frontend.torch import from_exported_program  # noqa: E402
from tilecraft.graph.ir import CallTIR  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import torch_models as tm  # noqa: E402


class TwoHeads(torch.nn.Module):
    """A shared trunk and two heads: (logits, hidden)."""

    def __init__(self) -> None:
        super().__init__()
        self.trunk = torch.nn.Linear(16, 32)
        self.head = torch.nn.Linear(32, 4)

    def forward(self, x):
        hidden = torch.relu(self.trunk(x))
        return self.head(hidden), hidden


def test_two_outputs_are_one_function_computing_shared_work_once() -> None:
    torch.manual_seed(0)
    model = TwoHeads().eval()
    x = torch.randn(3, 16)
    ep = torch.export.export(model, (x,), dynamic_shapes=({0: torch.export.Dim("b", max=64)},))
    mod, params = from_exported_program(ep)
    assert list(mod.functions) == ["main"]
    main = mod["main"]
    assert main.returns_tuple
    assert [t.describe() for t in main.ret_types][1].endswith("32), float32)")
    trunk = [b for b in main.bindings if b.value.op in ("matmul", "linear", "dense")]
    assert len(trunk) == 2  # the trunk's matmul once, the head's once
    exe = tc.compile(mod, params=params)
    lowered = exe["main"].func
    calls = [b for b in lowered.bindings if isinstance(b.value, CallTIR)]
    assert len(calls) == len(exe["main"].program.steps) <= 3
    for n in (3, 7):
        x = torch.randn(n, 16)
        logits, hidden = exe["main"](x)
        with torch.no_grad():
            ref_logits, ref_hidden = model(x)
        torch.testing.assert_close(logits, ref_logits, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(hidden, ref_hidden, rtol=1e-4, atol=1e-5)


def _close(out, ref) -> None:
    scale = float(ref.abs().max())
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4 * max(scale, 1e-6))


def _decode(model, sizes, batch: int = 1) -> None:
    blk = model.blk

    def make(p):
        kv = (batch, blk.kv, p, blk.hd)
        return torch.randn(batch, 1, blk.h * blk.hd), torch.randn(kv), torch.randn(kv)

    auto = torch.export.Dim.AUTO  # torch proves the cache's guards itself (min of strides)
    ep = torch.export.export(model, make(sizes[0]), dynamic_shapes=(None, {2: auto}, {2: auto}))
    mod, params = from_exported_program(ep)
    main = mod["main"]
    assert main.returns_tuple
    cache = main.ret_types[1].shape[2]
    assert "+ 1" in tc.graph.ir.dim_text(cache)  # the grown cache: s + 1
    exe = tc.compile(mod, params=params)
    assert exe["main"].native is not None
    torch._dynamo.reset()
    fast = torch.compile(model, backend="tilecraft")
    for p in sizes:
        args = make(p)
        torch._dynamo.mark_dynamic(args[1], 2)
        torch._dynamo.mark_dynamic(args[2], 2)
        with torch.no_grad():
            ref = model(*args)
            via = fast(*args)
        got = exe["main"](*args)
        assert len(got) == len(via) == 3
        assert got[1].shape == (batch, blk.kv, p + 1, blk.hd)
        for g, v, r in zip(got, via, ref, strict=True):
            _close(g, r)
            _close(v, r)


def test_llama_decode_kv_cache_of_symbolic_length() -> None:
    torch.manual_seed(0)
    _decode(tm.LlamaDecodeKV().eval(), [6, 11])


@pytest.mark.slow
def test_llama_decode_kv_cache_of_symbolic_length_larger() -> None:
    torch.manual_seed(1)
    _decode(tm.LlamaDecodeKV(d=64, h=8, kv=2, maxlen=256).eval(), [37, 200], batch=2)
