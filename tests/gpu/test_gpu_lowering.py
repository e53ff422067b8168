"""GPU lowering and CUDA emission: barriers, reductions, launch dimensions, limits, dtypes."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import pytest
from kernels import (
    make_layer_norm,
    make_matmul,
    make_scale_symbolic,
    make_softmax,
    make_transpose,
    make_vector_add,
)
from tests_gpu_reference import REFERENCE_GEMV

import tilecraft as tc
from tilecraft.errors import LowerError
from tilecraft.ir import (
    Allocate,
    Buffer,
    BufferStore,
    For,
    ForKind,
    PrimFunc,
    Var,
    post_order_visit,
    seq,
)
from tilecraft.lower.gpu_nodes import ThreadSync
from tilecraft.lower.gpu_pipeline import lower_gpu
from tilecraft.lower.gpu_thread_sync import InsertThreadSync
from tilecraft.runtime import build_cuda_source, cuda_source
from tilecraft.runtime.arguments import eval_shape_expr
from tilecraft.testing import check_numeric

GPU = tc.Target("cuda -arch=sm_90")


def _syncs(func) -> int:
    count = 0

    def fn(n):
        nonlocal count
        count += isinstance(n, ThreadSync)

    for k in lower_gpu(func, GPU).kernels:
        post_order_visit(k.body, fn)
    return count


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (make_matmul, 2),  # tiles loaded -> compute; compute -> next iteration's loads
        (make_transpose, 1),  # tile written -> tile read transposed
        (make_vector_add, 0),
        (make_layer_norm, 0),  # one warp: shuffles only, local results
        (make_softmax, 8),  # per reduction: 3 inside the block reduce, 1 before readers
    ],
)
def test_barriers_exactly_where_shared_memory_is_communicated(make, expected):
    func, _ = make()
    assert _syncs(func) == expected


def _flat_kernel(read_offset: int) -> PrimFunc:
    """S[tx] = A[tx]; B[tx] = S[tx + offset] (mod 32) in one 32-thread block."""
    a = Buffer("A", (32,), "float32")
    b = Buffer("B", (32,), "float32")
    s = Buffer("S", (32,), "float32", "shared")
    tx = Var("tx")
    body = seq(
        BufferStore(s, a[tx], (tx,)),
        BufferStore(b, s[(tx + read_offset) % 32], (tx,)),
    )
    loop = For(tx, 0, 32, ForKind.THREAD_BINDING, body, thread="threadIdx.x")
    return PrimFunc((a, b), Allocate(s, loop))


def test_no_barrier_when_each_thread_reads_its_own_shared_element():
    out = InsertThreadSync()(_flat_kernel(0))
    assert "__syncthreads" not in repr(out)
    assert "storage_sync" not in out.body.body.body.script()


def test_barrier_when_a_thread_reads_another_threads_element():
    out = InsertThreadSync()(_flat_kernel(1))
    stmts = out.body.body.body.stmts
    assert [type(s).__name__ for s in stmts] == ["BufferStore", "ThreadSync", "BufferStore"]


def test_launch_dimensions_from_thread_extents():
    (k,) = lower_gpu(make_matmul(64, 96, 32)[0], GPU).kernels
    assert [e.value for e in k.grid] == [3, 2, 1]
    assert [e.value for e in k.block] == [16, 16, 1]
    assert k.threads_per_block == 256


def test_symbolic_grid_extent_is_evaluated_at_launch():
    func, _ = make_scale_symbolic()
    prog = lower_gpu(func, GPU)
    (k,) = prog.kernels
    (n,) = [p for p in prog.func.params if isinstance(p, Var)]
    assert [eval_shape_expr(e, {id(n): 700}) for e in k.grid] == [3, 1, 1]
    assert k.block[0].value == 256
    assert "int n)" in cuda_source(func, GPU)


def test_warp_reduction_uses_shuffles_and_block_reduction_uses_shared_memory():
    warp = cuda_source(make_layer_norm()[0], GPU)
    assert "__shfl_down_sync(0xffffffffu" in warp
    assert "__shared__" not in warp
    block = cuda_source(make_softmax()[0], GPU)
    assert "__shfl_down_sync" in block
    assert "__shared__ __align__(32) float red_buf0[4];" in block


def test_reduction_over_threadidx_y_uses_a_shared_tree():
    src = cuda_source(tc.script.parse(REFERENCE_GEMV), GPU)
    assert "red_buf0[256]" in src
    assert "__shfl" not in src
    assert src.count("__syncthreads();") == 5


def test_per_thread_and_per_block_dimensions_are_compacted():
    src = cuda_source(make_matmul()[0], GPU)
    assert "float C_loc[4];" in src
    assert "__shared__ __align__(32) float A_sh[512];" in src


def test_vectorized_loop_uses_float4_when_aligned():
    src = cuda_source(make_vector_add()[0], GPU)
    assert src.count("*(const float4*)") == 2
    assert "*(float4*)(C +" in src


def test_misaligned_vectorized_loop_falls_back_to_unrolled_scalars():
    text = """
@T.prim_func
def shifted(A: T.Buffer((132,), "float32"), B: T.Buffer((128,), "float32")):
    with T.block("root"):
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            for v in T.vectorized(4):
                with T.block("B"):
                    vi = T.axis.spatial(128, tx * 4 + v)
                    T.reads(A[vi + 1])
                    T.writes(B[vi])
                    B[vi] = A[vi + 1]
"""
    src = cuda_source(tc.script.parse(text), GPU)
    assert "float4" not in src
    assert "#pragma unroll" in src


def _elementwise(threads: int, dtype: str = "float32", expr: str = "A[vi] * A[vi]") -> PrimFunc:
    text = f'''
@T.prim_func
def ew(A: T.Buffer(({threads * 2},), "{dtype}"), B: T.Buffer(({threads * 2},), "{dtype}")):
    with T.block("root"):
        for bx in T.thread_binding(2, thread="blockIdx.x"):
            for tx in T.thread_binding({threads}, thread="threadIdx.x"):
                with T.block("B"):
                    vi = T.axis.spatial({threads * 2}, bx * {threads} + tx)
                    T.reads(A[vi])
                    T.writes(B[vi])
                    B[vi] = {expr}
'''
    return tc.script.parse(text)


def test_verifier_rejects_too_many_threads():
    text = """
@T.prim_func
def wide(A: T.Buffer((32, 64), "float32"), B: T.Buffer((32, 64), "float32")):
    with T.block("root"):
        for ty in T.thread_binding(32, thread="threadIdx.y"):
            for tx in T.thread_binding(64, thread="threadIdx.x"):
                with T.block("B"):
                    vi = T.axis.spatial(32, ty)
                    vj = T.axis.spatial(64, tx)
                    T.reads(A[vi, vj])
                    T.writes(B[vi, vj])
                    B[vi, vj] = A[vi, vj]
"""
    expected = r"threads per block is 2048, .*max_threads_per_block = 1024"
    with pytest.raises(LowerError, match=expected):
        lower_gpu(tc.script.parse(text), GPU)


def test_verifier_rejects_a_too_long_thread_dimension():
    with pytest.raises(LowerError, match=r"extent of threadIdx.x is 2048, .*extent = 1024"):
        lower_gpu(_elementwise(2048), GPU)


def test_verifier_rejects_too_much_shared_memory():
    text = """
@T.prim_func
def big(A: T.Buffer((16384,), "float32"), B: T.Buffer((16384,), "float32")):
    with T.block("root"):
        S = T.alloc_buffer((16384,), "float32", scope="shared")
        for bx in T.thread_binding(1, thread="blockIdx.x"):
            for tx in T.thread_binding(128, thread="threadIdx.x"):
                for i in range(128):
                    with T.block("S"):
                        vi = T.axis.spatial(16384, i * 128 + tx)
                        T.reads(A[vi])
                        T.writes(S[vi])
                        S[vi] = A[vi]
            for tx in T.thread_binding(128, thread="threadIdx.x"):
                for i in range(128):
                    with T.block("B"):
                        vi = T.axis.spatial(16384, i * 128 + tx)
                        T.reads(S[16383 - vi])
                        T.writes(B[vi])
                        B[vi] = S[16383 - vi]
"""
    with pytest.raises(LowerError, match=r"static shared memory \(bytes\) is 65536, .*= 49152"):
        lower_gpu(tc.script.parse(text), GPU)


def test_verifier_rejects_too_many_registers():
    text = """
@T.prim_func
def regs(A: T.Buffer((32, 512), "float32"), B: T.Buffer((32, 512), "float32")):
    with T.block("root"):
        L = T.alloc_buffer((32, 512), "float32", scope="local")
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            for i in range(512):
                with T.block("L"):
                    vt = T.axis.spatial(32, tx)
                    vi = T.axis.spatial(512, i)
                    T.reads(A[vt, vi])
                    T.writes(L[vt, vi])
                    L[vt, vi] = A[vt, vi]
            for i in range(512):
                with T.block("B"):
                    vt = T.axis.spatial(32, tx)
                    vi = T.axis.spatial(512, i)
                    T.reads(L[vt, 511 - vi])
                    T.writes(B[vt, vi])
                    B[vt, vi] = L[vt, 511 - vi]
"""
    expected = r"registers per thread is 528, .*max_registers_per_thread"
    with pytest.raises(LowerError, match=expected):
        lower_gpu(tc.script.parse(text), GPU)


def test_unbound_function_is_rejected_for_cuda():
    text = """
@T.prim_func
def serial(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    with T.block("root"):
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                T.reads(A[vi])
                T.writes(B[vi])
                B[vi] = A[vi]
"""
    with pytest.raises(LowerError, match="outside every thread-bound loop"):
        lower_gpu(tc.script.parse(text), GPU)


def test_kernel_signature_and_launch_bounds():
    src = cuda_source(make_transpose()[0], GPU)
    assert 'extern "C" __global__ void __launch_bounds__(256) transpose_kernel0(' in src
    assert "const float* __restrict__ A," in src
    assert "float* __restrict__ B)" in src


def test_float16_and_bfloat16_use_the_cuda_headers():
    half = cuda_source(_elementwise(64, "float16", "T.exp(A[vi])"), GPU)
    assert "#include <cuda_fp16.h>" in half
    assert "B[vi] = __float2half(expf(__half2float(A[vi])));" in half.replace(
        "((bx * 64) + tx)", "vi"
    )
    bf = cuda_source(_elementwise(64, "bfloat16"), GPU)
    assert "#include <cuda_bf16.h>" in bf
    assert "__bfloat162float" in bf


@pytest.mark.parametrize(
    ("expr", "cuda"),
    [
        ("T.exp(A[vi])", "expf("),
        ("T.sqrt(A[vi])", "sqrtf("),
        ("T.rsqrt(A[vi])", "rsqrtf("),
        ("T.tanh(A[vi])", "tanhf("),
        ("T.erf(A[vi])", "erff("),
        ("T.max(A[vi], T.float32(0.0))", "tc_max<float>("),
    ],
)
def test_math_intrinsics(expr, cuda):
    assert cuda in cuda_source(_elementwise(32, expr=expr), GPU)


def test_show_source_prints_readable_cuda():
    src = build_cuda_source(make_vector_add()[0], GPU)
    buf = io.StringIO()
    with redirect_stdout(buf):
        src.show_source()
    assert buf.getvalue().startswith("// Generated by tilecraft")
    assert "\n  const int tx = (int)threadIdx.x;\n" in buf.getvalue()


def test_row_reduction_in_half_warps_uses_group_width_shuffles():
    text = """
@T.prim_func
def rowsum(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64,), "float32")):
    with T.block("root"):
        for bx in T.thread_binding(8, thread="blockIdx.x"):
            for ty in T.thread_binding(8, thread="threadIdx.y"):
                for tx in T.thread_binding(16, thread="threadIdx.x"):
                    for k0 in range(4):
                        with T.block("B"):
                            vi = T.axis.spatial(64, bx * 8 + ty)
                            vk = T.axis.reduce(64, k0 * 16 + tx)
                            T.reads(A[vi, vk])
                            T.writes(B[vi])
                            with T.init():
                                B[vi] = T.float32(0.0)
                            B[vi] = B[vi] + A[vi, vk]
"""
    func = tc.script.parse(text)
    src = cuda_source(func, GPU)
    assert "__shfl_down_sync(0xffffffffu, (float)(red_out0[0]), 8, 16);" in src
    assert "if ((tx == 0)) {" in src
    check_numeric(func, lambda a: a.sum(axis=1), emulate_gpu=True, target=GPU, rtol=1e-5)


def test_smaller_thread_extent_is_guarded_within_the_launch():
    text = """
@T.prim_func
def two(A: T.Buffer((64,), "float32"), B: T.Buffer((32,), "float32"), C: T.Buffer((64,), "float32")):
    with T.block("root"):
        for bx in T.thread_binding(1, thread="blockIdx.x"):
            for tx in T.thread_binding(64, thread="threadIdx.x"):
                with T.block("C"):
                    vi = T.axis.spatial(64, tx)
                    T.reads(A[vi])
                    T.writes(C[vi])
                    C[vi] = A[vi] + T.float32(1.0)
            for tx in T.thread_binding(32, thread="threadIdx.x"):
                with T.block("B"):
                    vi = T.axis.spatial(32, tx)
                    T.reads(A[vi])
                    T.writes(B[vi])
                    B[vi] = A[vi] * T.float32(2.0)
"""  # noqa: E501
    func = tc.script.parse(text)
    (k,) = lower_gpu(func, GPU).kernels
    assert k.block[0].value == 64
    assert "if (tx_1 < 32) {" in cuda_source(func, GPU)


def test_dynamic_shared_memory_is_carved_from_one_extern_array():
    func, ref = make_transpose(64, "shared.dyn")
    (k,) = lower_gpu(func, GPU).kernels
    assert [b.shape[0].value for b in k.dyn_shared] == [32 * 33]
    src = cuda_source(func, GPU)
    assert "extern __shared__ __align__(32) unsigned char tc_dyn_smem[];" in src
    assert "float* tile = (float*)(tc_dyn_smem + 0);" in src
    assert src.count("__syncthreads();") == 1
    check_numeric(func, ref, emulate_gpu=True, target=GPU)
