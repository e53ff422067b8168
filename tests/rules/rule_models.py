"""Models whose kernels the rule tests schedule: the tutorials', BERT-, Llama- and ResNet-like.

Sizes are small so every kernel builds and runs in the default test run; the shapes (and so the
kernel kinds: batch-1 GEMVs, matmuls with fused epilogues, batched matmuls, conv2d) are those
of the full-size models.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

import tilecraft as tc
from tilecraft.frontend import nn
from tilecraft.frontend.nn import functional as F  # noqa: N812
from tilecraft.graph import get_pipeline
from tilecraft.ir import IRModule

ROOT = Path(__file__).resolve().parents[2]


def quickstart_model() -> type[nn.Module]:
    """The reference tutorial's DemoModel, from examples/quickstart_model.py."""
    spec = importlib.util.spec_from_file_location("quickstart_model", ROOT / "examples" /
                                                  "quickstart_model.py")  # fmt: skip
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.DemoModel  # type: ignore[no-any-return]


class TutorialMLP(nn.Module):
    """The MetaSchedule tutorial's model: 784 -> 256 Linear + ReLU, 256 -> 10 without bias."""

    def __init__(self) -> None:
        self.fc1 = nn.Linear(784, 256)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(256, 10, bias=False)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.fc2(self.relu(self.fc1(x)))


class BertLayer(nn.Module):
    """A BERT-base-like encoder layer (post-norm, GELU MLP), at a reduced hidden size."""

    def __init__(self, hidden: int = 64, heads: int = 4, ffn: int = 128) -> None:
        self.hidden, self.heads = hidden, heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, hidden)
        self.norm1 = nn.LayerNorm(hidden)
        self.up = nn.Linear(hidden, ffn)
        self.act = nn.GELU()
        self.down = nn.Linear(ffn, hidden)
        self.norm2 = nn.LayerNorm(hidden)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        b, s, _ = x.shape
        d = self.hidden // self.heads

        def heads(t: nn.Tensor) -> nn.Tensor:
            return t.reshape(b, s, self.heads, d)

        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        ctx = F.attention(q, k, v).reshape(b, s, self.hidden)
        x = self.norm1(x + self.out(ctx))
        return self.norm2(x + self.down(self.act(self.up(x))))


class LlamaLayer(nn.Module):
    """A Llama-style decoder layer: RMSNorm, rotary attention, SiLU-gated MLP (reduced)."""

    def __init__(self, hidden: int = 64, heads: int = 4, ffn: int = 96) -> None:
        self.hidden, self.heads = hidden, heads
        self.input_layernorm = nn.RMSNorm(hidden)
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, hidden, bias=False)
        self.v_proj = nn.Linear(hidden, hidden, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)
        self.post_attention_layernorm = nn.RMSNorm(hidden)
        self.gate_proj = nn.Linear(hidden, ffn, bias=False)
        self.up_proj = nn.Linear(hidden, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, hidden, bias=False)
        self.act = nn.SiLU()

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        b, s, _ = x.shape
        d = self.hidden // self.heads
        h = self.input_layernorm(x)
        q = F.rotary(self.q_proj(h).reshape(b, s, self.heads, d))
        k = F.rotary(self.k_proj(h).reshape(b, s, self.heads, d))
        v = self.v_proj(h).reshape(b, s, self.heads, d)
        x = x + self.o_proj(F.attention(q, k, v, causal=True).reshape(b, s, self.hidden))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(self.act(self.gate_proj(h)) * self.up_proj(h))


class BasicBlock(nn.Module):
    """A ResNet-18 basic block: conv3x3-ReLU-conv3x3, identity residual, ReLU."""

    def __init__(self, channels: int = 16) -> None:
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.relu(x + self.conv2(self.relu(self.conv1(x))))


MODELS: dict[str, tuple[type[nn.Module] | None, tuple[int | str, ...]]] = {
    "quickstart_b1": (None, (1, 768)),
    "quickstart_b64": (None, (64, 768)),
    "mlp_b1": (TutorialMLP, (1, 784)),
    "mlp_b64": (TutorialMLP, (64, 784)),
    "bert": (BertLayer, (2, 12, 64)),
    "llama_prefill": (LlamaLayer, (1, "seq_len", 64)),
    "llama_decode": (LlamaLayer, (1, 1, 64)),
    "resnet_block": (BasicBlock, (1, 16, 14, 14)),
}
"""Model name -> (class, None for the quickstart's DemoModel; input shape)."""


def model_module(name: str) -> IRModule:
    """The lowered module of one of :data:`MODELS`."""
    return model_and_params(name)[0]


def model_and_params(name: str) -> tuple[IRModule, dict[str, np.ndarray]]:
    """The lowered module of one of :data:`MODELS` and its (seeded) parameters."""
    cls, shape = MODELS[name]
    model = (cls or quickstart_model())()
    mod, params = model.export({"forward": {"x": nn.spec.Tensor(shape, "float32")}}, seed=0)
    with tc.Target("cpu"):
        return get_pipeline("zero")(mod), params
