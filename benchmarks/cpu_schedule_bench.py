"""Hand-written CPU schedules versus numpy, measured in the same run (issue 5 targets).

Workloads: float32 matmul 1024x1024x1024 (target: at least 60% of numpy's ``A @ B``
GFLOP/s), softmax and layer_norm on (4096, 1024) float32 (target: at least 80% of numpy's
speed). The schedules are those of ``examples/cpu_matmul.py`` and
``examples/cpu_softmax_layernorm.py``; each result is checked against numpy before timing.

Measurement: the machine may be shared, so tilecraft and numpy calls are interleaved in
rounds (each round times ``number`` back-to-back calls of each, after warm-up) and the table
shows per-call medians over the rounds; ``ratio`` is numpy's median time over tilecraft's
(>1: tilecraft faster). Throughput: GFLOP/s = 2 M N K / time for matmul; GB/s = (bytes of
the inputs + bytes of the output) / time for softmax and layer_norm (the minimum traffic).

numpy runs as it does for a user: ``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` (which may be
set in a development environment and pin OpenBLAS to a slower kernel) are removed from the
environment before numpy is imported, and OpenBLAS picks its own thread count (all cores).
The BLAS numpy was built with (``numpy.show_config()``) is printed with the table; on the
development machine it is scipy-openblas 0.3.31 (DYNAMIC_ARCH, MAX_THREADS=64).
tilecraft's OpenMP thread count is set to the number of usable cores (``OMP_NUM_THREADS``).

Run: ``python benchmarks/cpu_schedule_bench.py [--rounds N]``.
"""

from __future__ import annotations

import os
import sys

_REMOVED = {
    k: os.environ.pop(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ
}
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
os.environ["OMP_NUM_THREADS"] = str(_CORES)

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from types import ModuleType  # noqa: E402

import numpy as np  # noqa: E402

import tilecraft as tc  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Workload:
    """One row of the table: two callables on prepared arguments and the work they do."""

    name: str
    ours: Callable[[], None]
    theirs: Callable[[], object]
    work: float  # FLOPs (unit "GFLOP/s") or bytes moved (unit "GB/s")
    unit: str
    target: float  # minimum ratio numpy_time / tilecraft_time


def _time_calls(fn: Callable[[], object], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


SETTLE_S = 0.25
"""Pause before each timing block. OpenBLAS keeps a helper thread spinning for ~150 ms after a
call, and OpenMP workers spin briefly too; without a pause, whichever library runs second
shares a core with the other's spinning thread. The pause is the same for both."""


def measure(w: Workload, rounds: int, number: int) -> tuple[float, float]:
    """Interleaved per-call medians (tilecraft, numpy) in seconds."""
    for _ in range(2):  # warm up caches, thread pools, page mappings
        w.ours()
        w.theirs()
    ours, theirs = [], []
    for _ in range(rounds):
        time.sleep(SETTLE_S)
        ours.append(_time_calls(w.ours, number))
        time.sleep(SETTLE_S)
        theirs.append(_time_calls(w.theirs, number))
    return statistics.median(ours), statistics.median(theirs)


def matmul_workload() -> Workload:
    """1024^3 float32 matmul."""
    ex = _example("cpu_matmul")
    n = 1024
    lib = tc.build(ex.schedule_matmul(ex.matmul_func(n, n, n)).mod, target="cpu")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), np.float32)
    lib["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-3 * np.sqrt(n))
    return Workload("matmul 1024^3", lib["main"].bind(a, b, c), lambda: a @ b,
                    2.0 * n**3, "GFLOP/s", 0.6)  # fmt: skip


def norm_workloads() -> list[Workload]:
    """softmax and layer_norm on (4096, 1024) float32."""
    ex = _example("cpu_softmax_layernorm")
    rows, cols = 4096, 1024
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    gamma = rng.standard_normal(cols, dtype=np.float32)
    beta = rng.standard_normal(cols, dtype=np.float32)
    y = np.empty_like(x)
    out = []
    cases = [
        ("softmax 4096x1024", ex.schedule_softmax(ex.softmax_func(rows, cols)), (x,),
         lambda: ex.softmax_ref(x), 2 * x.nbytes),
        ("layer_norm 4096x1024", ex.schedule_layer_norm(ex.layer_norm_func(rows, cols)),
         (x, gamma, beta), lambda: ex.layer_norm_ref(x, gamma, beta),
         2 * x.nbytes + gamma.nbytes + beta.nbytes),
    ]  # fmt: skip
    for name, sch, inputs, ref, nbytes in cases:
        lib = tc.build(sch.mod, target="cpu")
        lib["main"](*inputs, y)
        np.testing.assert_allclose(y, ref(), rtol=1e-4, atol=1e-5)
        out.append(Workload(name, lib["main"].bind(*inputs, y), ref, nbytes, "GB/s", 0.8))
    return out


def blas_info() -> str:
    """The BLAS numpy was built with, from ``numpy.show_config``."""
    try:
        cfg = np.show_config(mode="dicts")
    except TypeError:  # numpy < 1.26 has no mode argument
        return "numpy BLAS: see numpy.show_config()"
    blas = cfg.get("Build Dependencies", {}).get("blas", {})
    return (
        f"numpy {np.__version__}, BLAS {blas.get('name', '?')} {blas.get('version', '?')} "
        f"({blas.get('openblas configuration', '').strip()})"
    )


def main(argv: list[str] | None = None) -> int:
    """Build, check and time every workload and print the table; 1 when a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved timing rounds")
    args = parser.parse_args(argv)
    print(blas_info())
    removed = ", ".join(_REMOVED) or "none set"
    print(f"cores: {_CORES}; tilecraft OMP_NUM_THREADS={_CORES}; removed from env: {removed}")
    workloads = [matmul_workload(), *norm_workloads()]
    header = (f"{'workload':<22}{'tilecraft ms':>13}{'tilecraft':>16}{'numpy ms':>11}"
              f"{'numpy':>16}{'ratio':>8}{'target':>8}  met")  # fmt: skip
    print(header)
    print("-" * len(header))
    ok = True
    for w in workloads:
        number = 3 if w.unit == "GFLOP/s" else 5
        ours, theirs = measure(w, args.rounds, number)
        ratio = theirs / ours
        met = ratio >= w.target
        ok = ok and met
        print(
            f"{w.name:<22}{ours * 1e3:>13.3f}{w.work / ours / 1e9:>9.1f} {w.unit:<6}"
            f"{theirs * 1e3:>11.3f}{w.work / theirs / 1e9:>9.1f} {w.unit:<6}"
            f"{ratio:>8.2f}{w.target:>8.2f}  {'yes' if met else 'NO'}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
