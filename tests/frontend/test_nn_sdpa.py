"""``nn.functional.scaled_dot_product_attention`` is torch's: (batch, heads, seq, head_dim),
``attn_mask=None, is_causal=False, scale=None``; ``F.attention`` is a deprecated alias."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.frontend import nn
from tilecraft.frontend.nn import functional as F  # noqa: N812

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(3)


class Fn(nn.Module):
    def __init__(self, fn: Callable[..., nn.Tensor]) -> None:
        self.fn = fn

    def forward(self, *xs: nn.Tensor) -> nn.Tensor:
        return self.fn(*xs)


def run(fn: Callable[..., nn.Tensor], *inputs: np.ndarray) -> np.ndarray:
    spec = {f"x{i}": nn.spec.Tensor(a.shape, str(a.dtype)) for i, a in enumerate(inputs)}
    mod, params = Fn(fn).export({"forward": spec})
    out: np.ndarray = tc.compile(mod, target="cpu", params=params)(*inputs)
    return out


def qkv(hq: int, hkv: int, s: int, t: int, d: int = 8) -> list[np.ndarray]:
    shapes = [(2, hq, s, d), (2, hkv, t, d), (2, hkv, t, d)]
    return [RNG.standard_normal(sh).astype("float32") for sh in shapes]


def torch_sdpa(*arrays: np.ndarray, **kwargs: object) -> np.ndarray:
    ts = [torch.from_numpy(a) if isinstance(a, np.ndarray) else a for a in arrays]
    if ts[0].shape[1] != ts[1].shape[1]:
        kwargs["enable_gqa"] = True
    out: np.ndarray = torch.nn.functional.scaled_dot_product_attention(*ts, **kwargs).numpy()
    return out


@pytest.mark.parametrize(("hq", "hkv", "s", "t"), [(4, 4, 5, 5), (4, 2, 3, 7), (6, 3, 6, 4)])
@pytest.mark.parametrize("is_causal", [False, True])
def test_matches_torch_with_its_defaults_and_is_causal(hq, hkv, s, t, is_causal) -> None:  # type: ignore[no-untyped-def]
    q, k, v = qkv(hq, hkv, s, t)
    got = run(lambda *x: F.scaled_dot_product_attention(*x, is_causal=is_causal), q, k, v)
    want = torch_sdpa(q, k, v, is_causal=is_causal)  # upper-left aligned when s != t
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_default_call_and_scale_match_torch() -> None:
    q, k, v = qkv(2, 2, 4, 6)
    np.testing.assert_allclose(
        run(F.scaled_dot_product_attention, q, k, v), torch_sdpa(q, k, v), rtol=1e-4, atol=1e-5
    )
    got = run(lambda *x: F.scaled_dot_product_attention(*x, scale=0.3), q, k, v)
    np.testing.assert_allclose(got, torch_sdpa(q, k, v, scale=0.3), rtol=1e-4, atol=1e-5)


# grouped heads (4, 2) with every mask shape by default; (4, 4) under -m slow
@pytest.mark.parametrize(("hq", "hkv"), [pytest.param(4, 4, marks=pytest.mark.slow), (4, 2)])
@pytest.mark.parametrize("mask_shape", [(3, 7), (2, 1, 3, 7), (1, 4, 3, 7)])
def test_bool_and_float_masks_match_torch(hq, hkv, mask_shape) -> None:  # type: ignore[no-untyped-def]
    q, k, v = qkv(hq, hkv, 3, 7)
    keep = RNG.random(mask_shape) < 0.7
    keep[..., 0] = True  # torch gives NaN for a row with no key
    bias = RNG.standard_normal(mask_shape).astype("float32")
    for mask in (keep, bias):
        got = run(lambda *x: F.scaled_dot_product_attention(*x[:3], attn_mask=x[3]), q, k, v, mask)
        want = torch_sdpa(q, k, v, attn_mask=torch.from_numpy(mask))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_causal_lower_right_is_torchs_bias_and_the_old_causal_meaning() -> None:
    from torch.nn.attention.bias import causal_lower_right

    q, k, v = qkv(4, 2, 3, 7)
    want = torch_sdpa(q, k, v, attn_mask=causal_lower_right(3, 7))
    got = run(
        lambda *x: F.scaled_dot_product_attention(*x, attn_mask=F.causal_lower_right()), q, k, v
    )
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    with pytest.warns(DeprecationWarning, match=r"causal=\.\.\.\) is deprecated.*is_causal=True"):
        old = run(lambda *x: F.scaled_dot_product_attention(*x, causal=True), q, k, v)
    np.testing.assert_allclose(old, want, rtol=1e-4, atol=1e-5)
    upper = run(
        lambda *x: F.scaled_dot_product_attention(*x, attn_mask=F.causal_upper_left()), q, k, v
    )
    np.testing.assert_allclose(upper, torch_sdpa(q, k, v, is_causal=True), rtol=1e-4, atol=1e-5)


def test_deprecated_attention_alias_warns_and_forwards_on_its_old_layout() -> None:
    q, k, v = qkv(4, 4, 3, 7)
    bshd = [a.transpose(0, 2, 1, 3).copy() for a in (q, k, v)]
    with pytest.warns(DeprecationWarning, match=r"scaled_dot_product_attention.*batch, heads"):
        got = run(F.attention, *bshd)  # its default: causal, aligned with the last keys
    from torch.nn.attention.bias import causal_lower_right

    want = torch_sdpa(q, k, v, attn_mask=causal_lower_right(3, 7)).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_misuse_is_reported_with_the_parameters() -> None:
    spec = {n: nn.spec.Tensor((1, 2, 3, 8)) for n in "qkv"}

    def export(fn: Callable[..., nn.Tensor]) -> None:
        Fn(fn).export({"forward": spec})

    with pytest.raises(nn.FrontendError, match=r"dropout_p=0.1 is training-only; pass 0.0"):
        export(lambda *x: F.scaled_dot_product_attention(*x, dropout_p=0.1))
    with pytest.raises(nn.FrontendError, match=r"is_causal=True or attn_mask, not both"):
        export(lambda *x: F.scaled_dot_product_attention(*x, x[0], is_causal=True))
    with pytest.raises(nn.FrontendError, match=r"unknown argument 'mask'; the parameters are"):
        export(lambda *x: F.scaled_dot_product_attention(*x, mask=None))
    with pytest.raises(nn.FrontendError, match=r"attn_mask must be an nn tensor"):
        export(lambda *x: F.scaled_dot_product_attention(*x, attn_mask=1.0))
    with pytest.raises(nn.FrontendError, match=r"attn_mask .* must be bool or float32.*astype"):
        export(lambda *x: F.scaled_dot_product_attention(*x, attn_mask=x[0].astype("int32")))
