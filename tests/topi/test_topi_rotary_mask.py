"""topi.rotary (positions, offsets, token axis) and topi.causal_mask against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as tc
from tilecraft import te, topi
from tilecraft.errors import TilecraftError
from tilecraft.ir import Var


def np_rotary(x: np.ndarray, pos: np.ndarray, theta: float = 10000.0) -> np.ndarray:
    """Rotate-half rotary of x (..., D) with ``pos`` broadcast against x[..., 0]."""
    d = x.shape[-1]
    inv = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    ang = pos[..., None].astype(np.float64) * inv
    cos, sin = np.tile(np.cos(ang), 2), np.tile(np.sin(ang), 2)
    rot = np.concatenate([-x[..., d // 2 :], x[..., : d // 2]], -1)
    return x * cos + rot * sin


def build_run(args: list[te.Tensor], out: te.Tensor, arrays: list[np.ndarray]) -> np.ndarray:
    lib = tc.build(te.create_prim_func([*args, out]), target="cpu")
    res = np.zeros(tuple(int(s.value) for s in out.shape), dtype=str(out.dtype))
    lib["main"](*arrays, res)
    return res


X = np.random.default_rng(0).standard_normal((2, 5, 3, 8))  # (B, S, H, D)


def test_rotary_offset_on_the_seq_axis_of_bshd() -> None:
    x = te.placeholder(X.shape, "float64", name="x")
    got = build_run([x], topi.rotary(x, offset=509, seq_axis=1), [X])
    pos = np.arange(509, 514)[None, :, None]  # positions broadcast over batch and heads
    np.testing.assert_allclose(got, np_rotary(X, pos), rtol=1e-12, atol=1e-12)


def test_rotary_symbolic_offset_is_a_scalar_parameter() -> None:
    x = te.placeholder((4, 8), "float32", name="x")
    n = Var("n", "int32")
    out = topi.rotary(x, offset=n)
    lib = tc.build(te.create_prim_func([x, out]), target="cpu")  # n: trailing scalar
    a = X[0, :4, 0].astype(np.float32)
    res = np.zeros_like(a)
    lib["main"](a, res, 100)
    np.testing.assert_allclose(res, np_rotary(a, np.arange(100, 104)), rtol=1e-4, atol=1e-4)


def test_rotary_positions_1d_and_2d_with_bhsd_layout() -> None:
    xt = X.transpose(0, 2, 1, 3).copy()  # (B, H, S, D)
    x = te.placeholder(xt.shape, "float64", name="x")
    p1 = te.placeholder((5,), "int32", name="p")
    pos1 = np.array([3, 0, 7, 7, 100], np.int32)
    got = build_run([x, p1], topi.rotary(x, p1, seq_axis=2), [xt, pos1])
    np.testing.assert_allclose(got, np_rotary(xt, pos1[None, None, :]), rtol=1e-12, atol=1e-12)
    p2 = te.placeholder((2, 5), "int64", name="p")
    pos2 = np.array([[0, 1, 2, 3, 4], [10, 11, 12, 13, 14]], np.int64)
    got = build_run([x, p2], topi.rotary(x, p2, seq_axis=2), [xt, pos2])
    np.testing.assert_allclose(got, np_rotary(xt, pos2[:, None, :]), rtol=1e-12, atol=1e-12)


def test_rotary_rejects_misuse() -> None:
    x = te.placeholder((2, 5, 3, 8), "float32", name="x")
    with pytest.raises(TilecraftError, match="static and even"):
        topi.rotary(te.placeholder((2, 5, 7), "float32", name="y"))
    with pytest.raises(TilecraftError, match="head-dimension axis"):
        topi.rotary(x, seq_axis=-1)
    with pytest.raises(TilecraftError, match="positions must be integers"):
        topi.rotary(x, te.placeholder((5,), "float32", name="p"), seq_axis=1)
    with pytest.raises(TilecraftError, match="extent 4 does not match the 5 tokens"):
        topi.rotary(x, te.placeholder((4,), "int32", name="p"), seq_axis=1)
    with pytest.raises(TilecraftError, match=r"\(S,\) or \(B, S\)"):
        topi.rotary(x, te.placeholder((2, 5, 1), "int32", name="p"), seq_axis=1)
    with pytest.raises(TilecraftError, match="floating-point"):
        topi.rotary(te.placeholder((2, 8), "int32", name="i"))


@pytest.mark.parametrize(
    ("s", "t", "offset"), [(4, 4, None), (3, 7, None), (1, 9, None), (3, 5, 0)]
)
def test_causal_mask_keeps_keys_up_to_the_query_position(
    s: int, t: int, offset: int | None
) -> None:
    scores = np.random.default_rng(s * t).standard_normal((2, s, t)).astype(np.float32)
    x = te.placeholder(scores.shape, "float32", name="x")
    got = build_run([x], topi.causal_mask(x, offset), [scores])
    off = t - s if offset is None else offset
    keep = np.arange(t)[None, :] <= np.arange(s)[:, None] + off
    np.testing.assert_array_equal(got, np.where(keep, scores, -np.inf))


def test_causal_mask_rejects_more_queries_than_keys() -> None:
    with pytest.raises(TilecraftError, match="no key"):
        topi.causal_mask(te.placeholder((5, 3), "float32", name="x"))
    with pytest.raises(TilecraftError, match="no key"):
        topi.causal_mask(te.placeholder((3, 3), "float32", name="x"), offset=-1)
    with pytest.raises(TilecraftError, match="rank >= 2"):
        topi.causal_mask(te.placeholder((3,), "float32", name="x"))
