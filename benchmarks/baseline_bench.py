"""Baseline timings of *unscheduled* kernels (te/topi -> lower -> C) beside numpy.

Run: ``python benchmarks/baseline_bench.py``. Prints one row per workload with our GFLOP/s
(or GB/s for memory-bound softmax), numpy's in the same run, and the ratio. The kernels are
naive loop nests; the schedule work is what makes them fast. Takes well under a minute.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

import tilecraft as tc


def _time_numpy(fn: Callable[[], object], repeat: int = 5) -> float:
    fn()
    best = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best.append(time.perf_counter() - start)
    return float(np.median(best))


def _bench(func: tc.ir.PrimFunc, args: list[np.ndarray], repeat: int = 3) -> float:
    lib = tc.build(func, "cpu")
    return lib.time_evaluator(func.name, number=1, repeat=repeat)(*args).median


def matmul_case(n: int) -> tuple[str, float, float, float, str]:
    ta = tc.te.placeholder((n, n), "float32", name="A")
    tb = tc.te.placeholder((n, n), "float32", name="B")
    func = tc.te.create_prim_func([ta, tb, tc.topi.matmul(ta, tb)])
    a, b = np.random.rand(n, n).astype("float32"), np.random.rand(n, n).astype("float32")
    c = np.empty((n, n), "float32")
    ours = _bench(func, [a, b, c])
    np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-3)
    ref = _time_numpy(lambda: a @ b)
    return f"matmul {n}^3", 2 * n**3, ours, ref, "GFLOP/s"


def softmax_case(n: int) -> tuple[str, float, float, float, str]:
    tx = tc.te.placeholder((n, n), "float32", name="X")
    func = tc.te.create_prim_func([tx, tc.topi.softmax(tx)])
    x, y = np.random.rand(n, n).astype("float32"), np.empty((n, n), "float32")
    ours = _bench(func, [x, y])

    def ref() -> np.ndarray:
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    np.testing.assert_allclose(y, ref(), rtol=1e-4, atol=1e-6)
    return f"softmax {n}x{n}", 2 * x.nbytes, ours, _time_numpy(ref), "GB/s"


def conv2d_case() -> tuple[str, float, float, float, str]:
    n, c, h, w, k = 1, 64, 56, 56, 64
    tx = tc.te.placeholder((n, c, h, w), "float32", name="X")
    tw = tc.te.placeholder((k, c, 3, 3), "float32", name="W")
    func = tc.te.create_prim_func([tx, tw, tc.topi.conv2d(tx, tw, padding=1)])
    x = np.random.rand(n, c, h, w).astype("float32")
    wt = np.random.rand(k, c, 3, 3).astype("float32")
    y = np.empty((n, k, h, w), "float32")
    ours = _bench(func, [x, wt, y], repeat=1)

    def ref() -> np.ndarray:  # im2col + matmul in numpy
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        cols = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
        return np.einsum("nchwij,kcij->nkhw", cols, wt, optimize=True)

    np.testing.assert_allclose(y, ref(), rtol=1e-3, atol=1e-2)
    return (
        "conv2d 1x64x56x56 k64 3x3",
        2 * n * k * h * w * c * 9,
        ours,
        _time_numpy(ref, 3),
        "GFLOP/s",
    )


def main() -> None:
    """Run every case and print the table."""
    rows = [matmul_case(256), matmul_case(512), softmax_case(1024), conv2d_case()]
    print(f"{'workload':<28}{'tilecraft':>14}{'numpy':>14}{'ratio':>9}  unit")
    for name, work, ours, ref, unit in rows:
        a, b = work / ours / 1e9, work / ref / 1e9
        print(f"{name:<28}{a:>14.2f}{b:>14.2f}{a / b:>9.3f}  {unit}")


if __name__ == "__main__":
    main()
