"""Lowering for GPU tiles: compaction with thread loops kept, shared allocations hoisted,
vthread, unroll pragmas (CPU and GPU), 64-bit indexing, 128-bit vector accesses of 8/16-bit
types, register tiles stored with vector stores, native half arithmetic."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import tilecraft as tc
from tilecraft.ir import Allocate, For, ForKind, PrimFunc, post_order_visit
from tilecraft.lower import UnrollLoops, lower
from tilecraft.lower.gpu_pipeline import lower_gpu
from tilecraft.lower.unroll_loops import steps
from tilecraft.runtime import build_cuda_source, cuda_source
from tilecraft.schedule import Schedule
from tilecraft.testing import check_numeric

GPU = tc.Target("cuda -arch=sm_90")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu"))  # the kernel schedules


def _nodes(root: object, cls: type) -> list:
    out: list = []
    post_order_visit(root, lambda n: out.append(n) if isinstance(n, cls) else None)
    return out


def _elementwise(n: int, dtype: str = "float32", expr=None) -> PrimFunc:
    a = tc.te.placeholder((n,), dtype, name="A")
    b = tc.te.placeholder((n,), dtype, name="B")
    c = tc.te.compute((n,), expr or (lambda i: a[i] * b[i] + a[i]), name="C")
    return tc.te.create_prim_func([a, b, c])


def _vector_kernel(n: int, dtype: str, lanes: int) -> Schedule:
    sch = Schedule(_elementwise(n, dtype))
    bx, tx, v = sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 32, lanes])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.vectorize(v)
    return sch


# -- compaction with thread loops ----------------------------------------------------------


def test_register_tile_of_a_thread_is_compacted_with_a_thread_offset() -> None:
    """A local accumulator written under blockIdx/threadIdx loops keeps one thread's 4x4."""
    a = tc.te.placeholder((64, 64), "float32", name="A")
    k = tc.te.reduce_axis((0, 64), name="k")
    c = tc.te.compute((64, 64), lambda i, j: tc.te.sum(a[i, k] * a[k, j], axis=k), name="C")
    func = tc.te.create_prim_func([a, c])
    sch = Schedule(func)
    blk = sch.get_block("C")
    i, j, kk = sch.get_loops(blk)
    by, ty, ii = sch.split(i, [None, 4, 4])
    bx, tx, jj = sch.split(j, [None, 8, 4])
    sch.reorder(by, bx, ty, tx, kk, ii, jj)
    for loop, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y")):
        sch.bind(loop, tag)
    sch.bind(tx, "threadIdx.x")
    sch.reverse_compute_at(sch.cache_write(blk, 0, "local"), tx)
    (kern,) = lower_gpu(sch.func, GPU).kernels
    (acc,) = [al.buffer for al in _nodes(kern.body, Allocate) if al.buffer.scope == "local"]
    assert acc.shape[0].value == 16
    check_numeric(sch.func, func, emulate_gpu=True, target=GPU)


def test_local_box_may_range_over_a_shorter_thread_loop() -> None:
    """Written per row by every thread, read by thread r < 4: four registers, not 128."""
    import schedules as ks

    src = cuda_source(ks.schedule_gemv(ks.gemv_func(64, 2048)).mod, GPU)
    assert "float Y[4];" in src


def test_shared_allocation_is_hoisted_above_the_thread_loops() -> None:
    import schedules as ks

    low = lower_gpu(ks.schedule_gemm(ks.gemm_func(64, 64, 64)).func, GPU)
    body = low.kernels[0].body
    # blockIdx.y -> blockIdx.x -> the shared allocations -> threadIdx loops
    inner = body.body.body  # type: ignore[attr-defined]
    names = []
    while isinstance(inner, Allocate):
        names.append(inner.buffer.name)
        inner = inner.body
    assert sorted(names) == ["A_shared", "B_shared"]
    assert isinstance(inner, For)
    assert inner.thread == "threadIdx.y"


def test_vthread_is_lowered_to_an_unrolled_loop_and_compiles() -> None:
    a = tc.te.placeholder((64, 64), "float32", name="A")
    b = tc.te.compute((64, 64), lambda i, j: a[i, j] * 2.0, name="B")
    func = tc.te.create_prim_func([a, b])
    sch = Schedule(func)
    blk = sch.get_block("B")
    i, j = sch.get_loops(blk)
    bi, vi, ti = sch.split(i, [None, 2, 8])
    bj, tj = sch.split(j, [None, 32])
    sch.reorder(bi, bj, vi, ti, tj)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    sch.bind(vi, "vthread.x")
    sch.bind(ti, "threadIdx.y")
    sch.bind(tj, "threadIdx.x")
    src = build_cuda_source(sch.mod, GPU)
    (kern,) = src.programs["main"].kernels
    assert [e.value for e in kern.block] == [32, 8, 1]
    assert "vthread" not in src.text
    assert "#pragma unroll" in src.text
    check_numeric(sch.func, func, emulate_gpu=True, target=GPU)


# -- unroll pragmas -------------------------------------------------------------------------


def _nest(explicit: int | None = None, max_step: int = 16) -> PrimFunc:
    a = tc.te.placeholder((8, 4), "float32", name="A")
    b = tc.te.compute((8, 4), lambda i, j: a[i, j] + 1.0, name="B")
    func = tc.te.create_prim_func([a, b])
    sch = Schedule(func)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.annotate(i, "pragma_auto_unroll_max_step", max_step)
    if explicit is not None:
        sch.annotate(i, "pragma_unroll_explicit", explicit)
    return sch.func


def test_steps_count_one_threads_statements() -> None:
    low = lower(_nest(), "cpu")
    assert steps(low.body) == 32


def test_auto_unroll_marks_loops_within_the_budget() -> None:
    low = lower(_nest(max_step=16), "cpu")
    loops = _nodes(low.body, For)
    kinds = {lp.loop_var.name: lp.kind for lp in loops}
    assert kinds == {"i": ForKind.SERIAL, "j": ForKind.UNROLLED}  # 4 steps in, 32 out
    assert not any(lp.annotations for lp in loops)  # consumed
    assert "#pragma GCC unroll 4" in tc.build(_nest(max_step=16), "cpu").source


def test_auto_unroll_explicit_expands_the_loops() -> None:
    func = _nest(explicit=1, max_step=64)
    low = lower(func, "cpu")
    assert not _nodes(low.body, For)  # both loops expanded: 32 statements
    check_numeric(func, lambda a: a + 1)


def test_auto_unroll_is_honoured_in_cuda() -> None:
    def kernel(pragma: bool) -> str:
        sch = Schedule(_elementwise(1024))
        bx, tx, _r = sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 64, 4])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        if pragma:
            sch.annotate(bx, "pragma_auto_unroll_max_step", 8)
        return cuda_source(sch.mod, GPU)

    assert "#pragma unroll" not in kernel(False)
    assert "#pragma unroll" in kernel(True)


def test_unroll_pass_leaves_unannotated_functions_alone() -> None:
    func = lower(_elementwise(16), "cpu")
    assert UnrollLoops()(func) is func or tc.ir.structural_equal(UnrollLoops()(func), func)


# -- 64-bit indexing ------------------------------------------------------------------------


def test_tensors_of_2_31_elements_index_in_int64() -> None:
    a = tc.te.placeholder((65536, 32768), "float16", name="A")
    b = tc.te.compute(
        (65536, 32768), lambda i, j: a[i, j] * tc.ir.FloatImm("float16", 2.0), name="B"
    )
    func = tc.te.create_prim_func([a, b])
    low = lower(func, "cpu")
    assert [str(p.shape[0].dtype) for p in low.params] == ["int64", "int64"]
    assert "(int64_t)(i)) * INT64_C(32768)" in tc.codegen.build_c_source(func, "cpu").text
    sch = Schedule(func)
    fused = sch.fuse(*sch.get_loops(sch.get_block("B")))
    bx, tx = sch.split(fused, [None, 256])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    src = build_cuda_source(sch.mod, GPU)
    assert "const long long" in src.text
    assert src.programs["main"].kernels[0].grid[0].value == 2**31 // 256


# -- vector accesses and half arithmetic -----------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "lanes", "carrier"),
    [
        ("float16", 8, "uint4"),
        ("float16", 4, "uint2"),
        ("bfloat16", 8, "uint4"),
        ("int8", 16, "uint4"),
        ("int8", 4, "unsigned int"),
        ("float32", 4, "float4"),
        ("float16", 2, "__half2"),
    ],
)
def test_vector_accesses_of_narrow_types(dtype: str, lanes: int, carrier: str) -> None:
    sch = _vector_kernel(32 * lanes * 2, dtype, lanes)
    src = cuda_source(sch.mod, GPU)
    assert src.count(f"*(const {carrier}*)(") == 2
    assert f"*({carrier}*)(C +" in src
    check_numeric(
        sch.func,
        sch.func if dtype == "int8" else _elementwise(32 * lanes * 2, dtype),
        emulate_gpu=True,
        target=GPU,
    )


def test_sixteen_lanes_of_float16_are_not_one_access() -> None:
    sch = _vector_kernel(1024, "float16", 16)  # 256 bits: scalars, unrolled
    src = cuda_source(sch.mod, GPU)
    assert "uint4" not in src
    assert "#pragma unroll" in src


def test_register_tile_stored_with_a_vector_store() -> None:
    a = tc.te.placeholder((64, 64), "float32", name="A")
    b = tc.te.compute((64, 64), lambda i, j: a[i, j] + 1.0, name="B")
    func = tc.te.create_prim_func([a, b])
    sch = Schedule(func)
    blk = sch.get_block("B")
    i, _j = sch.get_loops(blk)
    bx, tx = sch.split(i, [None, 32])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    store = sch.cache_write(blk, 0, "local")
    sch.reverse_compute_at(store, tx)
    _, v = sch.split(sch.get_loops(store)[-1], [None, 4])
    sch.vectorize(v)
    src = cuda_source(sch.mod, GPU)
    assert "tc_vout.x = B_local[" in src  # lanes read from registers one by one
    assert "*(float4*)(B +" in src
    check_numeric(sch.func, func, emulate_gpu=True, target=GPU)


def test_half_arithmetic_without_float_round_trips() -> None:
    func = _elementwise(256, "float16", None)
    sch = Schedule(func)
    bx, tx = sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 128])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sm90 = cuda_source(sch.mod, GPU)
    (line,) = [ln for ln in sm90.splitlines() if ln.strip().startswith("C[")]
    assert "__half2float" not in line
    assert "__float2half" not in line
    old = cuda_source(sch.mod, tc.Target("cuda -arch=sm_52"))
    (line52,) = [ln for ln in old.splitlines() if ln.strip().startswith("C[")]
    assert "__half2float" in line52  # no half instructions before sm_53


def test_half_literals_min_max_and_math() -> None:
    h = tc.ir.FloatImm("float16", 0.5)

    def expr(a, b):
        return lambda i: tc.ir.op.max(a[i] * h, tc.ir.op.exp(b[i]))

    a = tc.te.placeholder((128,), "float16", name="A")
    b = tc.te.placeholder((128,), "float16", name="B")
    c = tc.te.compute((128,), expr(a, b), name="C")
    func = tc.te.create_prim_func([a, b, c])
    sch = Schedule(func)
    sch.bind(sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 128])[1], "threadIdx.x")
    sch.bind(sch.get_loops(sch.get_block("C"))[0], "blockIdx.x")
    src = cuda_source(sch.mod, GPU)
    assert "__ushort_as_half((unsigned short)0x3800u)" in src  # 0.5, exact
    assert "tc_max<__half>(" in src
    assert "__float2half(expf(__half2float(" in src  # math through float, once
    check_numeric(sch.func, func, emulate_gpu=True, target=GPU)


@pytest.mark.nvcc
def test_narrow_vector_and_half_kernels_compile() -> None:
    from tilecraft.runtime.cuda_compile import ptxas_info

    for dtype, lanes in (("float16", 8), ("int8", 16), ("bfloat16", 8)):
        src = cuda_source(_vector_kernel(4096, dtype, lanes).mod, GPU)
        info = ptxas_info(src, "sm_90")
        assert all(not s.spills for s in info.values())


def test_half_scalar_parameter_keeps_the_float_the_runtime_passes() -> None:
    from tilecraft.ir import Buffer, BufferStore, Var

    a, b = Buffer("A", (64,), "float16"), Buffer("B", (64,), "float16")
    s, tx = Var("s", "float16"), Var("tx")
    store = BufferStore(b, a[tx] * s, (tx,))
    func = PrimFunc((a, b, s), For(tx, 0, 64, ForKind.THREAD_BINDING, store, thread="threadIdx.x"))
    src = cuda_source(func, GPU)
    assert "float s_f32) {" in src
    assert "const __half s = __float2half(s_f32);" in src
    assert "B[tx] = (A[tx] * s);" in src
