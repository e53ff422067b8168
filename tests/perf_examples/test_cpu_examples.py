"""Correctness of the hand-written CPU schedules of ``examples/`` (timing is the benchmark's job).

Each schedule is checked against the unscheduled function on small shapes, and against numpy
on the real benchmark shapes; its trace replays to the same function.
"""

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.schedule.testing_utils import verify_trace_roundtrip
from tilecraft.testing import check_numeric


@pytest.mark.parametrize(("m", "n", "k", "mr", "nr"), [(64, 64, 64, 8, 32), (32, 64, 48, 4, 16)])
def test_matmul_schedule_matches_unscheduled(cpu_matmul, m, n, k, mr, nr):
    func = cpu_matmul.matmul_func(m, n, k)
    sch = cpu_matmul.schedule_matmul(func, mr=mr, nr=nr)
    check_numeric(sch.func, func, rtol=1e-4, atol=1e-5)
    verify_trace_roundtrip(sch, func)


def test_matmul_schedule_emits_register_tile(cpu_matmul):
    sch = cpu_matmul.schedule_matmul(cpu_matmul.matmul_func(64, 64, 64))
    src = tc.codegen.c_source(sch.mod)
    # an 8 x 32 accumulator on the stack
    assert "float matmul_local[256] __attribute__((aligned(64)));" in src
    assert "#pragma GCC unroll 8" in src
    assert "#pragma omp parallel for" in src
    assert "tc_floordiv" not in src


def test_matmul_schedule_real_shape(cpu_matmul):
    func = cpu_matmul.matmul_func(1024, 1024, 1024)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((1024, 1024), dtype=np.float32)
    b = rng.standard_normal((1024, 1024), dtype=np.float32)
    check_numeric(
        cpu_matmul.schedule_matmul(func).func, lambda x, y: x @ y, inputs=[a, b],
        rtol=1e-4, atol=1e-5,
    )  # fmt: skip


@pytest.mark.parametrize(("rows", "cols"), [(8, 64), (5, 48)])
def test_softmax_schedule_matches_unscheduled(cpu_norms, rows, cols):
    func = cpu_norms.softmax_func(rows, cols)
    sch = cpu_norms.schedule_softmax(func)
    check_numeric(sch.func, func)
    verify_trace_roundtrip(sch, func)


@pytest.mark.parametrize(("rows", "cols"), [(8, 64), (3, 32)])
def test_layer_norm_schedule_matches_unscheduled(cpu_norms, rows, cols):
    func = cpu_norms.layer_norm_func(rows, cols)
    sch = cpu_norms.schedule_layer_norm(func)
    check_numeric(sch.func, func, rtol=1e-4, atol=1e-5)
    verify_trace_roundtrip(sch, func)


def test_norm_schedules_real_shape(cpu_norms):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4096, 1024), dtype=np.float32)
    gamma = rng.standard_normal(1024, dtype=np.float32)
    beta = rng.standard_normal(1024, dtype=np.float32)
    softmax = cpu_norms.schedule_softmax(cpu_norms.softmax_func(4096, 1024))
    check_numeric(softmax.func, cpu_norms.softmax_ref, inputs=[x], rtol=1e-4, atol=1e-6)
    layer_norm = cpu_norms.schedule_layer_norm(cpu_norms.layer_norm_func(4096, 1024))
    check_numeric(
        layer_norm.func, cpu_norms.layer_norm_ref, inputs=[x, gamma, beta], rtol=1e-4, atol=1e-5
    )


def test_norm_schedules_vectorize_the_reductions(cpu_norms):
    src = tc.codegen.c_source(cpu_norms.schedule_softmax(cpu_norms.softmax_func(8, 64)).mod)
    assert "float T_softmax_expsum_rf[16] __attribute__((aligned(64)));" in src
    assert src.count("#pragma omp simd") >= 5
    assert "TC_SIMD float expf(float);" in src
