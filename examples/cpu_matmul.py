"""A hand-written CPU schedule for a float32 matmul, built with the public ``tc.Schedule`` API.

The schedule is the classic register-blocked kernel:

- split ``i``/``j`` into an ``mr x nr`` register tile (``nr`` a multiple of the SIMD width)
  and order the loops ``j_outer, i_outer, k, i_tile, j_tile``;
- ``cache_write(..., "local")`` + ``reverse_compute_at`` accumulate the tile in a small local
  buffer (lowering compacts it to an ``mr * nr`` C array the compiler keeps in registers) and
  copy it out once per tile; ``decompose_reduction`` hoists its zeroing out of the ``k`` loop;
- ``cache_read(B, "global")`` + ``compute_at`` pack the ``K x nr`` panel of ``B`` used by one
  ``j_outer`` iteration into a contiguous buffer (unit-stride loads, no cache-set conflicts);
- ``unroll`` the ``i_tile`` loop, ``vectorize`` ``j_tile``, ``parallel`` the outer ``j`` loop.

Run ``python examples/cpu_matmul.py`` to print the trace, check the result and time it
against numpy (``A @ B``) in the same process.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import tilecraft as tc


def matmul_func(m: int = 1024, n: int = 1024, k: int = 1024) -> tc.ir.PrimFunc:
    """The unscheduled ``C[m, n] = A[m, k] @ B[k, n]`` (float32), block ``"matmul"``."""
    a = tc.te.placeholder((m, k), "float32", name="A")
    b = tc.te.placeholder((k, n), "float32", name="B")
    c = tc.topi.matmul(a, b)
    return tc.te.create_prim_func([a, b, c])


def schedule_matmul(
    func: tc.ir.PrimFunc, *, mr: int = 8, nr: int = 32, block: str = "matmul"
) -> tc.Schedule:
    """Schedule the matmul ``func`` (loops ``i, j, k``) for the CPU.

    Parameters
    ----------
    func
        The unscheduled matmul (see :func:`matmul_func`).
    mr, nr
        The register tile: ``mr`` rows times ``nr`` columns accumulated in registers
        (``mr * nr / 16`` AVX-512 registers for float32). They must divide the extents.
    block
        Name of the matmul block.

    Returns
    -------
    tc.Schedule
        The schedule; ``sch.mod`` is ready for ``tc.build`` and ``sch.trace`` replays it.
    """
    sch = tc.Schedule(func, seed=0)
    mm = sch.get_block(block)
    i, j, k = sch.get_loops(mm)
    i_outer, i_tile = sch.split(i, factors=[None, mr])
    j_outer, j_tile = sch.split(j, factors=[None, nr])
    sch.reorder(j_outer, i_outer, k, i_tile, j_tile)
    # accumulate one mr x nr tile locally, write it back once per (j_outer, i_outer)
    acc = sch.cache_write(mm, 0, "local")
    sch.reverse_compute_at(acc, i_outer)
    sch.decompose_reduction(mm, k)
    # pack the K x nr panel of B read under one j_outer iteration
    packed = sch.cache_read(mm, 1, "global")
    sch.compute_at(packed, j_outer)
    sch.vectorize(sch.get_loops(packed)[-1])
    sch.unroll(i_tile)
    sch.vectorize(j_tile)
    init = sch.get_block(f"{block}_init")
    sch.unroll(sch.get_loops(init)[-2])
    sch.vectorize(sch.get_loops(init)[-1])
    sch.vectorize(sch.get_loops(acc)[-1])
    sch.parallel(j_outer)
    return sch


def _median_seconds(fn: object, repeat: int) -> float:
    assert callable(fn)
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main(size: int = 1024) -> None:
    """Print the trace, check the scheduled matmul against numpy and time both."""
    func = matmul_func(size, size, size)
    sch = schedule_matmul(func)
    print(sch.trace.as_python())
    lib = tc.build(sch.mod, target="cpu")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    c = np.empty((size, size), np.float32)
    lib["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-3 * np.sqrt(size))
    flops = 2.0 * size**3
    ours = lib.time_evaluator("main", number=5, repeat=7)(a, b, c).median
    theirs = _median_seconds(lambda: a @ b, 35)
    print(f"tilecraft: {ours * 1e3:8.3f} ms  {flops / ours / 1e9:7.1f} GFLOP/s")
    print(f"numpy:     {theirs * 1e3:8.3f} ms  {flops / theirs / 1e9:7.1f} GFLOP/s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1024)
