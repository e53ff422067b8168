"""GPU schedules built through the public Schedule API, for the emulator tests.

Each ``make_<name>(...)`` returns ``(func, sch, reference)``: the unscheduled function, the
schedule, and a numpy reference computing the output from the inputs.

``python tests/gpu/emulator_schedules.py`` rewrites the lowered-program fixtures of the two
lowering bugs of issue 11 (``fixtures/*.json``) from the schedules below; do that only while
the lowering still has the bug (the fixtures must keep the buggy program).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

import tilecraft as tc
from tilecraft.ir import PrimFunc

GPU = tc.Target("cuda -arch=sm_90")
FIXTURES = Path(__file__).parent / "fixtures"
Made = tuple[PrimFunc, tc.Schedule, Callable[..., np.ndarray]]


def _matmul_func(m: int, n: int, k: int, dtype: str = "float32") -> PrimFunc:
    a = tc.te.placeholder((m, k), dtype, name="A")
    b = tc.te.placeholder((k, n), dtype, name="B")
    r = tc.te.reduce_axis((0, k), name="k")
    c = tc.te.compute((m, n), lambda i, j: tc.te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return tc.te.create_prim_func([a, b, c])


def _tile2(r: int, q: int) -> Callable[..., tuple[object, ...]]:
    return lambda a, b: (a // r, b // q, a % r, b % q)


def _tile3(r: int, q: int, s: int) -> Callable[..., tuple[object, ...]]:
    return lambda a, b, c: (a // r, b // q, c // s, a % r, b % q, c % s)


def make_simt_gemm(
    n: int = 256, bm: int = 16, bn: int = 16, bk: int = 8, ty: int = 8, tx: int = 8,
    scope: str = "shared",
) -> Made:  # fmt: skip
    """C = A @ B: a bm x bn tile per block, ty x tx threads, A and B k-tiles fetched
    cooperatively into shared memory (cache_read + compute_at + fuse/split/bind).

    The caches and the matmul block get tiled layouts first (transform_layout +
    transform_block_layout) so the shared buffers are indexed by the block index directly and
    lose that dimension in lowering; without it the lowering keeps whole-matrix shared buffers.
    """
    func = _matmul_func(n, n, n)
    sch = tc.Schedule(func, seed=0)
    c = sch.get_block("C")
    caches = []
    for idx, (rows, cols) in enumerate([(bm, bk), (bk, bn)]):
        cache = sch.cache_read(c, idx, scope)
        sch.transform_layout(cache, ("write", 0), _tile2(rows, cols))
        sch.transform_block_layout(cache, _tile2(rows, cols))
        caches.append(cache)
    sch.transform_block_layout(c, _tile3(bm, bn, bk))
    bi, bj, ko, ii, jj, ki = sch.get_loops(c)
    ti, i2 = sch.split(ii, [ty, None])
    tj, j2 = sch.split(jj, [tx, None])
    sch.reorder(bi, bj, ko, ti, tj, ki, i2, j2)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    sch.bind(ti, "threadIdx.y")
    sch.bind(tj, "threadIdx.x")
    for cache in caches:
        sch.compute_at(cache, ko)
        fused = sch.fuse(*sch.get_loops(cache)[3:])
        o, y, x = sch.split(fused, [None, ty, tx])
        sch.reorder(y, x, o)
        sch.bind(y, "threadIdx.y")
        sch.bind(x, "threadIdx.x")
    return func, sch, lambda a, b: a @ b


def make_stencil(n: int = 256, taps: int = 3, threads: int = 64) -> Made:
    """B[i] = sum_k A[i + k] * W[k]; A cached in shared memory at the tap loop.

    Each thread stores and loads A_shared[i + k] in iteration k: its own element within one
    iteration, but the element thread ``tx - 1`` stores in iteration ``k + 1``. Today's barrier
    pass sees the same index in the store and the load, calls it thread-private, and inserts no
    barrier (issue 11, the missing barrier in a cross-iteration reuse of shared memory).
    """
    a = tc.te.placeholder((n + taps - 1,), "float32", name="A")
    w = tc.te.placeholder((taps,), "float32", name="W")
    k = tc.te.reduce_axis((0, taps), name="k")
    b = tc.te.compute((n,), lambda i: tc.te.sum(a[i + k] * w[k], axis=k), name="B")
    func = tc.te.create_prim_func([a, w, b])
    sch = tc.Schedule(func, seed=0)
    blk = sch.get_block("B")
    i, kk = sch.get_loops(blk)
    bx, tx = sch.split(i, [None, threads])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    cache = sch.cache_read(blk, 0, "shared")
    sch.compute_at(cache, kk)

    def ref(av: np.ndarray, wv: np.ndarray) -> np.ndarray:
        return np.array([av[j : j + taps] @ wv for j in range(n)], "float32")

    return func, sch, ref


def make_stencil_cooperative(n: int = 256, taps: int = 3, threads: int = 64) -> Made:
    """:func:`make_stencil` with the fetch bound to ``threadIdx.x`` (a cooperative fetch).

    Since compute_at relaxes a shared buffer's region over the thread loops, the cache covers
    the block's whole tile at each tap; without binding its loop every thread would store the
    whole tile (same values, still a race). Bound, each thread stores one element, and every
    tap reuses the shared tile: the cross-iteration reuse that needs the barrier the old
    barrier pass left out.
    """
    func, sch, ref = make_stencil(n, taps, threads)
    cache = sch.get_block("A_shared")
    sch.bind(sch.get_loops(cache)[-1], "threadIdx.x")
    return func, sch, ref


def make_reverse_rows(m: int = 8, n: int = 32) -> Made:
    """B[i, j] = A[i, n - 1 - j]: one block per row, the row staged in 'local' memory.

    The staging loop is bound to threadIdx.x (a cooperative fetch), so thread ``t`` stores
    element ``t`` into *its own* local array and then reads element ``n - 1 - t`` of it, which
    another thread stored into its own copy (issue 11, the 'local' staging buffer threads read
    from each other: silently wrong CUDA).
    """
    a = tc.te.placeholder((m, n), "float32", name="A")
    b = tc.te.compute((m, n), lambda i, j: a[i, n - 1 - j], name="B")
    func = tc.te.create_prim_func([a, b])
    sch = tc.Schedule(func, seed=0)
    blk = sch.get_block("B")
    i, j = sch.get_loops(blk)
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    cache = sch.cache_read(blk, 0, "local")
    sch.compute_at(cache, i)
    sch.bind(sch.get_loops(cache)[-1], "threadIdx.x")
    return func, sch, lambda av: np.ascontiguousarray(av[:, ::-1])


def make_reverse_rows_symbolic(m: int = 4, threads: int = 32) -> Made:
    """B[i, j] = A[i, n - 1 - j] for a symbolic row length n: one block per row, the row
    fetched cooperatively into dynamic shared memory of n elements (a run-time size)."""
    n = tc.ir.Var("n", "int32")
    a = tc.te.placeholder((m, n), "float32", name="A")
    b = tc.te.compute((m, n), lambda i, j: a[i, n - 1 - j], name="B")
    func = tc.te.create_prim_func([a, b])
    sch = tc.Schedule(func, seed=0)
    blk = sch.get_block("B")
    i, j = sch.get_loops(blk)
    jo, ji = sch.split(j, [None, threads])
    sch.reorder(i, ji, jo)
    sch.bind(i, "blockIdx.x")
    sch.bind(ji, "threadIdx.x")
    cache = sch.cache_read(blk, 0, "shared.dyn")
    sch.compute_at(cache, i)
    lo, li = sch.split(sch.get_loops(cache)[-1], [None, threads])
    sch.reorder(li, lo)
    sch.bind(li, "threadIdx.x")
    return func, sch, lambda av: np.ascontiguousarray(av[:, ::-1])


def make_rotate_through_shared(n: int = 64) -> Made:
    """B[i] = A[(i + 1) % n] in one block: A fetched cooperatively into shared memory.

    Correct only because of the barrier between the fetch and the use.
    """
    a = tc.te.placeholder((n,), "float32", name="A")
    b = tc.te.compute((n,), lambda i: a[(i + 1) % n], name="B")
    func = tc.te.create_prim_func([a, b])
    sch = tc.Schedule(func, seed=0)
    blk = sch.get_block("B")
    (i,) = sch.get_loops(blk)
    bx, tx = sch.split(i, [1, None])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    cache = sch.cache_read(blk, 0, "shared")
    sch.compute_at(cache, bx)
    sch.bind(sch.get_loops(cache)[-1], "threadIdx.x")
    return func, sch, lambda av: np.roll(av, -1)


def make_row_sum(
    m: int | str = 16, n: int = 256, threads: int = 32, tag: str = "threadIdx.x",
    rows_per_block: int = 1,
) -> Made:  # fmt: skip
    """B[i] = sum_k A[i, k] with the reduction split over ``threads`` threads on ``tag``.

    Lowered as a cross-thread reduction: warp shuffles (threadIdx.x, up to 32 threads), shuffles
    plus shared memory (threadIdx.x, a multiple of 32), a shared-memory tree (threadIdx.y).
    ``m`` may be a name: a symbolic number of rows. ``rows_per_block`` rows are bound to
    threadIdx.y (with a reduction on threadIdx.x), so each warp reduces several rows.
    """
    rows = tc.ir.Var(m, "int32") if isinstance(m, str) else m
    a = tc.te.placeholder((rows, n), "float32", name="A")
    k = tc.te.reduce_axis((0, n), name="k")
    b = tc.te.compute((rows,), lambda i: tc.te.sum(a[i, k], axis=k), name="B")
    func = tc.te.create_prim_func([a, b])
    sch = tc.Schedule(func, seed=0)
    blk = sch.get_block("B")
    i, kk = sch.get_loops(blk)
    if rows_per_block > 1:
        bi, ri = sch.split(i, [None, rows_per_block])
        sch.bind(bi, "blockIdx.x")
        sch.bind(ri, "threadIdx.y")
    else:
        sch.bind(i, "blockIdx.x")
    ko, ki = sch.split(kk, [None, threads])
    sch.reorder(ki, ko)
    sch.bind(ki, tag)
    return func, sch, lambda av: av.sum(axis=1)


def write_fixtures() -> None:
    """Write the lowered programs of the two bug schedules to ``fixtures/`` (see module doc)."""
    from tilecraft.lower.gpu_pipeline import lower_gpu_function

    FIXTURES.mkdir(exist_ok=True)
    for name, make in (("missing_barrier_stencil", make_stencil),
                       ("local_staging_reverse", make_reverse_rows)):  # fmt: skip
        _, sch, _ = make()
        low = lower_gpu_function(sch.func, GPU)
        (FIXTURES / f"{name}.json").write_text(tc.ir.to_json(low) + "\n")


if __name__ == "__main__":
    sys.exit(write_fixtures())
