"""A ViT-Base encoder block: pre-norm, biased attention projections, GELU (erf) MLP.

``forward(x)``: ``x`` is ``(1, tokens, hidden)`` (197 tokens: 14x14 patches and the class
token); ``h = x + attn(LN1(x)); out = h + W2 gelu(W1 LN2(h))`` as timm's ``Block`` (LayerNorm
eps 1e-6, no layer scale, no dropout). The attention is BERT's (:class:`.bert.SelfAttention`:
query/key/value/dense with biases), the sizes ViT-Base's: hidden 768, 12 heads, MLP 3072.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from tilecraft.frontend import nn

from .bert import BertConfig, SelfAttention
from .common import ModelCase, export_case, f64, np_layer_norm, np_softmax


@dataclass(frozen=True)
class ViTConfig:
    """Sizes of one block and of its input."""

    hidden: int = 768
    heads: int = 12
    mlp: int = 3072
    eps: float = 1e-6
    tokens: int = 197

    def attention(self) -> BertConfig:
        """The attention's sizes, as :class:`.bert.BertConfig`."""
        return BertConfig(hidden=self.hidden, heads=self.heads, seq=self.tokens)


VIT_BASE = ViTConfig()
SMALL = ViTConfig(hidden=64, heads=4, mlp=128, tokens=5)


class ViTBlock(nn.Module):
    """Pre-norm transformer block."""

    def __init__(self, cfg: ViTConfig = VIT_BASE) -> None:
        self.cfg = cfg
        self.norm1 = nn.LayerNorm(cfg.hidden, eps=cfg.eps)
        self.attn = SelfAttention(cfg.attention())
        self.norm2 = nn.LayerNorm(cfg.hidden, eps=cfg.eps)
        self.fc1 = nn.Linear(cfg.hidden, cfg.mlp)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(cfg.mlp, cfg.hidden)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        """One block."""
        h = x + self.attn(self.norm1(x))
        return h + self.fc2(self.act(self.fc1(self.norm2(h))))


def np_vit(x: np.ndarray, p: Mapping[str, np.ndarray], cfg: ViTConfig) -> np.ndarray:
    """The block in float64."""
    from math import erf

    x = f64(x)
    b, s, _ = x.shape
    d = cfg.hidden // cfg.heads

    def lin(name: str, t: np.ndarray) -> np.ndarray:
        return t @ f64(p[f"{name}.weight"]).T + f64(p[f"{name}.bias"])

    def norm(name: str, t: np.ndarray) -> np.ndarray:
        return np_layer_norm(t, f64(p[f"{name}.weight"]), f64(p[f"{name}.bias"]), cfg.eps)

    def heads(t: np.ndarray) -> np.ndarray:
        return t.reshape(b, s, cfg.heads, d).transpose(0, 2, 1, 3)

    n = norm("norm1", x)
    q, k, v = (heads(lin(f"attn.{m}", n)) for m in ("query", "key", "value"))
    probs = np_softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(d))
    h = x + lin("attn.dense", (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, -1))
    u = lin("fc1", norm("norm2", h))
    g = u * 0.5 * (1.0 + np.vectorize(erf)(u / np.sqrt(2.0)))
    return h + lin("fc2", g)


def case(cfg: ViTConfig = VIT_BASE, seed: int = 0) -> ModelCase:
    """``forward`` on a static ``(1, tokens, hidden)`` input."""
    x = np.random.default_rng(seed + 1).standard_normal((1, cfg.tokens, cfg.hidden))
    return export_case(
        "vit_block" + ("" if cfg == VIT_BASE else "_small"),
        ViTBlock(cfg),
        "forward",
        {"x": nn.spec.Tensor((1, cfg.tokens, cfg.hidden))},
        (x.astype(np.float32),),
        lambda inputs, p: np_vit(inputs[0], p, cfg),
        seed,
        rtol=2e-3,
        atol=2e-3,
    )
