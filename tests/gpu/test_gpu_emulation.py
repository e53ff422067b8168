"""GPU-scheduled kernels run on the CPU through emulation and match numpy."""

from __future__ import annotations

import numpy as np
import pytest
from kernels import (
    make_layer_norm,
    make_matmul,
    make_scale_symbolic,
    make_softmax,
    make_transpose,
    make_vector_add,
)

import tilecraft as tc
from tilecraft.testing import check_numeric

GPU = tc.Target("cuda -arch=sm_90")


@pytest.mark.parametrize(
    "make", [make_matmul, make_softmax, make_layer_norm, make_transpose, make_vector_add]
)
def test_emulated_kernel_matches_numpy(make):
    func, ref = make()
    check_numeric(func, ref, emulate_gpu=True, target=GPU, rtol=1e-4, atol=1e-5)


def test_emulated_symbolic_extent_matches_numpy():
    func, ref = make_scale_symbolic()
    for n in (1, 255, 700):
        check_numeric(func, ref, emulate_gpu=True, target=GPU, shape_vars={"n": n})


def test_build_emulate_runs_gpu_schedule_on_cpu():
    func, _ = make_transpose(32)
    lib = tc.build(func, target=GPU, emulate=True)
    a = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
    b = np.zeros_like(a)
    lib["transpose"](a, b)
    np.testing.assert_array_equal(b, a.T)
