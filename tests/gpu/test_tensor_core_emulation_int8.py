"""The C reference semantics of the int8 tensor-core intrinsics (``ldmatrix`` on int8 rows,
``mma.sync`` m16n8k32 ``.s32.s8.s8.s32``) against numpy and the fragment layouts."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from tensor_core_reference import _ptr, library

from tilecraft.lower.warp_layouts import accumulator, ldmatrix_row, matrix_a_s8, matrix_b_s8

LANES = range(32)


def _scatter(tile: np.ndarray, layout, n: int) -> np.ndarray:
    return np.array([[tile[layout(ln, e)] for e in range(n)] for ln in LANES], dtype=tile.dtype)


def _ldmatrix_b8(num: int, smem: np.ndarray, rows: list[tuple[int, int]]) -> np.ndarray:
    """Lane ``l`` (< 8 num) addresses ``smem[rows[l]]``; returns ``[32, 16]`` int8."""
    ptrs = (ctypes.c_void_p * 32)()
    for ln in range(8 * num):
        r, c = rows[ln]
        ptrs[ln] = smem.ctypes.data + r * smem.strides[0] + c
    out = np.zeros((32, 16), np.int8)
    library().tc_emu_ldmatrix_b8(ctypes.c_int(num), ptrs, _ptr(out))
    return out


def test_int8_fragment_layouts_partition_their_tiles():
    for layout, n, shape in ((matrix_a_s8, 16, (16, 32)), (matrix_b_s8, 8, (32, 8))):
        seen = {layout(ln, e) for ln in LANES for e in range(n)}
        assert len(seen) == 32 * n == shape[0] * shape[1]
        assert all(0 <= r < shape[0] and 0 <= c < shape[1] for r, c in seen)


def test_mma_m16n8k32_matches_numpy_exactly():
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (16, 32), dtype=np.int8)
    b = rng.integers(-128, 128, (32, 8), dtype=np.int8)
    c = rng.integers(-(2**20), 2**20, (16, 8), dtype=np.int32)
    fa, fb = _scatter(a, matrix_a_s8, 16), _scatter(b, matrix_b_s8, 8)
    out = np.ascontiguousarray(_scatter(c, accumulator, 4))
    library().tc_emu_mma_m16n8k32_s8(_ptr(fa), _ptr(fb), _ptr(out))
    want = a.astype(np.int64) @ b.astype(np.int64) + c
    got = np.zeros((16, 8), np.int64)
    for ln in LANES:
        for e in range(4):
            got[accumulator(ln, e)] = out[ln, e]
    np.testing.assert_array_equal(got, want)


def test_ldmatrix_x4_on_int8_rows_loads_the_matrix_a_layout():
    smem = np.arange(16 * 48, dtype=np.int64).astype(np.int8).reshape(16, 48)
    rows = [(r, 2 * c + 16) for r, c in (ldmatrix_row(ln, 4) for ln in LANES)]
    got = _ldmatrix_b8(4, smem, rows)
    np.testing.assert_array_equal(got, _scatter(smem[:, 16:48], matrix_a_s8, 16))


@pytest.mark.parametrize("num", [2, 4])
def test_ldmatrix_on_int8_nk_rows_loads_matrix_b_tiles(num):
    smem = (np.arange(16 * 48, dtype=np.int64) * 7).astype(np.int8).reshape(16, 48)
    rows = [(r, 2 * c + 16) for r, c in (ldmatrix_row(ln, num, nk=True) for ln in LANES)]
    got = _ldmatrix_b8(num, smem, rows)[:, : 4 * num]
    kn = smem[: 4 * num, 16:48].T  # the k x n tiles of an n x k shared tile
    want = [_scatter(np.ascontiguousarray(kn[:, 8 * t : 8 * t + 8]), matrix_b_s8, 8)
            for t in range(num // 2)]  # fmt: skip
    np.testing.assert_array_equal(got, np.concatenate(want, axis=1))
