"""The C reference semantics of the tensor-core intrinsics against numpy, lane by lane."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from tensor_core_reference import _ptr, ldmatrix, library, mma

from tilecraft.codegen.emulate.tensor_core_semantics import WARP_INTRINSICS
from tilecraft.ir.device_intrin import HARDWARE_OPS
from tilecraft.lower.warp_layouts import (
    accumulator,
    ldmatrix_row,
    matrix_a,
    matrix_b,
)

LANES = range(32)


def _scatter(tile: np.ndarray, layout, n: int) -> np.ndarray:
    """Per-lane fragments ``[32, n]`` of ``tile`` under ``layout``."""
    return np.array([[tile[layout(ln, e)] for e in range(n)] for ln in LANES], dtype=tile.dtype)


def _gather(frags: np.ndarray, layout, shape: tuple[int, int]) -> np.ndarray:
    """The tile whose per-lane fragments are ``frags``; every element set exactly once."""
    tile = np.full(shape, np.nan, np.float64)
    for ln in LANES:
        for e in range(frags.shape[1]):
            r, c = layout(ln, e)
            assert np.isnan(tile[r, c]), f"element {(r, c)} held by two lanes"
            tile[r, c] = frags[ln, e]
    assert not np.isnan(tile).any(), "some element of the tile is held by no lane"
    return tile


def test_every_hardware_intrinsic_has_a_c_reference():
    assert set(WARP_INTRINSICS) >= HARDWARE_OPS
    for w in WARP_INTRINSICS.values():
        assert hasattr(library(), w.c_function)


@pytest.mark.parametrize("dt", [np.float16, "bfloat16"])
def test_mma_m16n8k16_matches_numpy(dt):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 16)).astype(np.float32)
    b = rng.standard_normal((16, 8)).astype(np.float32)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    if dt == "bfloat16":  # bfloat16 = the top half of a float32
        a16 = (a.view(np.uint32) >> 16).astype(np.uint16)
        b16 = (b.view(np.uint32) >> 16).astype(np.uint16)
        a = (a16.astype(np.uint32) << 16).view(np.float32)
        b = (b16.astype(np.uint32) << 16).view(np.float32)
        fa, fb = _scatter(a16, matrix_a, 8), _scatter(b16, matrix_b, 4)
        out = mma(fa, fb, _scatter(c, accumulator, 4), bf16=True)
    else:
        a, b = a.astype(np.float16), b.astype(np.float16)
        out = mma(_scatter(a, matrix_a, 8), _scatter(b, matrix_b, 4), _scatter(c, accumulator, 4))
    d = _gather(out, accumulator, (16, 8))
    ref = a.astype(np.float64) @ b.astype(np.float64) + c
    np.testing.assert_allclose(d, ref, rtol=1e-5, atol=1e-5)


def test_mma_m16n8k16_with_an_fp16_accumulator_rounds_once_per_instruction():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 8)).astype(np.float16)
    c = (rng.standard_normal((16, 8)) * 1e3).astype(np.float16)
    a[0, :], b[:, 0], b[:, 1] = 1.0, 2.0, 0.0
    c[0, 0], c[0, 1] = 65504.0, np.float16(1.5e-6)  # 65504 + 32 rounds to inf; a subnormal
    fa, fb = _scatter(a, matrix_a, 8), _scatter(b, matrix_b, 4)
    out = np.ascontiguousarray(_scatter(c, accumulator, 4))
    library().tc_emu_mma_m16n8k16_f16(_ptr(fa), _ptr(fb), _ptr(out))
    got = _gather(out, accumulator, (16, 8))
    exact = a.astype(np.float32) @ b.astype(np.float32) + c.astype(np.float32)
    with np.errstate(over="ignore"):  # 65536 -> inf, as the instruction rounds it
        want = exact.astype(np.float16)
    assert np.isinf(want[0, 0])
    np.testing.assert_array_equal(got, want.astype(np.float64))


def test_fragment_layouts_partition_their_tiles():
    for layout, n, shape in ((matrix_a, 8, (16, 16)), (matrix_b, 4, (16, 8)),
                             (accumulator, 4, (16, 8))):  # fmt: skip
        _gather(np.zeros((32, n)), layout, shape)


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [0, 1])
def test_ldmatrix_gives_each_lane_its_rows_and_columns(num, trans):
    smem = np.arange(64 * 24, dtype=np.uint16).reshape(64, 24)  # padded rows: stride 24
    # matrix j occupies rows 8j.., columns 8j % 16 (any addresses are allowed)
    rows = [(8 * j + r, (8 * j) % 16) for j in range(4) for r in range(8)]
    offs = np.array([r * 24 + c for r, c in rows], np.int64)
    got = ldmatrix(num, trans, smem, offs)
    for ln in LANES:
        for j in range(num):
            for h in range(2):
                r, c = (2 * (ln % 4) + h, ln // 4) if trans else (ln // 4, 2 * (ln % 4) + h)
                row0, col0 = rows[8 * j]
                assert got[ln, 2 * j + h] == smem[row0 + r, col0 + c]


def test_ldmatrix_x4_loads_the_matrix_a_layout_and_x2_trans_the_matrix_b_layout():
    smem = np.arange(16 * 40, dtype=np.uint16).reshape(16, 40)
    a_offs = [ldmatrix_row(ln, 4) for ln in LANES]
    got = ldmatrix(4, 0, smem, np.array([r * 40 + c + 8 for r, c in a_offs]))
    np.testing.assert_array_equal(got, _scatter(smem[:, 8:24], matrix_a, 8))
    b_offs = [ldmatrix_row(ln, 2) for ln in LANES]
    got = ldmatrix(2, 1, smem, np.array([r * 40 + c + 16 for r, c in b_offs]))
    np.testing.assert_array_equal(got, _scatter(smem[:, 16:24], matrix_b, 4))


@pytest.mark.parametrize("num", [2, 4])
@pytest.mark.parametrize("nk", [False, True], ids=["kn", "nk"])
def test_ldmatrix_loads_matrix_b_tiles_from_kn_and_nk_shared_tiles(num, nk):
    # num // 2 matrixB (k x n) tiles side by side; shared stored k x n (.trans) or n x k
    smem = np.arange(16 * 40, dtype=np.uint16).reshape(16, 40)
    offs = [ldmatrix_row(ln, num, nk=nk) for ln in LANES]
    got = ldmatrix(num, int(not nk), smem, np.array([r * 40 + c + 8 for r, c in offs]))
    width = 4 * num
    kn = smem[:width, 8:24].T if nk else smem[:, 8 : 8 + width]  # the k x n tiles
    want = [_scatter(np.ascontiguousarray(kn[:, 8 * t : 8 * t + 8]), matrix_b, 4)
            for t in range(num // 2)]  # fmt: skip
    np.testing.assert_array_equal(got, np.concatenate(want, axis=1))


def test_warp_gemm_through_ldmatrix_and_mma_matches_numpy():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((16, 32)).astype(np.float16)
    b = rng.standard_normal((32, 8)).astype(np.float16)
    c = np.zeros((32, 4), np.float32)
    for k in range(0, 32, 16):
        fa = ldmatrix(
            4,
            0,
            np.ascontiguousarray(a[:, k : k + 16]),
            np.array([r * 16 + col for r, col in (ldmatrix_row(ln, 4) for ln in LANES)]),
        )
        fb = ldmatrix(
            2,
            1,
            np.ascontiguousarray(b[k : k + 16]),
            np.array([r * 8 + col for r, col in (ldmatrix_row(ln, 2) for ln in LANES)]),
        )
        c = mma(fa.view(np.float16), fb.view(np.float16), c)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(_gather(c, accumulator, (16, 8)), ref, rtol=1e-3, atol=1e-3)


def test_f16_conversion_is_exact_for_every_pattern():
    lib = library()
    bits = np.arange(65536, dtype=np.uint16)
    # decode every pattern through the WMMA load (a plain f16 -> float conversion)
    got = np.zeros((256, 16, 16), np.float32)
    tiles = bits.reshape(256, 16, 16)
    for t in range(256):
        tile = np.ascontiguousarray(tiles[t])
        out = np.zeros((16, 16), np.float32)
        lib.tc_emu_wmma_load_f16(_ptr(out), _ptr(tile), ctypes.c_int64(16))
        got[t] = out
    want = bits.view(np.float16).astype(np.float32).reshape(256, 16, 16)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    assert same.all()


def test_wmma_load_mma_store_match_numpy():
    lib = library()
    rng = np.random.default_rng(2)
    a = rng.standard_normal((16, 24)).astype(np.float16)  # ldm 24
    b = rng.standard_normal((16, 16)).astype(np.float16)
    fa, fb, fc = (np.zeros((16, 16), np.float32) for _ in range(3))
    lib.tc_emu_wmma_load_f16(_ptr(fa), _ptr(a.view(np.uint16)), ctypes.c_int64(24))
    lib.tc_emu_wmma_load_f16(_ptr(fb), _ptr(b.view(np.uint16)), ctypes.c_int64(16))
    lib.tc_emu_wmma_fill(_ptr(fc), ctypes.c_float(0.5))
    lib.tc_emu_wmma_mma(_ptr(fc), _ptr(fa), _ptr(fb), _ptr(fc))
    out = np.zeros((16, 20), np.float32)
    lib.tc_emu_wmma_store_f32(_ptr(out), ctypes.c_int64(20), _ptr(fc))
    ref = a[:, :16].astype(np.float64) @ b.astype(np.float64) + 0.5
    np.testing.assert_allclose(out[:, :16], ref, rtol=1e-5, atol=1e-5)
    assert (out[:, 16:] == 0).all()


def test_wmma_s8_mma_matches_numpy_and_wraps():
    lib = library()
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (16, 16), dtype=np.int8)
    b = rng.integers(-128, 128, (16, 16), dtype=np.int8)
    c = rng.integers(-(2**31), 2**31, (16, 16), dtype=np.int64).astype(np.int32)
    c[0, 0] = 2**31 - 1  # int32 accumulation wraps, as the hardware's
    d = np.zeros((16, 16), np.int32)
    lib.tc_emu_wmma_mma_s8(_ptr(d), _ptr(a), _ptr(b), _ptr(c))
    ref = a.astype(np.int64) @ b.astype(np.int64) + c.astype(np.int64)
    np.testing.assert_array_equal(d, ((ref + 2**31) % 2**32 - 2**31).astype(np.int32))


class _AsyncState(ctypes.Structure):
    _fields_ = [
        ("dst", ctypes.c_void_p * 256),
        ("src", ctypes.c_void_p * 256),
        ("bytes", ctypes.c_int * 256),
        ("group", ctypes.c_int * 256),
        ("count", ctypes.c_int),
        ("committed", ctypes.c_int),
    ]


def test_cp_async_copies_complete_at_the_wait_for_their_group():
    lib = library()
    st = _AsyncState()
    src = np.arange(16, dtype=np.uint8).reshape(4, 4) + 1
    dst = np.zeros((4, 4), np.uint8)
    for g in range(3):  # groups 0, 1 committed; the third copy stays uncommitted
        lib.tc_emu_cp_async(
            ctypes.byref(st),
            ctypes.c_void_p(dst[g].ctypes.data),
            ctypes.c_void_p(src[g].ctypes.data),
            4,
        )
        if g < 2:
            lib.tc_emu_cp_async_commit(ctypes.byref(st))
    assert not dst.any()  # nothing lands before a wait
    lib.tc_emu_cp_async_wait(ctypes.byref(st), 1)  # all but the newest committed group
    np.testing.assert_array_equal(dst[0], src[0])
    assert not dst[1:].any()
    lib.tc_emu_cp_async_wait(ctypes.byref(st), 0)
    np.testing.assert_array_equal(dst[:2], src[:2])
    assert not dst[2].any()  # an uncommitted copy is in no group: no wait completes it
    lib.tc_emu_cp_async_commit(ctypes.byref(st))
    lib.tc_emu_cp_async_wait(ctypes.byref(st), 0)
    np.testing.assert_array_equal(dst[:3], src[:3])
