"""Graph ops and nn functionals for KV-cache attention: rotary, causal_mask, grouped-query
scaled_dot_product_attention, constants and inference batch norm."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.frontend import nn
from tilecraft.frontend.nn import functional as F  # noqa: N812
from tilecraft.graph import GraphBuilder, GraphError, get_pipeline


def run(model: nn.Module, spec: dict[str, nn.spec.Tensor], *inputs: np.ndarray) -> np.ndarray:
    mod, params = model.export({"forward": spec})
    with tc.Target("cpu"):
        exe = tc.build(get_pipeline("zero")(mod), "cpu")
    return exe["forward"](*inputs, *params.values())  # type: ignore[no-any-return]


def np_rotary(x: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """(B, H, S, D) x at positions pos (S,)."""
    d = x.shape[-1]
    ang = pos[:, None] * 10000.0 ** (-np.arange(0, d, 2) / d)
    rot = np.concatenate([-x[..., d // 2 :], x[..., : d // 2]], -1)
    return x * np.tile(np.cos(ang), 2) + rot * np.tile(np.sin(ang), 2)


def np_sdpa(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    g = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, g, 1), np.repeat(v, g, 1)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    if causal:
        ns, nt = s.shape[-2:]
        s = np.where(np.arange(nt)[None] <= np.arange(ns)[:, None] + nt - ns, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


class Fn(nn.Module):
    def __init__(self, fn) -> None:  # type: ignore[no-untyped-def]
        self.fn = fn

    def forward(self, *xs: nn.Tensor) -> nn.Tensor:
        return self.fn(*xs)  # type: ignore[no-any-return]


RNG = np.random.default_rng(0)


def randn(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize(("hq", "hkv", "s", "t"), [(6, 2, 3, 7), (4, 4, 5, 5), (8, 2, 1, 9)])
def test_grouped_query_attention_over_a_longer_key_sequence(hq, hkv, s, t) -> None:  # type: ignore[no-untyped-def]
    q, k, v = randn(1, hq, s, 8), randn(1, hkv, t, 8), randn(1, hkv, t, 8)
    spec = {n: nn.spec.Tensor(a.shape) for n, a in zip("qkv", (q, k, v), strict=True)}
    for causal in (True, False):

        def sdpa(*xs: nn.Tensor, causal: bool = causal) -> nn.Tensor:
            mask = F.causal_lower_right() if causal else None
            return F.scaled_dot_product_attention(*xs, attn_mask=mask)

        got = run(Fn(sdpa), spec, q, k, v)
        want = np_sdpa(q.astype(np.float64), k, v, causal)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_attention_kernels_are_einsum_matmuls_with_fused_scale_and_mask() -> None:
    shapes = {"q": (1, 8, 1, 16), "k": (1, 2, 9, 16), "v": (1, 2, 9, 16)}
    model = Fn(lambda *xs: F.scaled_dot_product_attention(*xs, attn_mask=F.causal_lower_right()))
    mod, _ = model.export({"forward": {n: nn.spec.Tensor(s) for n, s in shapes.items()}})
    with tc.Target("cpu"):
        mod = get_pipeline("zero")(mod)
    calls = [b.value.func for b in mod["forward"].bindings if hasattr(b.value, "func")]
    # the grouped q view is free to fuse; k and v get a unit group axis (no copy per q head)
    assert calls == [
        "reshape",
        "reshape1",
        "reshape1",
        "fused_matmul_multiply_causal_mask",
        "softmax",
        "matmul1",
        "reshape2",
    ], calls
    scores = mod["fused_matmul_multiply_causal_mask"].script()
    assert "T.Buffer((1, 2, 4, 1, 9)" in scores  # (B, Hkv, G, S, T): 4 query heads per kv head


def test_attention_rejects_misuse() -> None:
    def export(q, k, v) -> None:  # type: ignore[no-untyped-def]
        spec = {"q": nn.spec.Tensor(q), "k": nn.spec.Tensor(k), "v": nn.spec.Tensor(v)}
        Fn(F.scaled_dot_product_attention).export({"forward": spec})

    with pytest.raises(nn.FrontendError, match="6 query heads are not a multiple of 4"):
        export((1, 6, 2, 8), (1, 4, 2, 8), (1, 4, 2, 8))
    with pytest.raises(nn.FrontendError, match="same heads and keys"):
        export((1, 4, 2, 8), (1, 2, 3, 8), (1, 2, 5, 8))
    with pytest.raises(nn.FrontendError, match="head_dim 8 != k head_dim 4"):
        export((1, 4, 2, 8), (1, 2, 3, 4), (1, 2, 3, 4))
    with pytest.raises(nn.FrontendError, match=r"\(batch, heads, seq, head_dim\)"):
        export((4, 2, 8), (1, 2, 3, 8), (1, 2, 3, 8))
    with pytest.raises(nn.FrontendError, match="number of query heads must be static"):
        export((1, "h", 2, 8), (1, 2, 3, 8), (1, 2, 3, 8))


def test_rotary_graph_op_at_positions_or_offset_in_both_layouts() -> None:
    x = randn(1, 3, 4, 8)  # BHSD
    pos = np.array([5, 9, 2, 0], np.int32)
    want = np_rotary(x.astype(np.float64), pos.astype(np.float64))
    spec = {"x": nn.spec.Tensor(x.shape), "p": nn.spec.Tensor((4,), "int32")}
    got = run(Fn(lambda t, p: F.rotary(t, positions=p, layout="BHSD")), spec, x, pos)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    xs = x.transpose(0, 2, 1, 3).copy()  # BSHD, default layout
    got = run(Fn(lambda t: F.rotary(t, offset=7)), {"x": nn.spec.Tensor(xs.shape)}, xs)
    want = np_rotary(x.astype(np.float64), np.arange(7.0, 11.0)).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _infer(op: str, shapes: list[tuple[tuple[int, ...], str]], **attrs: object) -> None:
    bb = GraphBuilder()
    args = [bb.param(f"a{i}", s, dt) for i, (s, dt) in enumerate(shapes)]
    bb.emit(op, args, attrs)


def test_rotary_and_causal_mask_type_errors() -> None:
    x = ((1, 4, 2, 8), "float32")
    with pytest.raises(GraphError, match="positions must be integers"):
        _infer("rotary", [x, ((4,), "float32")])
    with pytest.raises(GraphError, match="either positions or a nonzero offset"):
        _infer("rotary", [x, ((4,), "int32")], offset=3)
    with pytest.raises(GraphError, match=r"positions must be \(4,\) or \(1, 4\)"):
        _infer("rotary", [x, ((2,), "int32")])
    with pytest.raises(GraphError, match=r"positions must be .* got Tensor\(\(1, 4, 1\)"):
        _infer("rotary", [x, ((1, 4, 1), "int32")])  # rank 3: a GraphError, not a ValueError
    _infer("rotary", [x, ((2,), "int32")], layout="BHSD")  # BHSD: tokens on axis 2
    with pytest.raises(GraphError, match="'layout' must be one of"):
        _infer("rotary", [x], layout="SBHD")
    with pytest.raises(GraphError, match="'offset' must be >= 0"):
        _infer("rotary", [x], offset=-1)
    with pytest.raises(GraphError, match="head_dim must be even"):
        _infer("rotary", [((1, 4, 2, 7), "float32")])
    with pytest.raises(GraphError, match="at least as many keys as queries"):
        _infer("causal_mask", [((2, 5, 3), "float32")])
    with pytest.raises(GraphError, match="offset -2"):
        _infer("causal_mask", [((2, 3, 3), "float32")], offset=-2)
    with pytest.raises(GraphError, match="floating-point"):
        _infer("causal_mask", [((3, 3), "int32")])
    _infer("causal_mask", [((2, 5, 3), "float32")], offset=4)  # explicit offsets may exceed


def test_constant_is_folded_with_bound_parameters() -> None:
    class Scaled(nn.Module):
        def __init__(self) -> None:
            self.w = nn.Parameter((4,))

        def forward(self, x: nn.Tensor) -> nn.Tensor:
            return x * (self.w + F.constant(2.0)) + F.constant([1.0, 2.0, 3.0, 4.0])

    mod, params = Scaled().export({"forward": {"x": nn.spec.Tensor((3, 4))}})
    x = randn(3, 4)
    want = x * (params["w"] + 2.0) + np.arange(1.0, 5.0)
    with tc.Target("cpu"):
        zero = tc.build(get_pipeline("zero")(mod), "cpu")
        folded = get_pipeline("default", params=params)(mod)
    # float32 arithmetic against a float64 reference: an element near zero after the add
    # keeps the absolute rounding error of its operands (~1e-7 at magnitude 1), not a
    # relative one, so the check allows a few float32 ulps of the operands' scale
    tol = {"rtol": 1e-6, "atol": 4 * np.finfo(np.float32).eps * float(np.abs(want).max())}
    np.testing.assert_allclose(zero["forward"](x, params["w"]), want, **tol)
    assert [b.value.func for b in folded["forward"].bindings if hasattr(b.value, "func")] == [
        "fused_multiply_add"
    ]
    np.testing.assert_allclose(tc.build(folded, "cpu")["forward"](x), want, **tol)


def test_batch_norm_matches_numpy_and_folds_to_one_multiply_add() -> None:
    bn = nn.BatchNorm2d(3, eps=1e-3)
    state = {
        "weight": randn(3),
        "bias": randn(3),
        "running_mean": randn(3),
        "running_var": np.abs(randn(3)) + 0.5,
    }
    bn.load_state_dict(state)
    assert [n for n, _ in bn.named_parameters()] == list(state)  # PyTorch's names
    x = randn(2, 3, 4, 5)
    ch = {k: v.astype(np.float64)[None, :, None, None] for k, v in state.items()}
    want = (x - ch["running_mean"]) / np.sqrt(ch["running_var"] + 1e-3) * ch["weight"] + ch["bias"]
    got = run(bn, {"x": nn.spec.Tensor(("n", 3, 4, 5))}, x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    mod, params = bn.export({"forward": {"x": nn.spec.Tensor((2, 3, 4, 5))}})
    with tc.Target("cpu"):
        folded = get_pipeline("default", params=params)(mod)
    kernels = [b.value.func for b in folded["forward"].bindings if hasattr(b.value, "func")]
    # scale and shift were computed once: x sees one fused multiply-add kernel
    assert len(kernels) == 1, kernels
    assert kernels[0].startswith("fused_multiply"), kernels
    assert "rsqrt" not in folded.script()
    with pytest.raises(nn.FrontendError, match=r"running_var must have shape \(3,\)"):
        Fn(lambda t, w: F.batch_norm(t, w, w, w, t)).export(
            {"forward": {"x": nn.spec.Tensor((1, 3, 2, 2)), "w": nn.spec.Tensor((3,))}}
        )


def test_transpose_then_reshape_over_a_symbolic_extent_builds() -> None:
    # regression: CompactBufferAllocation gave the fused intermediate an int32-max extent
    # ('x // 32 % seq' unbounded) and FlattenBuffer raised IRError
    model = Fn(lambda t: t.permute_dims(0, 2, 1, 3).reshape(1, t.shape[2], 32))
    x = randn(1, 2, 5, 16)
    got = run(model, {"x": nn.spec.Tensor((1, 2, "seq", 16))}, x)
    np.testing.assert_array_equal(got, x.transpose(0, 2, 1, 3).reshape(1, 5, 32))
