"""FuseAttention: traced softmax-attention chains become one ``attention`` call."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.frontend import nn
from tilecraft.frontend.nn import functional as F  # noqa: N812
from tilecraft.graph import FoldConstants, FuseAttention, GraphBuilder
from tilecraft.graph.ir import Binding, Constant, OpCall, TensorType, TensorVar, graph_functions

B, H, S, D = 1, 2, 16, 16


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


def torch_module(kind: str) -> tuple[tc.IRModule, Any]:
    """A torch SDPA program imported (decomposed by torch), and the torch module."""
    torch = pytest.importorskip("torch")
    from tilecraft.frontend.torch import from_exported_program

    sdpa = torch.nn.functional.scaled_dot_product_attention

    class Attn(torch.nn.Module):
        def forward(self, q: Any, k: Any, v: Any) -> Any:
            if kind == "tril":
                mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
                return sdpa(q, k, v, attn_mask=mask)
            if kind == "band":  # not triangular: stays as it is
                mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
                return sdpa(q, k, v, attn_mask=mask.triu(-2))
            return sdpa(q, k, v, is_causal=kind == "causal")

    model = Attn()
    args = tuple(torch.from_numpy(a) for a in qkv(0, (2, H, S, D)))
    dyn = None
    if kind == "batch":  # the guard's zeros are a ``full`` call; dead reshapes read the chain
        dyn = ({0: torch.export.Dim("b", max=8)},) * 3
    mod, params = from_exported_program(torch.export.export(model, args, dynamic_shapes=dyn))
    assert not params
    return mod, model


@pytest.mark.parametrize("kind", ["full", "causal", "tril", "band", "batch"])
def test_torch_sdpa_fuses_and_matches_torch(kind: str) -> None:
    torch = pytest.importorskip("torch")
    mod, model = torch_module(kind)
    fused = FuseAttention()(FoldConstants()(mod))
    assert ("attention" in ops(fused)) is (kind != "band")
    exe = tc.compile(mod, tc.Target("cpu -mcpu=avx2"))
    if kind != "band":
        assert "rule:Attention" in kernels(exe).values()
    q, k, v = qkv(1, (3 if kind == "batch" else 2, H, S, D))
    want = model(*(torch.from_numpy(a) for a in (q, k, v))).numpy()
    np.testing.assert_allclose(exe["main"](q, k, v), want, rtol=1e-4, atol=1e-5)


def const(bb: GraphBuilder, value: np.ndarray | float, dtype: str = "float32") -> TensorVar:
    """A constant binding of ``bb``."""
    data = np.asarray(value, dtype)
    t = TensorType(data.shape, dtype)
    var = TensorVar(bb.fresh("c"), t)
    bb.bindings.append(Binding(var, Constant(t, data)))
    return var


TRIL = np.tril(np.ones((S, S), bool))


def chain(variant: str, t: int = S) -> tc.IRModule:
    """q @ k^T * 0.25, masked as ``variant`` says, softmax, @ v; k and v have ``t`` keys."""
    bb = GraphBuilder()
    q = bb.param("q", (B, H, S, D), "float32")
    k, v = (bb.param(n, (B, H, t, D), "float32") for n in "kv")
    m = bb.param("m", (S, t), "bool") if variant == "param_mask" else None
    s = bb.emit("multiply", [bb.emit("matmul", [q, k], {"transpose_b": True}), const(bb, 0.25)])
    low = const(bb, -np.inf)
    if variant in ("tril", "band", "mild"):
        keep = {"tril": TRIL, "band": np.triu(TRIL, -2), "mild": TRIL}[variant]
        fill = const(bb, -1.0) if variant == "mild" else low
        s = bb.emit("where", [const(bb, keep, "bool"), s, fill])
    elif variant == "additive":
        s = bb.emit("add", [s, const(bb, np.where(TRIL, 0.0, -np.inf))])
    elif variant == "param_mask":
        s = bb.emit("where", [m, s, low])
    elif variant == "upper_left":
        s = bb.emit("causal_mask", [s], {"offset": 0})
    p = bb.emit("softmax", [s], {"axis": 2 if variant == "axis" else -1})
    o = bb.emit("matmul", [p, v])
    return tc.IRModule({"main": bb.finish([o, s] if variant == "twice" else o)})


def np_chain(variant: str, q: Any, k: Any, v: Any, m: Any = None) -> Any:
    s = (q.astype("f8") @ k.astype("f8").swapaxes(-1, -2)) * 0.25
    n, t = s.shape[-2:]
    keep = {
        "tril": TRIL,
        "additive": TRIL,
        "band": np.triu(TRIL, -2),
        "param_mask": m,
        "upper_left": np.tril(np.ones((n, t), bool)),
    }.get(variant)
    if keep is not None:
        s = np.where(keep, s, -np.inf)
    elif variant == "mild":
        s = np.where(TRIL, s, -1.0)
    axis = 2 if variant == "axis" else -1
    p = np.exp(s - s.max(axis, keepdims=True))
    o = (p / p.sum(axis, keepdims=True)) @ v.astype("f8")
    return (o, s) if variant == "twice" else o


@pytest.mark.parametrize(
    ("variant", "fuses"),
    [
        ("none", True),
        ("tril", True),
        ("additive", True),
        ("band", False),
        ("mild", False),
        ("param_mask", False),
        ("twice", False),
        ("axis", False),
        ("upper_left", False),
    ],
)
def test_chains_fuse_only_when_exact(variant: str, fuses: bool) -> None:
    t = 32 if variant == "upper_left" else S
    mod = chain(variant, t)
    fused = FuseAttention()(mod)
    assert ("attention" in ops(fused)) is fuses
    if not fuses:
        assert fused["main"] is mod["main"]
    rng = np.random.default_rng(3)
    q, k, v = (
        rng.standard_normal(sh).astype("float32") for sh in [(B, H, S, D), *[(B, H, t, D)] * 2]
    )
    extra = [rng.random((S, t)) < 0.7] if variant == "param_mask" else []
    if extra:
        extra[0][:, 0] = True  # every row keeps a key
    exe = tc.compile(mod, tc.Target("cpu -mcpu=avx2"))
    assert ("rule:Attention" in kernels(exe).values()) is fuses
    if fuses:
        (call,) = (c for c in calls(fused) if c.op == "attention")
        assert call.attrs["causal"] is (variant != "none")
        assert call.attrs["scale"] == 0.25
    got, want = exe["main"](q, k, v, *extra), np_chain(variant, q, k, v, *extra)
    pairs = list(zip(got, want, strict=True)) if variant == "twice" else [(got, want)]
    for g, w in pairs:
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("seq", "causal"), [("s", True), (17, False), (24, True)])
def test_other_lengths_fuse_only_when_asked(seq: str | int, causal: bool) -> None:
    """The Attention rule is slow on lengths other than multiples of 16: operators stay."""
    mod = export(Sdpa(is_causal=causal), (B, H, seq, D))
    assert FuseAttention()(mod)["forward"] is mod["forward"]
    fused = FuseAttention(any_length=True)(mod)
    assert ops(fused) == ["attention"]
    exe = tc.compile(fused, tc.Target("cpu -mcpu=avx2"))
    for s in (1, 5) if seq == "s" else (seq,):
        q, k, v = qkv(s, (B, H, s, D))
        want = np_attention(q, k, v, D**-0.5, causal)
        np.testing.assert_allclose(exe["forward"](q, k, v), want, rtol=1e-4, atol=1e-5)


def test_symbolic_batch_fuses() -> None:
    mod = export(Sdpa(scale=0.3), ("b", H, S, D))
    assert ops(FuseAttention()(mod)) == ["attention"]
    exe = tc.compile(mod, tc.Target("cpu -mcpu=avx2"))
    assert set(kernels(exe).values()) == {"rule:Attention"}
    for b in (1, 3):
        q, k, v = qkv(b, (b, H, S, D))
        want = np_attention(q, k, v, 0.3, False)
        np.testing.assert_allclose(exe["forward"](q, k, v), want, rtol=1e-4, atol=1e-5)


def test_gpu_targets_keep_the_operators() -> None:
    mod = export(Sdpa(is_causal=True))
    with tc.Target("cuda"):
        assert FuseAttention()(mod)["forward"] is mod["forward"]
    assert ops(FuseAttention()(mod)) == ["attention"]
