"""The cuBLAS arguments of a row-major GEMM, checked without a GPU.

:func:`~tilecraft.runtime.executor.extern_cublas.cublas_args` maps a row-major
``out = op(A) @ op(B)`` (batched, either operand shared, either transposed) to one
column-major ``cublasGemmEx`` / ``cublasGemmStridedBatchedEx`` call. Here an independent
interpreter of cuBLAS's documented semantics (element ``(r, c)`` of a column-major matrix at
``offset + r + c * ld``, matrix ``i`` of a batch at ``i * stride``), written with plain index
arithmetic, runs those arguments on the operands' memory and must give numpy's matmul; the
argument rules cuBLAS checks (leading dimensions, no overlapping results) are asserted too.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tilecraft.errors import GraphError
from tilecraft.runtime.executor.extern_cublas import (
    CublasArgs,
    column_major_view,
    cublas_args,
    gemm_shape,
    host_gemm,
)


def _element(flat: np.ndarray, ld: int, offset: int, r: np.ndarray, c: np.ndarray) -> np.ndarray:
    index = offset + r + c * ld
    assert index.size == 0 or (index.min() >= 0 and index.max() < flat.size), "out of range"
    return flat[index]


def _interpret(args: CublasArgs, a: np.ndarray, b: np.ndarray, out_size: int) -> np.ndarray:
    """What cuBLAS writes to C's memory for ``args`` (first operand B, second A), float64."""
    fb, fa = b.reshape(-1).astype(np.float64), a.reshape(-1).astype(np.float64)
    c = np.full(out_size, np.nan)
    rows, cols, ks = np.arange(args.m), np.arange(args.n), np.arange(args.k)
    r, col, kk = rows[:, None, None], cols[None, :, None], ks[None, None, :]
    for i in range(args.batch_count):
        # op(first)[r, k] and op(second)[k, c]: a transposed operand is stored k x m / n x k
        if args.trans_first:
            x = _element(fb, args.ld_first, i * args.stride_first, kk, r)
        else:
            x = _element(fb, args.ld_first, i * args.stride_first, r, kk)
        if args.trans_second:
            y = _element(fa, args.ld_second, i * args.stride_second, col, kk)
        else:
            y = _element(fa, args.ld_second, i * args.stride_second, kk, col)
        at = i * args.stride_c + rows[:, None] + cols[None, :] * args.ldc
        assert at.size == 0 or at.max() < out_size
        c[at] = (x * y).sum(axis=-1)
    return c


def _cases() -> list[tuple[bool, bool, tuple[int, ...], tuple[int, ...]]]:
    m, n, k = 5, 3, 4
    out: list[tuple[bool, bool, tuple[int, ...], tuple[int, ...]]] = []
    for trans_a, trans_b in itertools.product((False, True), repeat=2):
        a2 = (k, m) if trans_a else (m, k)
        b2 = (n, k) if trans_b else (k, n)
        for a_batch, b_batch in [((), ()), ((2,), ()), ((), (2,)), ((2, 3), (2, 3)), ((1,), ())]:
            out.append((trans_a, trans_b, (*a_batch, *a2), (*b_batch, *b2)))
    return out


@pytest.mark.parametrize(("trans_a", "trans_b", "a_shape", "b_shape"), _cases())
def test_arguments_compute_the_row_major_product(
    trans_a: bool, trans_b: bool, a_shape: tuple[int, ...], b_shape: tuple[int, ...]
) -> None:
    rng = np.random.default_rng(len(a_shape) * 7 + len(b_shape))
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    at = np.swapaxes(a, -1, -2) if trans_a else a
    bt = np.swapaxes(b, -1, -2) if trans_b else b
    want = np.matmul(at.astype(np.float64), bt.astype(np.float64))
    g = gemm_shape(a, b, want, trans_a, trans_b)
    args = cublas_args(g)
    # cuBLAS's own argument rules: leading dimensions cover the stored rows
    stored_first = args.k if args.trans_first else args.m
    stored_second = args.n if args.trans_second else args.k
    assert args.ld_first >= max(1, stored_first)
    assert args.ld_second >= max(1, stored_second)
    assert args.ldc >= max(1, args.m)
    if args.strided:  # results of a batch never overlap; a shared operand has stride 0
        assert args.stride_c >= args.ldc * args.n
        assert args.stride_first == (0 if len(b_shape) == 2 else g.k * g.n)
        assert args.stride_second == (0 if len(a_shape) == 2 else g.m * g.k)
    else:
        assert args.batch_count == 1
    got = _interpret(args, a, b, want.size)
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-12, atol=1e-12)
    out = np.full(want.shape, np.nan, np.float32)  # the emulated call runs the same arguments
    host_gemm(a, b, out, trans_a, trans_b)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_linear_layer_is_one_gemm_ex_with_operands_swapped() -> None:
    # x (5, 16) @ W^T with W (32, 16): column-major C^T (32 x 5) = op(W^T) ... transa on W
    g = gemm_shape(np.empty((5, 16)), np.empty((32, 16)), np.empty((5, 32)), False, True)
    assert cublas_args(g) == CublasArgs(
        trans_first=True, trans_second=False, m=32, n=5, k=16, ld_first=16, ld_second=16,
        ldc=32, stride_first=0, stride_second=0, stride_c=0, batch_count=1, strided=False,
    )  # fmt: skip


def test_a_batch_against_a_shared_weight_folds_into_one_call() -> None:
    g = gemm_shape(np.empty((3, 7, 8)), np.empty((8, 4)), np.empty((3, 7, 4)), False, False)
    args = cublas_args(g)
    assert (args.strided, args.m, args.n, args.k) == (False, 4, 21, 8)
    g = gemm_shape(np.empty((3, 8, 7)), np.empty((8, 4)), np.empty((3, 7, 4)), True, False)
    args = cublas_args(g)  # a transposed A cannot fold: strided, B shared
    assert (args.strided, args.batch_count, args.stride_first, args.stride_second) == (
        True, 3, 0, 56,
    )  # fmt: skip


@pytest.mark.parametrize(("m", "n", "k"), [(0, 3, 4), (2, 0, 4), (2, 3, 0), (1, 1, 1)])
def test_empty_and_unit_extents(m: int, n: int, k: int) -> None:
    a = np.ones((2, m, k), np.float16)
    b = np.ones((2, k, n), np.float16)
    out = np.full((2, m, n), np.nan, np.float32)
    host_gemm(a, b, out)
    np.testing.assert_array_equal(out, np.full((2, m, n), float(k), np.float32))


def test_non_contiguous_result_is_written_in_place() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    buf = np.zeros((4, 2), np.float32)
    host_gemm(a, b, buf.T)  # a transposed view: the result lands in buf
    np.testing.assert_array_equal(buf.T, a @ b)


def test_a_leading_dimension_or_extent_past_the_buffer_is_refused() -> None:
    flat = np.zeros(12, np.float32)
    with pytest.raises(GraphError, match="leading dimension 2 < 3 rows"):
        column_major_view(flat, 3, 4, 2, 0, 1)
    with pytest.raises(GraphError, match="overruns its buffer"):
        column_major_view(flat, 3, 4, 3, 12, 2)
    assert column_major_view(flat, 3, 4, 3, 0, 2).shape == (2, 3, 4)
