"""The same models in PyTorch eager (CPU), for benchmarks and cross-checks; torch is optional.

``for_case(case)`` returns ``(fn, inputs)``: ``fn(*inputs)`` computes what the tilecraft
function ``case.entry`` computes, from the same weights, with the usual eager building blocks
(``F.linear``, ``F.scaled_dot_product_attention`` with ``enable_gqa``, ``F.conv2d``,
``F.batch_norm``, ``F.layer_norm``), the way a Hugging Face / torchvision model runs them.
Import this module only when torch is installed (``importlib.util.find_spec("torch")``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812

from . import bert, llama, resnet
from .common import ModelCase

TorchFn = Callable[..., torch.Tensor]


def _tensors(params: Mapping[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in params.items()}


def _rms(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def llama_fn(cfg: llama.LlamaConfig, params: Mapping[str, np.ndarray]) -> TorchFn:
    """``fn(x, past_k=None, past_v=None)`` -> the packed result of prefill / decode."""
    p = _tensors(params)
    d = cfg.head_dim
    inv_freq = 1.0 / (cfg.theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))

    def rotary(t: torch.Tensor, start: int) -> torch.Tensor:
        pos = torch.arange(start, start + t.shape[2], dtype=torch.float32)
        ang = torch.outer(pos, inv_freq)
        cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)
        rot = torch.cat([-t[..., d // 2 :], t[..., : d // 2]], -1)
        return t * cos + rot * sin

    def fn(
        x: torch.Tensor, past_k: torch.Tensor | None = None, past_v: torch.Tensor | None = None
    ) -> torch.Tensor:
        b, s, _ = x.shape
        start = 0 if past_k is None else past_k.shape[2]
        h = _rms(x, p["input_layernorm.weight"], cfg.eps)

        def heads(name: str, n: int) -> torch.Tensor:
            y = F.linear(h, p[f"self_attn.{name}.weight"])
            return y.view(b, s, n, d).transpose(1, 2)

        q = rotary(heads("q_proj", cfg.heads), start)
        k = rotary(heads("k_proj", cfg.kv_heads), start)
        v = heads("v_proj", cfg.kv_heads)
        k_all = k if past_k is None else torch.cat([past_k, k], 2)
        v_all = v if past_v is None else torch.cat([past_v, v], 2)
        t = k_all.shape[2]
        mask = None
        if s > 1:  # bottom-right aligned causal mask (is_causal aligns top-left)
            mask = torch.ones(s, t, dtype=torch.bool).tril(t - s)
        o = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask, enable_gqa=True)
        x = x + F.linear(o.transpose(1, 2).reshape(b, s, -1), p["self_attn.o_proj.weight"])
        h = _rms(x, p["post_attention_layernorm.weight"], cfg.eps)
        g = F.silu(F.linear(h, p["mlp.gate_proj.weight"])) * F.linear(h, p["mlp.up_proj.weight"])
        x = x + F.linear(g, p["mlp.down_proj.weight"])
        flat = [t_.transpose(1, 2).reshape(b, s, -1) for t_ in (k, v)]
        return torch.cat([x, *flat], -1)

    return fn


def bert_fn(cfg: bert.BertConfig, params: Mapping[str, np.ndarray]) -> TorchFn:
    """``fn(x)`` -> the encoder layer's output."""
    p = _tensors(params)

    def lin(name: str, t: torch.Tensor) -> torch.Tensor:
        return F.linear(t, p[f"{name}.weight"], p[f"{name}.bias"])

    def ln(name: str, t: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(t, (cfg.hidden,), p[f"{name}.weight"], p[f"{name}.bias"], cfg.eps)

    def fn(x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape

        def heads(name: str) -> torch.Tensor:
            return lin(f"attention.{name}", x).view(b, s, cfg.heads, -1).transpose(1, 2)

        o = F.scaled_dot_product_attention(heads("query"), heads("key"), heads("value"))
        a = lin("attention.dense", o.transpose(1, 2).reshape(b, s, -1))
        h = ln("attention_norm", x + a)
        return ln("output_norm", h + lin("output", F.gelu(lin("intermediate", h))))

    return fn


def resnet_fn(cfg: resnet.BlockConfig, params: Mapping[str, np.ndarray]) -> TorchFn:
    """``fn(x)`` -> the basic block's output (batch norm in inference mode)."""
    p = _tensors(params)

    def bn(name: str, t: torch.Tensor) -> torch.Tensor:
        stats = (p[f"{name}.running_mean"], p[f"{name}.running_var"])
        return F.batch_norm(
            t, *stats, p[f"{name}.weight"], p[f"{name}.bias"], training=False, eps=cfg.eps
        )

    def fn(x: torch.Tensor) -> torch.Tensor:
        h = F.relu(bn("bn1", F.conv2d(x, p["conv1.weight"], stride=cfg.stride, padding=1)))
        h = bn("bn2", F.conv2d(h, p["conv2.weight"], padding=1))
        short = x
        if "downsample.0.weight" in p:
            short = bn("downsample.1", F.conv2d(x, p["downsample.0.weight"], stride=cfg.stride))
        return F.relu(h + short)

    return fn


def tutorial_fn(name: str, params: Mapping[str, np.ndarray]) -> TorchFn:
    """``fn(x)`` -> the tutorial model ``name``'s output."""
    p = _tensors(params)

    def fn(x: torch.Tensor) -> torch.Tensor:
        h = F.relu(F.linear(x, p["fc1.weight"], p["fc1.bias"]))
        if name == "metaschedule":
            return F.linear(h, p["fc2.weight"])
        h = F.layer_norm(h, (768,), p["norm.weight"], p["norm.bias"], 1e-5)
        return F.linear(h, p["fc2.weight"], p["fc2.bias"])

    return fn


def for_case(case: ModelCase) -> tuple[TorchFn, tuple[torch.Tensor, ...]]:
    """The torch function of ``case`` and its inputs as tensors (sharing memory)."""
    model = case.model
    if isinstance(model, llama.LlamaDecoderLayer):
        fn = llama_fn(model.cfg, case.params)
    elif isinstance(model, bert.BertLayer):
        fn = bert_fn(model.cfg, case.params)
    elif isinstance(model, resnet.BasicBlock):
        fn = resnet_fn(model.cfg, case.params)
    else:
        fn = tutorial_fn(case.name.split("_")[1], case.params)
    return fn, tuple(torch.from_numpy(x) for x in case.inputs)
