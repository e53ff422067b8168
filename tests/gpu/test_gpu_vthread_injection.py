"""Virtual threads are injected: their iterations interleave inside the innermost statements
that depend on them, and what does not depend on them (the cooperative fetch of a shared
stage, barriers) runs once for all of them."""

from __future__ import annotations

import tilecraft as tc
from tilecraft.ir import For, Node, Stmt, post_order_visit
from tilecraft.lower.gpu_nodes import ThreadSync
from tilecraft.lower.gpu_pipeline import lower_gpu
from tilecraft.testing import check_numeric

SM80 = tc.Target("cuda -arch=sm_80")


def _gemm() -> tc.ir.PrimFunc:
    a = tc.te.placeholder((64, 32), "float32", name="A")
    b = tc.te.placeholder((32, 64), "float32", name="B")
    r = tc.te.reduce_axis((0, 32), name="k")
    c = tc.te.compute((64, 64), lambda i, j: tc.te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return tc.te.create_prim_func([a, b, c])


def _vthread_gemm(func: tc.ir.PrimFunc) -> tuple[tc.Schedule, str]:
    """32x32 block tiles, 2x2 virtual threads of 8x8 threads, each a 2x2 register tile;
    A and B tiles fetched into shared memory per k step of 8."""
    sch = tc.Schedule(func)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    by, vy, ty, ii = sch.split(i, [None, 2, 8, 2])
    bx, vx, tx, jj = sch.split(j, [None, 2, 8, 2])
    ko, ki = sch.split(k, [None, 8])
    sch.reorder(by, bx, vy, vx, ty, tx, ko, ki, ii, jj)
    sch.bind(by, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(vy, "vthread.y")
    sch.bind(vx, "vthread.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    store = sch.cache_write(c, 0, "local")
    sch.reverse_compute_at(store, tx)
    for index in (0, 1):
        shared = sch.cache_read(c, index, "shared")
        sch.compute_at(shared, ko)
        fused = sch.fuse(*sch.get_loops(shared)[-2:])
        _, fy, fx = sch.split(fused, [None, 8, 8])
        sch.bind(fy, "threadIdx.y")
        sch.bind(fx, "threadIdx.x")
    sch.decompose_reduction(c, ko)
    return sch, sch.get(vy).loop_var.name


def _loops_named(body: Stmt, name: str) -> list[For]:
    found: list[For] = []

    def fn(n: Node) -> None:
        if isinstance(n, For) and n.loop_var.name == name:
            found.append(n)

    post_order_visit(body, fn)
    return found


def _contains(stmt: Stmt, pred: object) -> bool:
    hit = False

    def fn(n: Node) -> None:
        nonlocal hit
        hit = hit or pred(n)  # type: ignore[operator]

    post_order_visit(stmt, fn)
    return hit


def test_shared_stage_is_fetched_once_for_all_virtual_threads() -> None:
    func = _gemm()
    sch, vname = _vthread_gemm(func)
    (kern,) = lower_gpu(sch.func, SM80).kernels
    vloops = _loops_named(kern.body, vname)
    assert vloops, "the virtual-thread loops are kept as unrolled loops"
    for loop in vloops:
        assert not _contains(loop, lambda n: isinstance(n, ThreadSync))
        assert not _contains(
            loop,
            lambda n: (
                getattr(getattr(n, "buffer", None), "scope", "") == "shared"
                and type(n).__name__ == "BufferStore"
            ),
        )
    check_numeric(sch.func, func, emulate_gpu="racecheck", target=SM80)


def test_virtual_threads_interleave_inside_the_reduction_loop() -> None:
    func = _gemm()
    sch, vname = _vthread_gemm(func)
    (kern,) = lower_gpu(sch.func, SM80).kernels
    ki = sch.get(sch.get_loops(sch.get_block("C"))[-3]).loop_var.name
    (inner,) = _loops_named(kern.body, ki)
    assert _loops_named(inner.body, vname), "the vthread loop runs inside the k loop"
