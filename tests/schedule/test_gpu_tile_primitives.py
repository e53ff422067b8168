"""Schedule primitives for GPU tiles: region relaxation by storage scope in compute_at,
binding a loop nested in a loop on the same thread axis, cache chains in any order, fuse into
an int64 loop."""

from __future__ import annotations

import pytest

import tilecraft as tc
from tilecraft.ir import For, ForKind, thread_relaxes
from tilecraft.schedule import BlockRV, LoopRV, Schedule
from tilecraft.testing import assert_fails_unchanged, check_numeric, verify_trace_roundtrip

GPU = tc.Target("cuda -arch=sm_90")


def _matmul(n: int = 64) -> tc.ir.PrimFunc:
    a = tc.te.placeholder((n, n), "float32", name="A")
    b = tc.te.placeholder((n, n), "float32", name="B")
    k = tc.te.reduce_axis((0, n), name="k")
    c = tc.te.compute((n, n), lambda i, j: tc.te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return tc.te.create_prim_func([a, b, c])


def _tiled(func: tc.ir.PrimFunc) -> tuple[Schedule, BlockRV, LoopRV, LoopRV]:
    """8 x 16 threads, 4 x 4 outputs each, k tiles of 8; returns (sch, C, ko, ki)."""
    sch = Schedule(func)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    by, ty, ii = sch.split(i, [None, 8, 4])
    bx, tx, jj = sch.split(j, [None, 16, 4])
    ko, ki = sch.split(k, [None, 8])
    sch.reorder(by, bx, ty, tx, ko, ki, ii, jj)
    for loop, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y")):
        sch.bind(loop, tag)
    sch.bind(tx, "threadIdx.x")
    return sch, c, ko, ki


def _extents(sch: Schedule, block: BlockRV, at: LoopRV) -> list[int]:
    """Extents of the loops of ``block`` below loop ``at`` (those compute_at created)."""
    loops = [sch.get(lp) for lp in sch.get_loops(block)]
    target = sch.get(at)
    below = loops[next(k for k, lp in enumerate(loops) if lp is target) + 1 :]
    assert all(isinstance(lp, For) and lp.kind is ForKind.SERIAL for lp in below)
    return [lp.extent.value for lp in below]  # type: ignore[union-attr]


def test_thread_relaxation_table() -> None:
    assert thread_relaxes("shared", "threadIdx.x")
    assert thread_relaxes("shared", "vthread")
    assert not thread_relaxes("shared", "blockIdx.x")
    assert thread_relaxes("global", "blockIdx.y")
    assert thread_relaxes("global", "threadIdx.z")
    assert not thread_relaxes("local", "threadIdx.x")
    assert not thread_relaxes("local", "vthread")
    assert thread_relaxes("warp", "threadIdx.x")
    assert not thread_relaxes("warp", "threadIdx.y")


def test_shared_cache_under_thread_loops_covers_the_block_tile() -> None:
    func = _matmul()
    sch, c, ko, _ = _tiled(func)
    a = sch.cache_read(c, 0, "shared")
    sch.compute_at(a, ko)
    # relaxed over threadIdx.y/x: the block's 32 rows, not the thread's 4
    assert _extents(sch, a, ko) == [32, 8]
    check_numeric(sch.func, func, emulate_gpu=True, target=GPU)
    verify_trace_roundtrip(sch, func)


def test_local_cache_under_thread_loops_covers_one_thread() -> None:
    func = _matmul()
    sch, c, ko, _ = _tiled(func)
    a = sch.cache_read(c, 0, "local")
    sch.compute_at(a, ko)
    assert _extents(sch, a, ko) == [4, 8]
    check_numeric(sch.func, func, emulate_gpu=True, target=GPU)


def test_global_cache_is_relaxed_over_the_blocks_too() -> None:
    func = _matmul()
    sch, c, ko, _ = _tiled(func)
    a = sch.cache_read(c, 0, "global")
    sch.compute_at(a, ko)
    assert _extents(sch, a, ko) == [64, 8]  # every block's rows
    # its serial meaning: a kernel cannot allocate a global buffer, so the GPU lowering (and
    # the emulator running it) refuses this schedule, as it should
    check_numeric(sch.func, func, emulate_gpu="serial", target=GPU)
    with pytest.raises(tc.errors.LowerError, match="global buffer 'A_global' is allocated"):
        check_numeric(sch.func, func, emulate_gpu=True, target=GPU)


def test_reverse_compute_at_keeps_one_threads_region() -> None:
    """A consumer under a thread loop reads what its own thread produced (no relaxation)."""
    func = _matmul()
    sch, c, _, _ = _tiled(func)
    store = sch.cache_write(c, 0, "shared")
    tx = sch.get_loops(c)[3]
    sch.reverse_compute_at(store, tx)
    assert _extents(sch, store, tx) == [4, 4]
    check_numeric(sch.func, func, emulate_gpu=True, target=GPU)


def test_cooperative_fetch_binds_the_same_thread_axes_inside() -> None:
    func = _matmul()
    sch, c, ko, _ = _tiled(func)
    a = sch.cache_read(c, 0, "shared")
    sch.compute_at(a, ko)
    fused = sch.fuse(*sch.get_loops(a)[-2:])
    _, ty, tx = sch.split(fused, [None, 8, 16])
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    check_numeric(sch.func, func, emulate_gpu=True, target=GPU)
    verify_trace_roundtrip(sch, func)
    src = tc.codegen.cuda_source(sch.mod, GPU)
    assert "__shared__ __align__(32) float A_shared[256];" in src  # 32 x 8, compacted


def test_bind_nested_same_axis_requires_independence() -> None:
    text = """
@T.prim_func
def main(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32")):
    with T.block("root"):
        for i, j in T.grid(16, 16):
            with T.block("B"):
                vi = T.axis.spatial(16, i)
                vj = T.axis.spatial(16, j)
                B[vi, vj] = A[vi, vj]
"""
    sch = Schedule(tc.script.parse(text))
    i, j = sch.get_loops(sch.get_block("B"))
    sch.bind(i, "threadIdx.x")
    err = assert_fails_unchanged(sch, "bind", j, "threadIdx.x", match="already bound")
    assert 'depends on "i"' in str(err)


def test_bind_nested_same_axis_refuses_a_longer_inner_loop() -> None:
    func = _matmul()
    sch, c, ko, _ = _tiled(func)
    a = sch.cache_read(c, 0, "shared")
    sch.compute_at(a, ko)
    fused = sch.fuse(*sch.get_loops(a)[-2:])
    _, inner = sch.split(fused, [None, 32])
    assert_fails_unchanged(sch, "bind", inner, "threadIdx.x", match="extent 32 above 16")


def test_bind_nested_same_axis_refuses_an_accumulating_block() -> None:
    a = tc.te.placeholder((16, 16), "float32", name="A")
    k = tc.te.reduce_axis((0, 16), name="k")
    s = tc.te.compute((16,), lambda i: tc.te.sum(a[i, k], axis=k), name="S")
    t = tc.te.compute((16, 16), lambda i, j: s[i] * a[i, j], name="T")
    func = tc.te.create_prim_func([a, t])
    sch = Schedule(func)
    i, j = sch.get_loops(sch.get_block("T"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    s_blk = sch.get_block("S")
    sch.compute_at(s_blk, j)  # every thread computes the row sum (relaxed: global scope)
    kk = sch.get_loops(s_blk)[-1]
    whole = sch.copy()
    whole.bind(whole.get_loops(whole.get_block("S"))[-1], "threadIdx.x")  # init included: ok
    sch.decompose_reduction(s_blk, kk)
    # the update alone would add its contribution once per outer thread
    assert_fails_unchanged(sch, "bind", kk, "threadIdx.x", match="accumulate once per outer")


@pytest.mark.parametrize("order", ["cache_first", "compute_at_first"])
def test_cache_chain_in_either_order(order: str) -> None:
    func = _matmul()
    sch, c, ko, ki = _tiled(func)
    if order == "cache_first":
        shared = sch.cache_read(c, 0, "shared")
        local = sch.cache_read(c, 0, "local")
        sch.compute_at(local, ki)
        sch.compute_at(shared, ko)
    else:
        shared = sch.cache_read(c, 0, "shared")
        sch.compute_at(shared, ko)
        local = sch.cache_read(c, 0, "local")  # refused before: shares the nest
        sch.compute_at(local, ki)
    assert _extents(sch, shared, ko) == [32, 8]
    assert _extents(sch, local, ki) == [4]
    check_numeric(sch.func, func, emulate_gpu=True, target=GPU)
    verify_trace_roundtrip(sch, func)


def test_cache_chain_copy_sits_after_its_producer() -> None:
    func = _matmul()
    sch, c, ko, _ = _tiled(func)
    shared = sch.cache_read(c, 0, "shared")
    sch.compute_at(shared, ko)
    local = sch.cache_read(c, 0, "local")
    # straight after the shared copy, under k_0: the readers' region of one k tile
    assert _extents(sch, local, ko) == [4, 8]
    check_numeric(sch.func, func, emulate_gpu=True, target=GPU)


def test_fuse_past_int32_gives_an_int64_loop() -> None:
    a = tc.te.placeholder((65536, 32768), "float16", name="A")
    b = tc.te.compute((65536, 32768), lambda i, j: a[i, j], name="B")
    sch = Schedule(tc.te.create_prim_func([a, b]))
    fused = sch.fuse(*sch.get_loops(sch.get_block("B")))
    loop = sch.get(fused)
    assert isinstance(loop, For)
    assert str(loop.loop_var.dtype) == "int64"
    assert loop.extent.value == 2**31
