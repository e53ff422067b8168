"""FuseAttention: traced softmax-attention chains become one ``attention`` call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.frontend import nn
from tilecraft.frontend.nn import functional as F  # noqa: N812
from tilecraft.graph import FoldConstants, FuseAttention, get_pipeline
from tilecraft.graph.ir import OpCall, graph_functions

B, H, S, D = 1, 2, 8, 16


def calls(mod: tc.IRModule) -> list[OpCall]:
    """The operator calls of the module's graph functions, in order."""
    return [
        b.value for _, f in graph_functions(mod) for b in f.bindings if isinstance(b.value, OpCall)
    ]


def ops(mod: tc.IRModule) -> list[str]:
    """The operator names called by the module's graph functions, in order."""
    return [c.op for c in calls(mod)]


def qkv(seed: int = 0, shape: tuple[int, ...] = (B, H, S, D)) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype("float32") for _ in range(3)]


def np_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, causal: bool) -> Any:
    s = (q.astype("f8") @ k.astype("f8").swapaxes(-1, -2)) * scale
    if causal:
        n, t = s.shape[-2:]
        s = np.where(np.tril(np.ones((n, t), bool), t - n), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v.astype("f8")


class Sdpa(nn.Module):
    """``scaled_dot_product_attention`` with fixed keyword arguments."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs

    def forward(self, q: nn.Tensor, k: nn.Tensor, v: nn.Tensor) -> nn.Tensor:
        return F.scaled_dot_product_attention(q, k, v, **self.kwargs)


def export(module: nn.Module, shape: tuple[int, ...] = (B, H, S, D)) -> tc.IRModule:
    spec = {n: nn.spec.Tensor(shape, "float32") for n in "qkv"}
    mod, _ = module.export({"forward": spec})
    return mod


def kernels(exe: Any) -> dict[str, str]:
    """Kernel name -> ``scheduled_by`` of a compiled executable."""
    return {n: tc.ir.scheduled_by(f) for n, f in exe.mod.prim_funcs()}


@pytest.mark.parametrize(
    ("kwargs", "causal"),
    [
        ({}, False),
        ({"is_causal": True}, True),
        ({"scale": 0.3}, False),
        ({"attn_mask": F.causal_lower_right(), "scale": 0.5}, True),
    ],
    ids=["full", "causal", "scale", "lower_right"],
)
def test_nn_frontend_sdpa_fuses_and_matches(kwargs: dict[str, Any], causal: bool) -> None:
    mod = export(Sdpa(**kwargs))
    fused = FuseAttention()(mod)
    assert ops(fused) == ["attention"]
    (call,) = calls(fused)
    assert call.attrs["causal"] is causal
    exe = tc.compile(mod, tc.Target("cpu -mcpu=avx2"))
    assert kernels(exe) == {"attention": "rule:Attention"}
    q, k, v = qkv()
    want = np_attention(q, k, v, kwargs.get("scale", D**-0.5), causal)
    np.testing.assert_allclose(exe["forward"](q, k, v), want, rtol=1e-4, atol=1e-5)
