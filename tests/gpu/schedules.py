"""GPU kernels built by the public Schedule API from te/topi functions, shared by the tests
(tests/gpu/test_gpu_schedules.py: emulation at reduced sizes, nvcc/ptxas at full size) and the
benchmark (benchmarks/gpu_bench.py).

Each ``<name>_func(...)`` builds the unscheduled PrimFunc for the sizes given; each
``schedule_<name>(func)`` schedules it with public primitives only (so the result is a
replayable trace) and returns the :class:`~tilecraft.Schedule`. The schedule functions read
the sizes from the function, so the tests run the same schedule on small shapes.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

import tilecraft as tc
from tilecraft.errors import ScheduleError
from tilecraft.ir import PrimFunc, Var
from tilecraft.schedule import BlockRV, Schedule

Dim = int | Var

# -- SIMT GEMM ------------------------------------------------------------------------------


def gemm_func(m: int, n: int, k: int, dtype: str = "float32") -> PrimFunc:
    """``C = A @ B`` (``A``: m x k, ``B``: k x n). For ``float16`` operands the products are
    accumulated in float32 (block ``C``) and rounded to float16 once (block ``D``)."""
    a = tc.te.placeholder((m, k), dtype, name="A")
    b = tc.te.placeholder((k, n), dtype, name="B")
    r = tc.te.reduce_axis((0, k), name="k")
    if dtype == "float32":
        c = tc.te.compute((m, n), lambda i, j: tc.te.sum(a[i, r] * b[r, j], axis=r), name="C")
        return tc.te.create_prim_func([a, b, c])
    c = tc.te.compute(
        (m, n),
        lambda i, j: tc.te.sum(
            tc.ir.op.cast(a[i, r], "float32") * tc.ir.op.cast(b[r, j], "float32"), axis=r
        ),
        name="C",
    )
    d = tc.te.compute((m, n), lambda i, j: tc.ir.op.cast(c[i, j], dtype), name="D")
    return tc.te.create_prim_func([a, b, d])


@dataclass(frozen=True)
class GemmTiles:
    """Threads per block (rows, cols), outputs per thread (rows, cols), the k tile, and the
    unroll budget of the inner loops."""

    threads: tuple[int, int] = (8, 16)
    per_thread: tuple[int, int] = (4, 4)
    k_tile: int | None = None  # None: 512 bits of k per row (16 float32, 32 float16)
    unroll: int = 1024


def schedule_gemm(func: PrimFunc, tiles: GemmTiles = GemmTiles()) -> Schedule:
    """SIMT GEMM: a block of ``8 x 16`` threads computes a ``32 x 64`` tile, each thread a
    ``4 x 4`` register tile. Per ``k`` tile, the A (``32 x 16``) and B (``16 x 64``) tiles are
    fetched cooperatively by all threads with 128-bit vector loads into padded shared memory;
    each step of the inner ``k`` loop copies a column of A and a row of B into registers (the
    row of B with one vector load) and does 16 FMAs; the register tile is stored back with
    vector stores. Inner loops are unrolled by ``pragma_auto_unroll_max_step``."""
    sch = Schedule(func)
    ty_n, tx_n = tiles.threads
    pi, pj = tiles.per_thread
    c = sch.get_block("C")
    bits = sch.get(c).reads[0].buffer.dtype.bits
    k_tile = tiles.k_tile or 512 // bits
    i, j, k = sch.get_loops(c)
    by, ty, ii = sch.split(i, [None, ty_n, pi])
    bx, tx, jj = sch.split(j, [None, tx_n, pj])
    ko, ki = sch.split(k, [None, k_tile])
    sch.reorder(by, bx, ty, tx, ko, ki, ii, jj)
    sch.bind(by, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    # Step 1. The register tile: C itself when it is an intermediate (float16 output stage D).
    if _has_block(sch, "D"):
        sch.set_scope(c, 0, "local")
        store = sch.get_block("D")
    else:
        store = sch.cache_write(c, 0, "local")
    sch.reverse_compute_at(store, tx)
    # Step 2. Operand tiles: global -> shared (cooperative, vectorized) -> registers.
    itemsize = bits // 8
    for index in (0, 1):
        shared = sch.cache_read(c, index, "shared")
        sch.compute_at(shared, ko)
        _cooperative_fetch(sch, shared, tiles.threads, 16 // itemsize)
        # row pitch 16 bytes past a multiple of 64: the two thread rows of a warp reading a
        # column of A hit different banks, and rows stay 16-byte aligned for vector stores
        sch.storage_align(shared, 0, 0, 64 // itemsize, 16 // itemsize)
        local = sch.cache_read(c, index, "local")
        sch.compute_at(local, ki)
        if index == 1:
            sch.vectorize(sch.get_loops(local)[-1])
    # Step 3. Initialise the accumulators before the k loop, store back with vector stores.
    sch.decompose_reduction(c, ko)
    sch.vectorize(sch.get_loops(store)[-1])
    sch.annotate(by, "pragma_auto_unroll_max_step", tiles.unroll)
    return sch


def _cooperative_fetch(sch: Schedule, block: BlockRV, threads: tuple[int, int], lanes: int) -> None:
    """Fuse the copy's loops under its compute_at loop, split them over the block's threads
    (the same thread axes as the enclosing loops) with ``lanes``-wide vector accesses."""
    loops = sch.get_loops(block)
    fused = sch.fuse(*loops[-2:])
    outer, ty, tx, vec = sch.split(fused, [None, threads[0], threads[1], lanes])
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    sch.vectorize(vec)
    del outer


def _has_block(sch: Schedule, name: str) -> bool:
    return sch.try_(sch.get_block, name).ok


def gemm_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy ``a @ b`` accumulated in float32, in the operands' dtype."""
    return (a.astype(np.float32) @ b.astype(np.float32)).astype(a.dtype)


# -- decode GEMV ----------------------------------------------------------------------------


def gemv_func(n: int, k: int, dtype: str = "float16") -> PrimFunc:
    """``Y = X @ W.T`` for one row ``X`` (1 x k) and weights ``W`` (n x k); float16 operands
    are accumulated in float32 (block ``Y``) and rounded once (block ``D``)."""
    x = tc.te.placeholder((1, k), dtype, name="X")
    w = tc.te.placeholder((n, k), dtype, name="W")
    r = tc.te.reduce_axis((0, k), name="k")
    if dtype == "float32":
        y = tc.te.compute((1, n), lambda i, j: tc.te.sum(x[i, r] * w[j, r], axis=r), name="Y")
        return tc.te.create_prim_func([x, w, y])
    y = tc.te.compute(
        (1, n),
        lambda i, j: tc.te.sum(
            tc.ir.op.cast(x[i, r], "float32") * tc.ir.op.cast(w[j, r], "float32"), axis=r
        ),
        name="Y",
    )
    d = tc.te.compute((1, n), lambda i, j: tc.ir.op.cast(y[i, j], dtype), name="D")
    return tc.te.create_prim_func([x, w, d])


def schedule_gemv(func: PrimFunc, threads: int = 128, rows: int = 4) -> Schedule:
    """Decode GEMV: a block of ``threads`` threads computes ``rows`` outputs; each thread
    walks ``k`` in 128-bit chunks (one vector load of ``W`` and of ``X`` into registers per
    row and chunk), accumulating per-thread partial sums (``rfactor``) in registers, which a
    cross-thread reduction (warp shuffles, then shared memory across warps) combines."""
    sch = Schedule(func)
    y = sch.get_block("Y")
    bits = sch.get(y).reads[0].buffer.dtype.bits
    lanes = 128 // bits
    i, j, k = sch.get_loops(y)
    bx, jr = sch.split(sch.fuse(i, j), [None, rows])
    ko, tx, kv = sch.split(k, [None, threads, lanes])
    sch.reorder(bx, tx, ko, jr, kv)
    # Step 1. Per-thread partial sums: rfactor over the thread axis of k.
    rf = sch.rfactor(tx, 0)
    bx, tx, ko, jr, kv = sch.get_loops(rf)
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.set_scope(rf, 0, "local")
    # Step 2. Vector loads through registers: a chunk of X per k step, of W per row.
    for index, at in ((0, ko), (1, jr)):
        cache = sch.cache_read(rf, index, "local")
        sch.compute_at(cache, at)
        sch.vectorize(sch.get_loops(cache)[-1])
    sch.decompose_reduction(rf, ko)
    # Step 3. The cross-thread reduction of the partial sums, in the same block.
    sch.reverse_compute_at(y, bx)
    sch.bind(sch.get_loops(y)[-1], "threadIdx.x")
    if _has_block(sch, "D"):  # every thread holds the row sums: thread r rounds row r
        sch.set_scope(y, 0, "local")
        d = sch.get_block("D")
        sch.reverse_compute_at(d, bx)
        sch.bind(sch.get_loops(d)[-1], "threadIdx.x")
    sch.annotate(bx, "pragma_auto_unroll_max_step", 256)
    return sch


def gemv_reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """numpy ``x @ w.T`` accumulated in float32, in the operands' dtype."""
    return (x.astype(np.float32) @ w.astype(np.float32).T).astype(x.dtype)


# -- transpose ------------------------------------------------------------------------------


def transpose_func(n: int, dtype: str = "float32") -> PrimFunc:
    """``B = A.T`` for a square ``n x n`` matrix (topi.transpose)."""
    a = tc.te.placeholder((n, n), dtype, name="A")
    return tc.te.create_prim_func([a, tc.topi.transpose(a)])


def schedule_transpose(func: PrimFunc, tile: int = 32, rows: int = 8) -> Schedule:
    """A block moves a ``tile x tile`` tile through shared memory padded by one element per
    row (``storage_align``): it reads rows of ``A`` and writes rows of ``B``, both coalesced,
    and reads the tile's columns from shared memory without bank conflicts. ``tile x rows``
    threads, each moving ``tile / rows`` elements."""
    sch = Schedule(func)
    (blk,) = sch.get_child_blocks(sch.get_block("root"))
    i, j = sch.get_loops(blk)
    by, ti = sch.split(i, [None, tile])
    bx, tj = sch.split(j, [None, tile])
    sch.reorder(by, bx, ti, tj)
    sch.bind(by, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    shared = sch.cache_read(blk, 0, "shared")
    sch.compute_at(shared, bx)
    sch.storage_align(shared, 0, 0, tile, 1)
    for stage in (shared, blk):
        fused = sch.fuse(*sch.get_loops(stage)[-2:])
        _, ty, tx = sch.split(fused, [None, rows, tile])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
    return sch


# -- softmax and RMSNorm: one block per row -------------------------------------------------


def softmax_func(rows: Dim, cols: Dim, dtype: str = "float32") -> PrimFunc:
    """Row softmax (topi.softmax) of a ``rows x cols`` matrix; either may be symbolic."""
    x = tc.te.placeholder((rows, cols), dtype, name="X")
    return tc.te.create_prim_func([x, tc.topi.softmax(x)])


def rms_norm_func(rows: Dim, cols: Dim, dtype: str = "float32") -> PrimFunc:
    """Row RMSNorm (topi.rms_norm) with a per-column weight; either size may be symbolic."""
    x = tc.te.placeholder((rows, cols), dtype, name="X")
    w = tc.te.placeholder((cols,), dtype, name="W")
    return tc.te.create_prim_func([x, w, tc.topi.rms_norm(x, w)])


def schedule_row_reduction(func: PrimFunc, threads: int = 256) -> Schedule:
    """One thread block per row for a chain of row reductions and a final elementwise stage
    (softmax: max, sum of exponentials, normalise; RMSNorm: sum of squares, scale). Each
    stage walks the row with ``threads`` threads (a guard where the row length is not a
    multiple, or symbolic); the reductions combine the threads' partials across the block
    (warp shuffles and shared memory) and leave the row statistic in every thread's
    registers."""
    sch = Schedule(func)
    *stages, _ = sch.get_child_blocks(sch.get_block("root"))
    for stage in stages:  # elementwise stages between reductions (softmax's exp): recomputed
        with contextlib.suppress(ScheduleError):  # a reduction is not inlined (unchanged)
            sch.compute_inline(stage)
    blocks = sch.get_child_blocks(sch.get_block("root"))
    *reductions, last = blocks
    row, _ = sch.get_loops(last)
    sch.bind(row, "blockIdx.x")
    for red in reversed(reductions):
        # registers before compute_at: a global buffer's region would be relaxed over every
        # block (each block computing every row)
        sch.set_scope(red, 0, "local")
        sch.compute_at(red, row)
    for stage in [*reductions, last]:
        inner = sch.get_loops(stage)[-1]
        ko, tx = sch.split(inner, [None, threads])
        sch.reorder(tx, ko)  # the thread loop outermost: coalesced, one combine per row
        sch.bind(tx, "threadIdx.x")
    return sch


def softmax_reference(x: np.ndarray) -> np.ndarray:
    """numpy row softmax."""
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def rms_norm_reference(x: np.ndarray, w: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    """numpy row RMSNorm."""
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps) * w
