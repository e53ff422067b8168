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


class _Scripted(threads.CoreShare):
    """A CoreShare fed (wall, busy CPU seconds of our CPUs, our CPU seconds) samples."""

    def __init__(self, cores: int, samples: list[tuple[float, float, float] | None]) -> None:
        self.samples = list(samples)
        super().__init__(cores, window=0.5)

    def _sample(self) -> tuple[float, float, float] | None:
        return self.samples.pop(0)


def _at(wall: float, busy: float, own: float) -> tuple[float, float, float]:
    """A sample taken ``1 - wall`` seconds ago (the last of a script, at 1, is now)."""
    import time

    return time.monotonic() - 1.0 + wall, busy, own


@pytest.mark.parametrize(
    ("busy", "own", "expected"),
    [
        (2.0, 2.0, 2),  # only this process: every core
        (2.0, 1.0, 1),  # another process kept one core busy: the one left
        (1.2, 1.0, 2),  # others used a fifth of a core: rounds to none
        (4.0, 0.0, 1),  # others use more than every core: still one thread
        (0.0, 0.5, 2),  # counters that went the wrong way read as no other load
    ],
)
def test_core_share_leaves_the_cores_others_use(busy: float, own: float, expected: int) -> None:
    share = _Scripted(2, [_at(0.0, 0.0, 0.0), _at(1.0, busy, own)])
    assert share.threads == 2
    assert share.update() == expected


def test_core_share_waits_a_window_and_survives_an_unreadable_proc_stat() -> None:
    import time

    now = time.monotonic()
    share = _Scripted(4, [(now, 0.0, 0.0)])
    assert share.update() == 4  # within the window: no new sample taken
    assert share.samples == []
    blind = _Scripted(4, [None])
    assert blind.update() == 4


def test_the_real_proc_stat_gives_a_count_within_the_cores() -> None:
    share = threads.CoreShare(window=0.0)
    assert 1 <= share.update() <= share.cores


def test_kernels_follow_the_free_cores_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv(threads.ADAPTIVE_ENV, raising=False)
    assert threads.adaptive()
    monkeypatch.setattr(threads, "_SHARE", _Scripted(2, [_at(0.0, 0.0, 0.0), _at(1.0, 2.0, 1.0)]))
    assert threads.current_threads() == 1
    assert threads.library_threads(0) == 1
    monkeypatch.setenv(threads.ADAPTIVE_ENV, "0")
    assert not threads.adaptive()
    assert threads.current_threads() == threads.kernel_threads()
    monkeypatch.setenv(threads.ADAPTIVE_ENV, "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert not threads.adaptive()
    assert threads.current_threads() == 3


def test_before_call_sets_the_openmp_threads_of_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctypes
    import os
    import threading

    # what a parallel kernel's library brings into the process
    gomp = ctypes.CDLL("libgomp.so.1")
    assert ctypes.CDLL("libgomp.so.1", mode=os.RTLD_NOLOAD)._handle == gomp._handle
    gomp.omp_get_max_threads.restype = ctypes.c_int
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv(threads.ADAPTIVE_ENV, raising=False)
    monkeypatch.setattr(threads, "_SHARE", _Scripted(2, [_at(0.0, 0.0, 0.0), _at(1.0, 2.0, 1.0)]))
    seen: list[int] = []

    def caller() -> None:  # a fresh Python thread: its own OpenMP settings
        threads.before_call()
        seen.append(gomp.omp_get_max_threads())
        monkeypatch.setenv(threads.ADAPTIVE_ENV, "0")
        threads.before_call()  # adaptation off: back to the fixed count
        seen.append(gomp.omp_get_max_threads())

    worker = threading.Thread(target=caller)
    worker.start()
    worker.join()
    assert seen == [1, threads.kernel_threads()]
