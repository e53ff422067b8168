"""Generated CUDA compiles with nvcc for sm_90, without spills and within the target's limits."""

from __future__ import annotations

import pytest
from kernels import ALL
from tests_gpu_reference import REFERENCE_GEMV

import tilecraft as tc
from tilecraft.lower.gpu_verify import STATIC_SHARED_LIMIT
from tilecraft.runtime import build_cuda_source
from tilecraft.runtime.cuda_compile import compile_cuda, ptxas_info

GPU = tc.Target("cuda -arch=sm_90")
pytestmark = pytest.mark.nvcc


def _check_resources(func):
    src = build_cuda_source(func, GPU)
    info = ptxas_info(src.text, GPU.arch)
    kernels = [k for prog in src.programs.values() for k in prog.kernels]
    assert sorted(info) == sorted(k.name for k in kernels)
    limits = GPU.gpu
    for k in kernels:
        stats = info[k.name]
        assert not stats.spills, f"{k.name} spills registers: {stats}"
        assert 0 < stats.registers <= limits.max_registers_per_thread
        assert stats.registers * k.threads_per_block <= limits.registers_per_block
        assert stats.shared_bytes <= STATIC_SHARED_LIMIT
        assert k.threads_per_block <= limits.max_threads_per_block
    return info


@pytest.mark.parametrize("name", sorted(ALL))
def test_kernel_compiles_without_spills(name):
    func, _ = ALL[name]()
    _check_resources(func)


def test_shared_memory_reported_by_ptxas_matches_the_tiles():
    func, _ = ALL["matmul"]()
    info = _check_resources(func)
    # two 32x16 float tiles
    assert info["matmul_kernel0"].shared_bytes == 2 * 32 * 16 * 4


def test_reference_gemv_with_threadidx_y_reduction_compiles():
    _check_resources(tc.script.parse(REFERENCE_GEMV))


def test_compile_cuda_produces_a_cubin():
    func, _ = ALL["vector_add"]()
    cubin = compile_cuda(build_cuda_source(func, GPU).text, GPU.arch)
    assert cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_kernel_compiles(dtype):
    text = f'''
@T.prim_func
def half_gelu(A: T.Buffer((256,), "{dtype}"), B: T.Buffer((256,), "{dtype}")):
    with T.block("root"):
        for bx in T.thread_binding(2, thread="blockIdx.x"):
            for tx in T.thread_binding(128, thread="threadIdx.x"):
                with T.block("B"):
                    vi = T.axis.spatial(256, bx * 128 + tx)
                    T.reads(A[vi])
                    T.writes(B[vi])
                    B[vi] = A[vi] * T.sigmoid(A[vi] * T.{dtype}(1.702))
'''
    _check_resources(tc.script.parse(text))
