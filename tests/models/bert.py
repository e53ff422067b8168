"""A BERT-base encoder layer: post-norm, biases everywhere, GELU (erf), non-causal attention.

``forward(x)``: ``x`` is ``(1, seq, hidden)`` with ``seq`` symbolic (128 in the issue);
``h = LayerNorm(x + attn(x)); out = LayerNorm(h + W2 gelu(W1 h))`` as Hugging Face's
``BertLayer`` (LayerNorm eps 1e-12). Attention uses
:func:`tilecraft.frontend.nn.functional.scaled_dot_product_attention` on
(batch, heads, seq, head_dim) tensors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from tilecraft.frontend import nn
from tilecraft.frontend.nn import functional as F  # noqa: N812

from .common import ModelCase, export_case, f64, np_layer_norm, np_softmax


@dataclass(frozen=True)
class BertConfig:
    """Sizes of one encoder layer."""

    hidden: int = 768
    heads: int = 12
    intermediate: int = 3072
    eps: float = 1e-12
    seq: int = 128

    @property
    def head_dim(self) -> int:
        """Features per head."""
        return self.hidden // self.heads


BERT_BASE = BertConfig()
SMALL = BertConfig(hidden=64, heads=4, intermediate=256, seq=8)


class SelfAttention(nn.Module):
    """Multi-head attention with biased projections and an output projection."""

    def __init__(self, cfg: BertConfig) -> None:
        self.cfg = cfg
        self.query = nn.Linear(cfg.hidden, cfg.hidden)
        self.key = nn.Linear(cfg.hidden, cfg.hidden)
        self.value = nn.Linear(cfg.hidden, cfg.hidden)
        self.dense = nn.Linear(cfg.hidden, cfg.hidden)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        """Attention output before the residual."""
        c = self.cfg
        b, s, _ = x.shape

        def heads(t: nn.Tensor) -> nn.Tensor:
            return t.reshape(b, s, c.heads, c.head_dim).permute_dims(0, 2, 1, 3)

        o = F.scaled_dot_product_attention(
            heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        )
        return self.dense(o.permute_dims(0, 2, 1, 3).reshape(b, s, c.hidden))


class BertLayer(nn.Module):
    """Post-norm encoder layer."""

    def __init__(self, cfg: BertConfig = BERT_BASE) -> None:
        self.cfg = cfg
        self.attention = SelfAttention(cfg)
        self.attention_norm = nn.LayerNorm(cfg.hidden, eps=cfg.eps)
        self.intermediate = nn.Linear(cfg.hidden, cfg.intermediate)
        self.act = nn.GELU()
        self.output = nn.Linear(cfg.intermediate, cfg.hidden)
        self.output_norm = nn.LayerNorm(cfg.hidden, eps=cfg.eps)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        """One encoder layer."""
        h = self.attention_norm(x + self.attention(x))
        return self.output_norm(h + self.output(self.act(self.intermediate(h))))


def np_bert(x: np.ndarray, p: Mapping[str, np.ndarray], cfg: BertConfig) -> np.ndarray:
    """The layer in float64."""
    from math import erf

    x = f64(x)
    b, s, _ = x.shape

    def lin(name: str, t: np.ndarray) -> np.ndarray:
        return t @ f64(p[f"{name}.weight"]).T + f64(p[f"{name}.bias"])

    def heads(t: np.ndarray) -> np.ndarray:
        return t.reshape(b, s, cfg.heads, cfg.head_dim).transpose(0, 2, 1, 3)

    q, k, v = (heads(lin(f"attention.{n}", x)) for n in ("query", "key", "value"))
    probs = np_softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(cfg.head_dim))
    a = lin("attention.dense", (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, -1))
    ln = {
        n: (f64(p[f"{n}.weight"]), f64(p[f"{n}.bias"])) for n in ("attention_norm", "output_norm")
    }
    h = np_layer_norm(x + a, *ln["attention_norm"], cfg.eps)
    u = lin("intermediate", h)
    g = u * 0.5 * (1.0 + np.vectorize(erf)(u / np.sqrt(2.0)))
    return np_layer_norm(h + lin("output", g), *ln["output_norm"], cfg.eps)


def case(cfg: BertConfig = BERT_BASE, seed: int = 0) -> ModelCase:
    """``forward`` with a symbolic sequence length, example input of ``cfg.seq`` tokens."""
    x = np.random.default_rng(seed + 1).standard_normal((1, cfg.seq, cfg.hidden))
    return export_case(
        "bert_layer" + ("" if cfg == BERT_BASE else "_small"),
        BertLayer(cfg),
        "forward",
        {"x": nn.spec.Tensor((1, "seq", cfg.hidden))},
        (x.astype(np.float32),),
        lambda inputs, p: np_bert(inputs[0], p, cfg),
        seed,
        rtol=2e-3,
        atol=2e-3,
    )
