"""Lowering bugs that serial emulation cannot see (issue 11, item 5), pinned on the lowered IR.

1. A shared buffer reused by every iteration of a loop, written by statements that run on
   every ``threadIdx.y`` of the block although no ``threadIdx.y`` loop encloses them: the
   barrier pass took a thread to be its enclosing thread loops only, found each thread
   touching its own element, and left out both barriers; a warp one iteration ahead then
   overwrote the tile another warp was still reading (0 barriers before, 2 now).
2. A ``local`` staging buffer that threads read from each other: each thread has its own
   copy on a GPU, so the CUDA was silently wrong while serial emulation agreed with numpy.
   It is rejected now (see tilecraft/lower/gpu_check_local.py for why not promoted).
3. A cross-thread reduction under a serial reduce loop: the rewrite wrote ``init + this
   iteration's sum`` each iteration, dropping the earlier ones. Rejected now.
4. The barrier pass remembered which access pairs cross threads under ``(id(a), id(b))``;
   an access freed earlier in the walk could hand its id, and its answer, to a new one.
   About one lowering in 200 of a ``threadIdx.y`` tree reduction lost the barrier before
   the final read (the race checker then reported it, depending on memory layout).

``bug_*`` build the code of each pattern so the race checker's tests can reuse them.
"""

from __future__ import annotations

import pytest

import tilecraft as tc
from tilecraft.errors import LowerError
from tilecraft.ir import PrimFunc, post_order_visit
from tilecraft.lower.gpu_nodes import ThreadSync
from tilecraft.lower.gpu_pipeline import lower_gpu
from tilecraft.runtime import cuda_source
from tilecraft.schedule import Schedule
from tilecraft.testing import check_numeric

GPU = tc.Target("cuda -arch=sm_90")

CROSS_ITERATION_REUSE = """
@T.prim_func
def reuse(A: T.Buffer((4, 32), "float32"), B: T.Buffer((4, 32), "float32"), C: T.Buffer((4, 32), "float32")):
    with T.block("root"):
        S = T.alloc_buffer((32,), "float32", scope="shared")
        for bx in T.thread_binding(1, thread="blockIdx.x"):
            for tx in T.thread_binding(32, thread="threadIdx.x"):
                for ko in range(4):
                    with T.block("W"):
                        vtx = T.axis.spatial(32, tx)
                        vko = T.axis.spatial(4, ko)
                        T.reads(A[vko, vtx])
                        T.writes(S[vtx])
                        S[vtx] = A[vko, vtx]
                    with T.block("R"):
                        vtx = T.axis.spatial(32, tx)
                        vko = T.axis.spatial(4, ko)
                        T.reads(S[vtx])
                        T.writes(B[vko, vtx])
                        B[vko, vtx] = S[vtx] * T.float32(2.0)
            for ty in T.thread_binding(4, thread="threadIdx.y"):
                for tx in T.thread_binding(32, thread="threadIdx.x"):
                    with T.block("other"):
                        vty = T.axis.spatial(4, ty)
                        vtx = T.axis.spatial(32, tx)
                        T.reads(A[vty, vtx])
                        T.writes(C[vty, vtx])
                        C[vty, vtx] = A[vty, vtx]
"""  # noqa: E501


def bug_cross_iteration_reuse() -> PrimFunc:
    """Pattern 1: ``S`` rewritten each ``ko`` iteration by the 4 warps of the block."""
    return tc.script.parse(CROSS_ITERATION_REUSE)


def bug_local_exchange(n: int = 8) -> Schedule:
    """Pattern 2, by the Schedule API: a transpose staged through a ``local`` tile that the
    threads fill cooperatively and read transposed (each reads what another wrote)."""
    a = tc.te.placeholder((n, n), "float32", name="A")
    b = tc.te.compute((n, n), lambda i, j: a[j, i], name="B")
    sch = Schedule(tc.te.create_prim_func([a, b]))
    blk = sch.get_block("B")
    i, j = sch.get_loops(blk)
    by, ty = sch.split(i, [None, 8])
    bx, tx = sch.split(j, [None, 8])
    sch.reorder(by, bx, ty, tx)
    for loop, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y")):
        sch.bind(loop, tag)
    sch.bind(tx, "threadIdx.x")
    stage = sch.cache_read(blk, 0, "local")
    sch.compute_at(stage, bx)
    l0, l1 = sch.get_loops(stage)[-2:]
    sch.bind(l0, "threadIdx.y")
    sch.bind(l1, "threadIdx.x")
    return sch


def _syncs(func: PrimFunc) -> int:
    n = 0

    def fn(node: object) -> None:
        nonlocal n
        n += isinstance(node, ThreadSync)

    for k in lower_gpu(func, GPU).kernels:
        post_order_visit(k.body, fn)
    return n


def test_cross_iteration_reuse_by_every_thread_row_gets_both_barriers() -> None:
    func = bug_cross_iteration_reuse()
    assert _syncs(func) == 2
    src = cuda_source(func, GPU)
    body = src[src.index("for (int ko") :]
    loop = body[: body.index("\n  }\n")]
    # written, barrier, read, barrier: nothing of iteration ko + 1 before everyone has read
    assert loop.index("S[tx] = ") < loop.index("__syncthreads") < loop.index("= (S[tx]")
    assert loop.rstrip().endswith("__syncthreads();")


def test_cross_iteration_reuse_has_the_serial_meaning() -> None:
    func = bug_cross_iteration_reuse()
    check_numeric(func, lambda a: (a * 2, a), emulate_gpu=True, target=GPU)


def test_local_tile_read_across_threads_is_rejected() -> None:
    sch = bug_local_exchange()
    # the serial meaning is right, which is why serial emulation never caught it
    check_numeric(sch.func, lambda a: a.T.copy(), emulate_gpu="serial", target=GPU)
    with pytest.raises(LowerError, match=r"local buffer 'A_local'.*only other threads write"):
        lower_gpu(sch.func, GPU)


def test_local_tile_each_thread_reads_itself_is_accepted() -> None:
    a = tc.te.placeholder((64,), "float32", name="A")
    b = tc.te.compute((64,), lambda i: a[i] * 2.0, name="B")
    func = tc.te.create_prim_func([a, b])
    sch = Schedule(func)
    blk = sch.get_block("B")
    bx, tx = sch.split(sch.get_loops(blk)[0], [None, 32])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    stage = sch.cache_read(blk, 0, "local")
    sch.compute_at(stage, tx)
    assert "float A_local[1];" in cuda_source(sch.mod, GPU)


def test_local_result_of_a_block_reduction_is_not_an_exchange() -> None:
    """Every thread writes its own copy of a block-wide sum and reads it: fine."""
    from schedules import rms_norm_func, schedule_row_reduction

    assert "float T_rms_norm_sqsum[1];" in cuda_source(
        schedule_row_reduction(rms_norm_func(4, 512)).mod, GPU
    )


def test_cross_thread_reduction_under_a_serial_reduce_loop_is_lowered() -> None:
    """Each thread's serial partial, then the cross-thread combine (it was refused)."""
    a = tc.te.placeholder((4, 512), "float32", name="A")
    k = tc.te.reduce_axis((0, 512), name="k")
    b = tc.te.compute((4,), lambda i: tc.te.sum(a[i, k], axis=k), name="B")
    sch = Schedule(tc.te.create_prim_func([a, b]))
    blk = sch.get_block("B")
    i, kk = sch.get_loops(blk)
    _, tx = sch.split(kk, [None, 128])  # the serial part outside the thread loop
    sch.bind(i, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    src = cuda_source(sch.mod, GPU)
    assert "__shfl_down_sync" in src
    assert "k_0 < 4" in src  # the serial part of the reduction, inside each thread


def test_tree_reduction_barriers_do_not_depend_on_memory_layout() -> None:
    """Every level of a threadIdx.y shared-memory tree, and the read of its root, stands
    after a barrier, in every one of many lowerings (each allocates its own objects)."""
    from emulator_schedules import make_row_sum

    counts = set()
    for _ in range(60):
        _, sch, _ = make_row_sum(16, 256, 64, "threadIdx.y", 1)
        counts.add(_syncs(sch.func))
    # 64 values written, a barrier; six halvings, each followed by one
    assert counts == {7}
