"""The padding flow of tiled kernels whose tiles do not divide the shapes: ``pad_einsum``, the
unpad block folded into the write-back (``reverse_compute_inline``), and ``decompose_reduction``
of guarded (predicated) blocks. Each keeps the function's meaning."""

from __future__ import annotations

import tilecraft as tc
from tilecraft.testing import check_numeric

SM80 = tc.Target("cuda -arch=sm_80")


def _matmul(m: int = 100, n: int = 70, k: int = 60) -> tc.ir.PrimFunc:
    a = tc.te.placeholder((m, k), "float32", name="A")
    b = tc.te.placeholder((k, n), "float32", name="B")
    r = tc.te.reduce_axis((0, k), name="k")
    c = tc.te.compute((m, n), lambda i, j: tc.te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return tc.te.create_prim_func([a, b, c])


def test_unpad_block_folds_into_the_write_back() -> None:
    func = _matmul()
    sch = tc.Schedule(func)
    blk = sch.get_block("C")
    sch.pad_einsum(blk, [128, 128, 64])
    write_back = sch.cache_write(blk, 0, "local")
    sch.reverse_compute_inline(sch.get_block("C_unpad"))
    wb = sch.get(write_back)
    assert [w.buffer.name for w in wb.writes] == ["C"]
    check_numeric(sch.func, func)


def test_unpad_folds_into_a_gpu_write_back() -> None:
    func = _matmul()
    sch = tc.Schedule(func)
    blk = sch.get_block("C")
    sch.pad_einsum(blk, [128, 128, 64])
    for name in ("A_pad", "B_pad"):
        sch.compute_inline(sch.get_block(name))
    write_back = sch.cache_write(blk, 0, "local")
    i, j, k = sch.get_loops(blk)
    bi, ti = sch.split(i, [None, 16])
    bj, tj = sch.split(j, [None, 16])
    sch.reorder(bi, bj, ti, tj, k)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    sch.bind(ti, "threadIdx.y")
    sch.bind(tj, "threadIdx.x")
    sch.reverse_compute_at(write_back, tj)
    sch.reverse_compute_inline(sch.get_block("C_unpad"))
    sch.decompose_reduction(blk, k)
    check_numeric(sch.func, func, emulate_gpu="racecheck", target=SM80)


def test_decompose_reduction_of_a_guarded_block() -> None:
    func = _matmul()
    sch = tc.Schedule(func)
    blk = sch.get_block("C")
    i, j, k = sch.get_loops(blk)
    io, ii = sch.split(i, [None, 32])  # 100 rows: the block is guarded by io * 32 + ii < 100
    ko, ki = sch.split(k, [None, 8])
    sch.reorder(io, j, ko, ii, ki)
    init = sch.decompose_reduction(blk, ko)
    assert sch.get(init).init is None
    check_numeric(sch.func, func)


def test_decompose_reduction_with_the_guarded_loop_below() -> None:
    func = _matmul()
    sch = tc.Schedule(func)
    blk = sch.get_block("C")
    i, j, k = sch.get_loops(blk)
    io, ii = sch.split(i, [None, 32])
    sch.reorder(io, k, ii, j)
    sch.decompose_reduction(blk, k)
    check_numeric(sch.func, func)
