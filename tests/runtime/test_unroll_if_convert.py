"""gcc 12.2 miscompiles a completely unrolled loop around a fill loop and guarded stores.

Found by the random-schedule campaign (``decompose_padding`` of a conv2d padding block, then
``unroll`` of its channel loop). The C below has no tilecraft in it: at ``-O3 -mavx2`` (or
``-march=native`` on an AVX2 machine) gcc 12.2 if-converts the guarded stores into masked
stores and writes wrong elements when ``#pragma GCC unroll 4`` unrolls the outer loop
completely; ``-O2``, a partial unroll or ``-fno-tree-loop-if-convert`` give the right result.
Sources holding ``#pragma GCC unroll`` are therefore compiled with the guard flag.
"""

from __future__ import annotations

import ctypes

import numpy as np

from tilecraft.runtime.compiler import compile_shared

REPRODUCER = """
void pad(const float* restrict X, float* restrict P) {
  #pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    for (int h = 0; h < 10; ++h) {
      for (int w = 0; w < 10; ++w) {
        P[c * 100 + h * 10 + w] = 0.0f;
      }
      for (int w = 1; w < 9; ++w) {
        if (0 < h && h < 9) {
          P[c * 100 + h * 10 + w] = X[c * 64 + h * 8 + w - 9];
        }
      }
    }
  }
}
"""


def test_completely_unrolled_guarded_stores_compile_correctly() -> None:
    lib = ctypes.CDLL(str(compile_shared(REPRODUCER)))
    x = np.arange(1, 257, dtype=np.float32)
    p = np.full(400, np.nan, dtype=np.float32)
    ptr = ctypes.POINTER(ctypes.c_float)
    lib.pad(x.ctypes.data_as(ptr), p.ctypes.data_as(ptr))
    want = np.pad(x.reshape(4, 8, 8), ((0, 0), (1, 1), (1, 1)))
    np.testing.assert_array_equal(p.reshape(4, 10, 10), want)
