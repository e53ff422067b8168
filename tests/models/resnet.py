"""ResNet-18 basic blocks: two 3x3 convolutions with inference-mode batch norm, ReLU, residual.

``BasicBlock(cfg).forward(x)``: ``relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))`` with
``shortcut`` the identity, or (downsampling variant, ``stride`` 2) a 1x1 stride-2 convolution
and batch norm, as torchvision's ``BasicBlock``; convolutions have no bias. Batch norm is
:class:`tilecraft.frontend.nn.BatchNorm2d` (running statistics; its per-channel scale and
shift fold into constants when the default pipeline binds the weights). Parameter names
match torchvision's state dict below ``layerN.M.`` (``downsample.0`` / ``downsample.1``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from tilecraft.frontend import nn
from tilecraft.frontend.nn import functional as F  # noqa: N812

from .common import ModelCase, export_case, f64


@dataclass(frozen=True)
class BlockConfig:
    """Channels, stride, input size and dtype of one block (batch 1, NCHW)."""

    in_channels: int = 64
    channels: int = 64
    stride: int = 1
    size: int = 56
    eps: float = 1e-5
    dtype: str = "float32"


BLOCK = BlockConfig()
"""ResNet-18 ``layer1`` block: 64 -> 64 channels on 56x56."""
DOWNSAMPLE = BlockConfig(in_channels=64, channels=128, stride=2)
"""ResNet-18 ``layer2.0``: 64 -> 128 channels, stride 2, 56x56 -> 28x28, 1x1 projection."""
SMALL_BLOCK = BlockConfig(in_channels=8, channels=8, size=10)
SMALL_DOWNSAMPLE = BlockConfig(in_channels=8, channels=16, stride=2, size=10)


def fp16(cfg: BlockConfig) -> BlockConfig:
    """``cfg`` with float16 weights and activations."""
    return replace(cfg, dtype="float16")


class BasicBlock(nn.Module):
    """torchvision's BasicBlock in inference mode."""

    def __init__(self, cfg: BlockConfig = BLOCK) -> None:
        self.cfg = cfg
        c, dt = cfg.channels, cfg.dtype
        self.conv1 = nn.Conv2d(cfg.in_channels, c, 3, stride=cfg.stride, padding=1, bias=False,
                               dtype=dt)  # fmt: skip
        self.bn1 = nn.BatchNorm2d(c, cfg.eps, dtype=dt)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False, dtype=dt)
        self.bn2 = nn.BatchNorm2d(c, cfg.eps, dtype=dt)
        self.downsample = (
            nn.Sequential(
                nn.Conv2d(cfg.in_channels, c, 1, stride=cfg.stride, bias=False, dtype=dt),
                nn.BatchNorm2d(c, cfg.eps, dtype=dt),
            )
            if cfg.stride != 1 or cfg.in_channels != c
            else None
        )

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        """The block."""
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        short = x if self.downsample is None else self.downsample(x)
        return F.relu(h + short)


def np_conv(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    """NCHW x OIHW convolution, float64."""
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, _, hh, ww = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (hh - kh) // stride + 1, (ww - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(kh):
        for j in range(kw):
            rows = slice(i, i + stride * (oh - 1) + 1, stride)
            cols = slice(j, j + stride * (ow - 1) + 1, stride)
            win = x[:, :, rows, cols]
            out += np.einsum("nchw,oc->nohw", win, w[:, :, i, j])
    return out


def np_bn(x: np.ndarray, p: Mapping[str, np.ndarray], name: str, eps: float) -> np.ndarray:
    """Inference batch norm over channels."""

    def ch(key: str) -> np.ndarray:
        return f64(p[f"{name}.{key}"])[None, :, None, None]

    return (x - ch("running_mean")) / np.sqrt(ch("running_var") + eps) * ch("weight") + ch("bias")


def np_block(x: np.ndarray, p: Mapping[str, np.ndarray], cfg: BlockConfig) -> np.ndarray:
    """The block in float64."""
    x = f64(x)
    h = np.maximum(np_bn(np_conv(x, f64(p["conv1.weight"]), cfg.stride, 1), p, "bn1", cfg.eps), 0)
    h = np_bn(np_conv(h, f64(p["conv2.weight"]), 1, 1), p, "bn2", cfg.eps)
    if "downsample.0.weight" in p:
        short = np_conv(x, f64(p["downsample.0.weight"]), cfg.stride, 0)
        short = np_bn(short, p, "downsample.1", cfg.eps)
    else:
        short = x
    return np.maximum(h + short, 0)


def case(cfg: BlockConfig = BLOCK, seed: int = 0) -> ModelCase:
    """``forward`` on a (1, C, H, W) input."""
    shape = (1, cfg.in_channels, cfg.size, cfg.size)
    x = np.random.default_rng(seed + 1).standard_normal(shape).astype(cfg.dtype)
    kind = "downsample" if cfg.stride != 1 else "block"
    full = replace(cfg, dtype="float32") in (BLOCK, DOWNSAMPLE)
    half = "_fp16" if cfg.dtype == "float16" else ""
    return export_case(
        f"resnet18_{kind}" + ("" if full else "_small") + half,
        BasicBlock(cfg),
        "forward",
        {"x": nn.spec.Tensor(shape, cfg.dtype)},
        (x,),
        lambda inputs, p: np_block(inputs[0], p, cfg),
        seed,
        rtol=1e-3,
        atol=1e-3,
    )
