"""A Llama-style decoder layer (TinyLlama-1.1B sizes) with decode and prefill entry points.

RMSNorm, grouped-query attention with rotary embedding (theta 10000, rotate-half), a SiLU-gated
MLP and two residuals, as in Hugging Face's ``LlamaDecoderLayer``; parameter names match its
state dict below ``model.layers.N.``.

Entry points (one graph function each; ``export_layer`` puts both in one module):

* ``prefill(x)``: ``x`` is ``(1, seq, hidden)`` at positions ``0 .. seq-1``, causal
  attention; ``seq`` is symbolic, so one export serves every prompt length.
* ``decode(x, past_k, past_v)``: one new token ``x`` ``(1, 1, hidden)`` at position ``P``
  after a cache of ``P`` tokens, ``past_k``/``past_v`` ``(1, kv_heads, P, head_dim)`` (the
  Hugging Face / PyTorch SDPA layout: the keys of one head are contiguous, so the cache is
  read as is and the new token is appended along the sequence axis); attention over ``P + 1``
  keys. ``P`` is static (511 at full size): a symbolic ``P`` would give the attention kernels
  only ``P + 1`` extents, which the runtime cannot bind a shape variable from yet.

Both return one tensor (graph functions have one result): per token, the hidden state
followed by the token's new key and value, ``(1, S, hidden + 2 * kv_heads * head_dim)``,
keys and values after rotary, flattened as ``(kv_heads, head_dim)``. :func:`unpack` splits it
into ``hidden (1, S, hidden)``, ``k`` and ``v`` ``(1, kv_heads, S, head_dim)``. A serving
loop appends ``k``/``v`` to its own cache: returning only the new rows costs ``O(1)`` per
token where returning the updated caches would copy the whole cache on every step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from tilecraft.frontend import nn
from tilecraft.frontend.nn import functional as F  # noqa: N812
from tilecraft.ir import IRModule

from .common import ModelCase, Reference, random_params


@dataclass(frozen=True)
class LlamaConfig:
    """Sizes of one decoder layer and of the two entry points' inputs."""

    hidden: int = 2048
    heads: int = 32
    kv_heads: int = 4
    head_dim: int = 64
    intermediate: int = 5632
    eps: float = 1e-5
    theta: float = 10000.0
    past: int = 511
    prefill: int = 128
    dtype: str = "float32"

    @property
    def kv_width(self) -> int:
        """Features of one token's keys (or values): ``kv_heads * head_dim``."""
        return self.kv_heads * self.head_dim

    @property
    def out_width(self) -> int:
        """Features per token of the packed result."""
        return self.hidden + 2 * self.kv_width


TINYLLAMA = LlamaConfig()
"""TinyLlama-1.1B: hidden 2048, 32 query / 4 key-value heads of 64, MLP 5632."""

SMALL = LlamaConfig(hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=96, past=7, prefill=5)
"""A small layer with the same structure, for the default test run."""


def fp16(cfg: LlamaConfig) -> LlamaConfig:
    """``cfg`` with float16 weights, activations and cache."""
    return replace(cfg, dtype="float16")


class Attention(nn.Module):
    """Grouped-query self-attention with rotary embedding and an optional KV cache."""

    def __init__(self, cfg: LlamaConfig) -> None:
        self.cfg = cfg
        dt = cfg.dtype
        self.q_proj = nn.Linear(cfg.hidden, cfg.heads * cfg.head_dim, bias=False, dtype=dt)
        self.k_proj = nn.Linear(cfg.hidden, cfg.kv_width, bias=False, dtype=dt)
        self.v_proj = nn.Linear(cfg.hidden, cfg.kv_width, bias=False, dtype=dt)
        self.o_proj = nn.Linear(cfg.heads * cfg.head_dim, cfg.hidden, bias=False, dtype=dt)

    def forward(
        self, h: nn.Tensor, past: tuple[nn.Tensor, nn.Tensor] | None
    ) -> tuple[nn.Tensor, nn.Tensor, nn.Tensor]:
        """(attention output, new keys, new values); keys/values (B, kv_heads, S, head_dim)."""
        c = self.cfg
        b, s, _ = h.shape
        offset = 0 if past is None else past[0].shape[2]
        if not isinstance(offset, int):
            raise nn.FrontendError("decode: the KV cache length must be static")

        def heads(t: nn.Tensor, n: int, rotate: bool) -> nn.Tensor:
            t = t.reshape(b, s, n, c.head_dim)
            if rotate:
                t = F.rotary(t, c.theta, offset=offset)
            return t.permute_dims(0, 2, 1, 3)

        q = heads(self.q_proj(h), c.heads, True)
        k = heads(self.k_proj(h), c.kv_heads, True)
        v = heads(self.v_proj(h), c.kv_heads, False)
        k_all = k if past is None else F.concat([past[0], k], axis=2)
        v_all = v if past is None else F.concat([past[1], v], axis=2)
        o = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=F.causal_lower_right())
        o = o.permute_dims(0, 2, 1, 3).reshape(b, s, c.heads * c.head_dim)
        return self.o_proj(o), k, v


class MLP(nn.Module):
    """``down(silu(gate(x)) * up(x))``."""

    def __init__(self, cfg: LlamaConfig) -> None:
        dt = cfg.dtype
        self.gate_proj = nn.Linear(cfg.hidden, cfg.intermediate, bias=False, dtype=dt)
        self.up_proj = nn.Linear(cfg.hidden, cfg.intermediate, bias=False, dtype=dt)
        self.down_proj = nn.Linear(cfg.intermediate, cfg.hidden, bias=False, dtype=dt)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        """The gated MLP."""
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    """Pre-norm decoder layer; ``decode`` and ``prefill`` (see the module docstring)."""

    def __init__(self, cfg: LlamaConfig = TINYLLAMA) -> None:
        self.cfg = cfg
        self.input_layernorm = nn.RMSNorm(cfg.hidden, eps=cfg.eps, dtype=cfg.dtype)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = nn.RMSNorm(cfg.hidden, eps=cfg.eps, dtype=cfg.dtype)
        self.mlp = MLP(cfg)

    def _layer(self, x: nn.Tensor, past: tuple[nn.Tensor, nn.Tensor] | None) -> nn.Tensor:
        a, k, v = self.self_attn(self.input_layernorm(x), past)
        x = x + a
        x = x + self.mlp(self.post_attention_layernorm(x))
        b, s, _ = x.shape

        def flat(t: nn.Tensor) -> nn.Tensor:
            return t.permute_dims(0, 2, 1, 3).reshape(b, s, self.cfg.kv_width)

        return F.concat([x, flat(k), flat(v)], axis=2)

    def prefill(self, x: nn.Tensor) -> nn.Tensor:
        """Process a prompt at positions 0..S-1; packed (hidden, k, v) per token."""
        return self._layer(x, None)

    def decode(self, x: nn.Tensor, past_k: nn.Tensor, past_v: nn.Tensor) -> nn.Tensor:
        """Process new tokens after a KV cache; packed (hidden, k, v) per token."""
        return self._layer(x, (past_k, past_v))


def specs(cfg: LlamaConfig, decode_tokens: int = 1) -> dict[str, dict[str, nn.spec.Tensor]]:
    """Export specs: ``prefill`` with a symbolic ``seq``; ``decode`` with a static cache."""
    cache = (1, cfg.kv_heads, cfg.past, cfg.head_dim)
    return {
        "prefill": {"x": nn.spec.Tensor((1, "seq", cfg.hidden), cfg.dtype)},
        "decode": {
            "x": nn.spec.Tensor((1, decode_tokens, cfg.hidden), cfg.dtype),
            "past_k": nn.spec.Tensor(cache, cfg.dtype),
            "past_v": nn.spec.Tensor(cache, cfg.dtype),
        },
    }


def export_layer(
    cfg: LlamaConfig = TINYLLAMA, seed: int = 0, entries: tuple[str, ...] = ("decode", "prefill")
) -> tuple[LlamaDecoderLayer, IRModule, dict[str, np.ndarray]]:
    """The layer with random weights, and a module with the chosen entry points."""
    layer = LlamaDecoderLayer(cfg)
    params = random_params(layer, seed)
    all_specs = specs(cfg)
    mod, exported = layer.export({e: all_specs[e] for e in entries})
    assert list(exported) == list(params)
    return layer, mod, params


def unpack(out: np.ndarray, cfg: LlamaConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(hidden (B, S, hidden), k, v (B, kv_heads, S, head_dim)) views of a packed result."""
    b, s, _ = out.shape
    h, w = cfg.hidden, cfg.kv_width

    def heads(t: np.ndarray) -> np.ndarray:
        return t.reshape(b, s, cfg.kv_heads, cfg.head_dim).transpose(0, 2, 1, 3)

    return out[..., :h], heads(out[..., h : h + w]), heads(out[..., h + w :])


# numpy float64 reference ------------------------------------------------------------------
def np_rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """RMSNorm over the last axis."""
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def np_rotary(x: np.ndarray, start: int, theta: float) -> np.ndarray:
    """Rotate-half rotary embedding of (B, H, S, D) at positions ``start ..``."""
    d, s = x.shape[-1], x.shape[-2]
    inv = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    ang = np.arange(start, start + s, dtype=np.float64)[:, None] * inv[None, :]
    cos, sin = (np.tile(f(ang), 2).astype(x.dtype) for f in (np.cos, np.sin))
    rot = np.concatenate([-x[..., d // 2 :], x[..., : d // 2]], -1)
    return x * cos + rot * sin


def np_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Causal (bottom-right aligned) grouped-query attention on (B, H, S, D) arrays."""
    g = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s, t = q.shape[2], k.shape[2]
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])  # a float64 would promote
    keep = np.arange(t)[None, :] <= np.arange(s)[:, None] + (t - s)
    scores = np.where(keep, scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def np_layer(
    x: np.ndarray,
    p: Mapping[str, np.ndarray],
    cfg: LlamaConfig,
    past: tuple[np.ndarray, np.ndarray] | None = None,
    dtype: type = np.float64,
) -> np.ndarray:
    """The packed result of ``prefill`` (``past`` None) or ``decode`` in numpy ``dtype``."""

    def a(t: np.ndarray) -> np.ndarray:
        return np.asarray(t, dtype=dtype)

    x = a(x)
    b, s, _ = x.shape
    start = 0 if past is None else past[0].shape[2]

    def lin(name: str, t: np.ndarray) -> np.ndarray:
        return t @ a(p[name]).T

    def heads(t: np.ndarray, n: int) -> np.ndarray:
        return t.reshape(b, s, n, cfg.head_dim).transpose(0, 2, 1, 3)

    h = np_rms_norm(x, a(p["input_layernorm.weight"]), cfg.eps)
    q = np_rotary(heads(lin("self_attn.q_proj.weight", h), cfg.heads), start, cfg.theta)
    k = np_rotary(heads(lin("self_attn.k_proj.weight", h), cfg.kv_heads), start, cfg.theta)
    v = heads(lin("self_attn.v_proj.weight", h), cfg.kv_heads)
    k_all = k if past is None else np.concatenate([a(past[0]), k], 2)
    v_all = v if past is None else np.concatenate([a(past[1]), v], 2)
    o = np_attention(q, k_all, v_all).transpose(0, 2, 1, 3).reshape(b, s, -1)
    x = x + lin("self_attn.o_proj.weight", o)
    h = np_rms_norm(x, a(p["post_attention_layernorm.weight"]), cfg.eps)
    g = lin("mlp.gate_proj.weight", h)
    x = x + lin("mlp.down_proj.weight", g / (1 + np.exp(-g)) * lin("mlp.up_proj.weight", h))

    def flat(t: np.ndarray) -> np.ndarray:
        return t.transpose(0, 2, 1, 3).reshape(b, s, -1)

    return a(np.concatenate([x, flat(k), flat(v)], -1))


def example_inputs(
    cfg: LlamaConfig, entry: str, seed: int = 1, tokens: int | None = None
) -> tuple[np.ndarray, ...]:
    """Random inputs of ``entry`` in ``cfg.dtype`` (cache entries of a similar size as real
    keys)."""
    rng = np.random.default_rng(seed)
    s = tokens if tokens is not None else (cfg.prefill if entry == "prefill" else 1)
    x = rng.standard_normal((1, s, cfg.hidden)).astype(cfg.dtype)
    if entry == "prefill":
        return (x,)
    cache = (1, cfg.kv_heads, cfg.past, cfg.head_dim)
    return (
        x,
        rng.standard_normal(cache).astype(cfg.dtype),
        rng.standard_normal(cache).astype(cfg.dtype),
    )


def reference_for(cfg: LlamaConfig, entry: str) -> Reference:
    """The float64 reference ``(inputs, params) -> packed result`` of ``entry``."""
    if entry == "prefill":
        return lambda inputs, p: np_layer(inputs[0], p, cfg)
    return lambda inputs, p: np_layer(inputs[0], p, cfg, (inputs[1], inputs[2]))


def case(cfg: LlamaConfig = TINYLLAMA, entry: str = "decode", seed: int = 0) -> ModelCase:
    """The ``decode`` or ``prefill`` entry of a layer with random weights, as a ModelCase."""
    layer, mod, params = export_layer(cfg, seed, (entry,))
    size = "tinyllama" if replace(cfg, dtype="float32") == TINYLLAMA else "small"
    half = cfg.dtype == "float16"
    return ModelCase(
        f"llama_{entry}_{size}" + ("_fp16" if half else ""),
        entry,
        layer,
        mod,
        params,
        example_inputs(cfg, entry, seed + 1),
        reference_for(cfg, entry),
        rtol=3e-2 if half else 2e-3,
        atol=3e-2 if half else 2e-3,
    )
