"""One thread policy: our kernels, the BLAS calls beside them and the tuner's measurements.

A BLAS step used the target's ``-num-cores`` threads whatever ``OMP_NUM_THREADS`` said: a
single-thread model process ran two-thread GEMMs, and on a busy two-core machine a GEMM the
tuner had measured at 0.3 ms took 10-46 ms there. The tuner's runner also measured on every
core whatever the process's own kernels would use.
"""

from __future__ import annotations

import numpy as np
import pytest

from tilecraft import tune as ms
from tilecraft.runtime import threads
from tilecraft.runtime.executor.extern import extern_kernel


@pytest.mark.parametrize(
    ("value", "expected"),
    [("3", 3), ("2,1", 2), (" 4 ", 4), ("0", None), ("-1", None), ("many", None), ("", None)],
)
def test_configured_threads_reads_omp_num_threads(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: int | None
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert threads.configured_threads() == expected
    assert threads.kernel_threads() == (expected or threads.usable_cores())


def test_library_threads_never_exceed_the_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert threads.library_threads(8) == 1
    assert threads.library_threads(0) == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    assert threads.library_threads(2) == 2
    assert threads.library_threads(0) == 4


def test_blas_step_runs_on_the_process_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("scipy_openblas32")
    from tilecraft.runtime.executor.extern import load_blas

    gemm = extern_kernel("blas.gemm", {"trans_a": False, "trans_b": False, "num_threads": 8})
    a = np.ones((4, 3), np.float32)
    b = np.ones((3, 5), np.float32)
    out = np.empty((4, 5), np.float32)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    gemm(a, b, out)
    assert load_blas().get_num_threads() == 1
    np.testing.assert_array_equal(out, np.full((4, 5), 3.0, np.float32))


def test_runner_measures_on_the_process_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    with ms.LocalRunner(timeout_s=5.0) as runner:
        assert runner.num_threads == 1
    with ms.LocalRunner(timeout_s=5.0, num_threads=2) as runner:
        assert runner.num_threads == 2
