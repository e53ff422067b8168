"""A Llama-style decoder layer and a small CNN: export, build, and match numpy."""

from __future__ import annotations

import numpy as np
import pytest

from tilecraft.frontend import nn
from tilecraft.frontend.nn import functional as F  # noqa: N812
from tilecraft.graph import build_graph_module, get_pipeline

HIDDEN, HEADS, FFN = 512, 8, 1024
HEAD_DIM = HIDDEN // HEADS


class Attention(nn.Module):
    def __init__(self) -> None:
        self.q_proj = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.k_proj = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.v_proj = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.o_proj = nn.Linear(HIDDEN, HIDDEN, bias=False)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        b, s, _ = x.shape
        q = F.rotary(self.q_proj(x).reshape(b, s, HEADS, HEAD_DIM))
        k = F.rotary(self.k_proj(x).reshape(b, s, HEADS, HEAD_DIM))
        v = self.v_proj(x).reshape(b, s, HEADS, HEAD_DIM)
        return self.o_proj(F.attention(q, k, v, causal=True).reshape(b, s, HIDDEN))


class MLP(nn.Module):
    def __init__(self) -> None:
        self.gate_proj = nn.Linear(HIDDEN, FFN, bias=False)
        self.up_proj = nn.Linear(HIDDEN, FFN, bias=False)
        self.down_proj = nn.Linear(FFN, HIDDEN, bias=False)
        self.act = nn.SiLU()

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self) -> None:
        self.input_layernorm = nn.RMSNorm(HIDDEN)
        self.self_attn = Attention()
        self.post_attention_layernorm = nn.RMSNorm(HIDDEN)
        self.mlp = MLP()

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


def np_rms(x: np.ndarray, w: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def np_rotary(x: np.ndarray, theta: float = 10000.0) -> np.ndarray:
    _, s, _, d = x.shape
    inv = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    ang = np.arange(s)[:, None] * inv[None, :]
    cos = np.concatenate([np.cos(ang)] * 2, -1)[None, :, None, :]
    sin = np.concatenate([np.sin(ang)] * 2, -1)[None, :, None, :]
    rot = np.concatenate([-x[..., d // 2 :], x[..., : d // 2]], -1)
    return x * cos + rot * sin


def np_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    s = q.shape[1]
    scores = np.einsum("bihd,bjhd->bhij", q, k) / np.sqrt(q.shape[-1])
    scores = np.where(np.tril(np.ones((s, s), bool)), scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhij,bjhd->bihd", p, v)


def np_decoder(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    x = x.astype(np.float64)
    b, s, _ = x.shape
    h = np_rms(x, p["input_layernorm.weight"])

    def proj(name: str, t: np.ndarray) -> np.ndarray:
        return t @ p[name].T

    q = np_rotary(proj("self_attn.q_proj.weight", h).reshape(b, s, HEADS, HEAD_DIM))
    k = np_rotary(proj("self_attn.k_proj.weight", h).reshape(b, s, HEADS, HEAD_DIM))
    v = proj("self_attn.v_proj.weight", h).reshape(b, s, HEADS, HEAD_DIM)
    x = x + proj("self_attn.o_proj.weight", np_attention(q, k, v).reshape(b, s, HIDDEN))
    h = np_rms(x, p["post_attention_layernorm.weight"])
    g = proj("mlp.gate_proj.weight", h)
    return x + proj("mlp.down_proj.weight", g / (1 + np.exp(-g)) * proj("mlp.up_proj.weight", h))


def random_state(model: nn.Module, seed: int, scale: float) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for n, p in model.named_parameters():
        base = 1.0 if n.endswith("layernorm.weight") else 0.0
        out[n] = (base + rng.standard_normal(p.param_shape) * scale).astype(p.param_dtype)
    return out


@pytest.fixture(scope="module")
def decoder():
    model = DecoderLayer()
    model.load_state_dict(random_state(model, 0, 0.05))
    mod, params = model.export({"forward": {"x": nn.spec.Tensor((1, "seq_len", HIDDEN))}})
    return get_pipeline("zero")(mod), params


def test_decoder_layer_has_a_symbolic_sequence_length(decoder) -> None:
    mod, _ = decoder
    fwd = mod["forward"]
    assert [p.name for p in fwd.params][:2] == ["x", "input_layernorm_weight"]
    assert fwd.params[0].type.describe() == "Tensor((1, seq_len, 512), float32)"
    names = {n for n, _ in mod.prim_funcs()}
    # the gated MLP's silu and multiply fuse into the gate projection's matmul
    assert any(n.startswith("fused_matmul") and "silu" in n and "multiply" in n for n in names)
    assert "rms_norm" in names
    assert "attention" in names
    # q and k get the same reshape + rotary group: FuseTIR keeps one PrimFunc for both
    rotary = sorted(n for n in names if "rotary" in n)
    assert rotary == ["fused_reshape_rotary_embedding"]
    calls = [b.value.func for b in fwd.bindings]
    assert calls.count("fused_reshape_rotary_embedding") == 2
    assert calls.count("rms_norm") == 2


@pytest.mark.parametrize("seq_len", [3, 8])
def test_decoder_layer_matches_numpy(decoder, seq_len: int) -> None:
    mod, params = decoder
    exe = build_graph_module(mod, "cpu")
    x = np.random.default_rng(seq_len).standard_normal((1, seq_len, HIDDEN)).astype("float32")
    out = exe["forward"](x, *params.values())
    assert out.shape == (1, seq_len, HIDDEN)
    np.testing.assert_allclose(out, np_decoder(x, params), rtol=2e-3, atol=2e-3)


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(8, 16, 3)
        self.fc = nn.Linear(16 * 3 * 3, 10)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        x = F.max_pool2d(self.relu(self.conv1(x)), 2)
        x = F.avg_pool2d(self.relu(self.conv2(x)), 2)
        return self.fc(x.reshape(x.shape[0], -1))


def np_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray, pad: int) -> np.ndarray:
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, _c, h, wd = x.shape
    o, _, kh, kw = w.shape
    out = np.zeros((n, o, h - kh + 1, wd - kw + 1))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum(
                "nchw,oc->nohw", x[:, :, i : i + out.shape[2], j : j + out.shape[3]], w[:, :, i, j]
            )
    return out + b[None, :, None, None]


def np_pool(x: np.ndarray, kind: str) -> np.ndarray:
    n, c, h, w = x.shape
    r = x.reshape(n, c, h // 2, 2, w // 2, 2)
    return r.max((3, 5)) if kind == "max" else r.mean((3, 5))


def np_cnn(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    h = np_pool(np.maximum(np_conv(x, p["conv1.weight"], p["conv1.bias"], 1), 0), "max")
    h = np_pool(np.maximum(np_conv(h, p["conv2.weight"], p["conv2.bias"], 0), 0), "avg")
    return h.reshape(h.shape[0], -1) @ p["fc.weight"].T + p["fc.bias"]


@pytest.mark.parametrize("batch", [1, 3])
def test_small_cnn_matches_numpy(batch: int) -> None:
    mod, params = SmallCNN().export(
        {"forward": {"x": nn.spec.Tensor(("batch", 3, 16, 16))}}, seed=1
    )
    mod = get_pipeline("zero")(mod)
    names = {n for n, _ in mod.prim_funcs()}
    assert any(n.startswith("fused_conv2d") and n.endswith("relu") for n in names), names
    exe = build_graph_module(mod, "cpu")
    x = np.random.default_rng(batch).standard_normal((batch, 3, 16, 16)).astype("float32")
    out = exe["forward"](x, *params.values())
    np.testing.assert_allclose(out, np_cnn(x, params), rtol=1e-4, atol=1e-4)


def test_decoder_native_forward_equals_the_python_executor(decoder) -> None:
    mod, params = decoder
    f = build_graph_module(mod, "cpu")["forward"]
    assert f.native is not None
    weights = list(params.values())
    for seq_len in (1, 5, 16, 2):
        x = np.random.default_rng(seq_len).standard_normal((1, seq_len, HIDDEN)).astype("float32")
        out = f(x, *weights)
        np.testing.assert_array_equal(out, f.run([x, *weights]))
        np.testing.assert_allclose(out, np_decoder(x, params), rtol=2e-3, atol=2e-3)


def test_cnn_native_forward_equals_the_python_executor() -> None:
    mod, params = SmallCNN().export(
        {"forward": {"x": nn.spec.Tensor(("batch", 3, 16, 16))}}, seed=2
    )
    f = build_graph_module(get_pipeline("zero")(mod), "cpu")["forward"]
    assert f.native is not None
    for batch in (2, 1, 4):
        x = np.random.default_rng(batch).standard_normal((batch, 3, 16, 16)).astype("float32")
        out = f(x, *params.values())
        np.testing.assert_array_equal(out, f.run([x, *params.values()]))
        np.testing.assert_allclose(out, np_cnn(x, params), rtol=1e-4, atol=1e-4)
