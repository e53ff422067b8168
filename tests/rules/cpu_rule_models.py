"""Small models whose kernels every CPU rule is tested on (through the "zero" pipeline).

``model_kernels()`` maps ``"<model>/<kernel>"`` to the PrimFunc, for: the reference tutorial's
model (examples/quickstart_model.py), a BERT-like encoder layer, a Llama-style decoder layer
(RMSNorm, rotary, causal softmax attention, SiLU-gated MLP, residual adds) with a symbolic
sequence length, and a ResNet-18-like basic block (conv2d, batch-norm-like scale and shift,
ReLU, residual add, max and global-average pooling).
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import tilecraft as tc
from tilecraft.frontend import nn
from tilecraft.frontend.nn import functional as F  # noqa: N812
from tilecraft.graph import get_pipeline

HIDDEN, HEADS, FFN = 64, 4, 96
HEAD_DIM = HIDDEN // HEADS


def _quickstart_model() -> nn.Module:
    path = Path(__file__).resolve().parents[2] / "examples" / "quickstart_model.py"
    spec = importlib.util.spec_from_file_location("quickstart_model_for_rules", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.DemoModel()  # type: ignore[no-any-return]


class SelfAttention(nn.Module):
    def __init__(self, causal: bool) -> None:
        self.q_proj = nn.Linear(HIDDEN, HIDDEN, bias=not causal)
        self.k_proj = nn.Linear(HIDDEN, HIDDEN, bias=not causal)
        self.v_proj = nn.Linear(HIDDEN, HIDDEN, bias=not causal)
        self.o_proj = nn.Linear(HIDDEN, HIDDEN, bias=not causal)
        self.causal = causal

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        b, s, _ = x.shape
        q = self.q_proj(x).reshape(b, s, HEADS, HEAD_DIM)
        k = self.k_proj(x).reshape(b, s, HEADS, HEAD_DIM)
        if self.causal:
            q, k = F.rotary(q), F.rotary(k)
        v = self.v_proj(x).reshape(b, s, HEADS, HEAD_DIM)
        return self.o_proj(F.attention(q, k, v, causal=self.causal).reshape(b, s, HIDDEN))


class EncoderLayer(nn.Module):
    """BERT-like: post-norm attention and GELU MLP blocks with residual adds."""

    def __init__(self) -> None:
        self.attn = SelfAttention(causal=False)
        self.norm1 = nn.LayerNorm(HIDDEN)
        self.fc1 = nn.Linear(HIDDEN, FFN)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(FFN, HIDDEN)
        self.norm2 = nn.LayerNorm(HIDDEN)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        x = self.norm1(x + self.attn(x))
        return self.norm2(x + self.fc2(self.act(self.fc1(x))))


class DecoderLayer(nn.Module):
    """Llama-style: pre-norm RMSNorm, rotary causal attention, SiLU-gated MLP."""

    def __init__(self) -> None:
        self.input_layernorm = nn.RMSNorm(HIDDEN)
        self.self_attn = SelfAttention(causal=True)
        self.post_attention_layernorm = nn.RMSNorm(HIDDEN)
        self.gate_proj = nn.Linear(HIDDEN, FFN, bias=False)
        self.up_proj = nn.Linear(HIDDEN, FFN, bias=False)
        self.down_proj = nn.Linear(FFN, HIDDEN, bias=False)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        x = x + self.self_attn(self.input_layernorm(x))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class BasicBlock(nn.Module):
    """ResNet-18-like: conv-bn-relu, conv-bn, residual add, relu, then max and mean pooling."""

    def __init__(self, channels: int = 8) -> None:
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        shape = (1, channels, 1, 1)
        self.scale1 = nn.Parameter(shape, "float32", "uniform", 1.0)
        self.shift1 = nn.Parameter(shape, "float32", "uniform", 1.0)
        self.scale2 = nn.Parameter(shape, "float32", "uniform", 1.0)
        self.shift2 = nn.Parameter(shape, "float32", "uniform", 1.0)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        h = F.relu(F.add(F.multiply(self.conv1(x), self.scale1), self.shift1))
        h = F.add(F.multiply(self.conv2(h), self.scale2), self.shift2)
        h = F.relu(F.add(h, x))
        h = F.max_pool2d(h, 2)
        return F.mean(h, axis=(2, 3))


def _kernels(name: str, mod: tc.IRModule) -> dict[str, tc.ir.PrimFunc]:
    return {f"{name}/{fn}": func for fn, func in mod.prim_funcs()}


@functools.cache
def model_kernels() -> dict[str, tc.ir.PrimFunc]:
    """Every kernel of the four models, by ``"<model>/<kernel>"``."""
    seq = nn.spec.Tensor((1, "seq_len", HIDDEN), "float32")
    models = [
        ("quickstart", _quickstart_model(), nn.spec.Tensor((1, 768), "float32")),
        ("bert", EncoderLayer(), nn.spec.Tensor((2, 10, HIDDEN), "float32")),
        ("llama", DecoderLayer(), seq),
        ("resnet", BasicBlock(), nn.spec.Tensor(("batch", 8, 10, 10), "float32")),
    ]
    out: dict[str, tc.ir.PrimFunc] = {}
    with tc.Target("cpu"):
        for name, model, spec in models:
            mod, _ = model.export({"forward": {"x": spec}})
            out.update(_kernels(name, get_pipeline("zero")(mod)))
    return out
