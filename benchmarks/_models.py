"""Make the shared model fixtures (``tests/models``) importable from a benchmark, and give
each model's numpy float32 implementation (the baseline a numpy user writes).

The benchmarks run as scripts (``python benchmarks/x.py``, so this folder is on
``sys.path``); ``import _models`` puts ``tests/`` on the path too and re-exports the package:
``from _models import models``. The fixtures live with the tests, not in the tilecraft
package: they are test and benchmark data, not API.
"""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[1] / "tests")
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from collections.abc import Callable  # noqa: E402
from math import erf  # noqa: E402
from typing import Any  # noqa: E402

import models  # noqa: E402
import numpy as np  # noqa: E402

__all__ = ["models", "np_float32"]

_erf32 = np.vectorize(erf, otypes=[np.float32])


def np_float32(case: models.ModelCase) -> Callable[[], np.ndarray]:
    """The model in numpy float32, the way a numpy user would write it (weights as given)."""
    p = case.params
    x = case.inputs[0]
    m = case.model
    if isinstance(m, models.tutorial.ReferenceModel):
        return lambda: _ref32(x, p)
    if isinstance(m, models.tutorial.MetaScheduleModel):
        return lambda: np.maximum(x @ p["fc1.weight"].T + p["fc1.bias"], 0) @ p["fc2.weight"].T
    if isinstance(m, models.bert.BertLayer):
        return lambda: _bert32(x, p, m.cfg)
    return lambda: _block32(x, p, m.cfg)


def _ln(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + np.float32(eps)) * w + b


def _ref32(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    h = np.maximum(x @ p["fc1.weight"].T + p["fc1.bias"], 0)
    h = _ln(h, p["norm.weight"], p["norm.bias"], 1e-5)
    return h @ p["fc2.weight"].T + p["fc2.bias"]


def _bert32(x: np.ndarray, p: dict[str, np.ndarray], cfg: Any) -> np.ndarray:
    b, s, _ = x.shape

    def lin(name: str, t: np.ndarray) -> np.ndarray:
        return t @ p[f"{name}.weight"].T + p[f"{name}.bias"]

    def heads(t: np.ndarray) -> np.ndarray:
        return t.reshape(b, s, cfg.heads, -1).transpose(0, 2, 1, 3)

    q, k, v = (heads(lin(f"attention.{n}", x)) for n in ("query", "key", "value"))
    sc = q @ k.transpose(0, 1, 3, 2) * np.float32(1 / np.sqrt(cfg.head_dim))
    e = np.exp(sc - sc.max(-1, keepdims=True))
    o = ((e / e.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(b, s, -1)
    h = _ln(x + lin("attention.dense", o), *_pair(p, "attention_norm"), cfg.eps)
    u = lin("intermediate", h)
    g = u * np.float32(0.5) * (1 + _erf32(u * np.float32(1 / np.sqrt(2))))
    return _ln(h + lin("output", g), *_pair(p, "output_norm"), cfg.eps)


def _pair(p: dict[str, np.ndarray], name: str) -> tuple[np.ndarray, np.ndarray]:
    return p[f"{name}.weight"], p[f"{name}.bias"]


def _conv32(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    """im2col + one matmul (how a numpy user gets BLAS speed for a convolution)."""
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    o, c, kh, kw = w.shape
    win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))
    win = win[:, :, ::stride, ::stride]  # (n, c, oh, ow, kh, kw)
    n, _, oh, ow = win.shape[:4]
    cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, c * kh * kw)
    return (cols @ w.reshape(o, -1).T).reshape(n, oh, ow, o).transpose(0, 3, 1, 2)


def _block32(x: np.ndarray, p: dict[str, np.ndarray], cfg: Any) -> np.ndarray:
    def bn(name: str, t: np.ndarray) -> np.ndarray:
        s = p[f"{name}.weight"] / np.sqrt(p[f"{name}.running_var"] + np.float32(cfg.eps))
        shift = p[f"{name}.bias"] - p[f"{name}.running_mean"] * s
        return t * s[None, :, None, None] + shift[None, :, None, None]

    h = np.maximum(bn("bn1", _conv32(x, p["conv1.weight"], cfg.stride, 1)), 0)
    h = bn("bn2", _conv32(h, p["conv2.weight"], 1, 1))
    short = x
    if "downsample.0.weight" in p:
        short = bn("downsample.1", _conv32(x, p["downsample.0.weight"], cfg.stride, 0))
    return np.maximum(h + short, 0)
