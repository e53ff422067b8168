"""The 4096^3 tensor-core GEMMs compile with nvcc/ptxas without spills, within the limits.

``mma.sync`` + ``ldmatrix`` + two-stage ``cp.async`` pipeline for sm_80 and sm_90 (fp16 and
bf16 inputs), WMMA for sm_75 (and sm_80); ``ptxas -v`` gives registers, spills and shared
memory per kernel.
"""

from __future__ import annotations

import pytest
from tensor_core_kernels import make_gemm, schedule_mma_gemm, schedule_wmma_gemm

import tilecraft as tc
from tilecraft.lower.gpu_verify import STATIC_SHARED_LIMIT
from tilecraft.runtime import build_cuda_source
from tilecraft.runtime.cuda_compile import PtxasInfo, ptxas_info

pytestmark = pytest.mark.nvcc

N = 4096
CASES = [
    ("mma", "float16", "sm_80"),
    ("mma", "float16", "sm_90"),
    ("mma", "bfloat16", "sm_80"),
    ("mma", "bfloat16", "sm_90"),
    ("wmma", "float16", "sm_75"),
    ("wmma", "float16", "sm_80"),
]


def compile_gemm(kind: str, dtype: str, arch: str) -> tuple[PtxasInfo, int, str]:
    """ptxas statistics, threads per block and CUDA text of the 4096^3 GEMM."""
    func = make_gemm(N, N, N, dtype)
    sch = (schedule_mma_gemm if kind == "mma" else schedule_wmma_gemm)(func)
    target = tc.Target(f"cuda -arch={arch}")
    src = build_cuda_source(sch.mod, target)
    (kernel,) = [k for prog in src.programs.values() for k in prog.kernels]
    info = ptxas_info(src.text, arch)
    assert sorted(info) == [kernel.name]
    threads = kernel.threads_per_block
    assert threads is not None
    return info[kernel.name], threads, src.text


QUICK = {("mma", "float16", "sm_80"), ("wmma", "float16", "sm_75")}  # the rest under -m slow
PARAMS = [
    pytest.param(*c, id="-".join(c), marks=() if c in QUICK else pytest.mark.slow) for c in CASES
]


@pytest.mark.parametrize(("kind", "dtype", "arch"), PARAMS)
def test_tensor_core_gemm_compiles_without_spills(kind: str, dtype: str, arch: str) -> None:
    stats, threads, text = compile_gemm(kind, dtype, arch)
    limits = tc.Target(f"cuda -arch={arch}").gpu
    assert not stats.spills, f"spills: {stats}"
    assert stats.stack_bytes == 0, f"local memory: {stats}"
    assert 0 < stats.registers <= limits.max_registers_per_thread
    assert stats.registers * threads <= limits.registers_per_block
    # two stages of a padded 128x32 A tile and a padded 32x128 B tile
    assert stats.shared_bytes == 2 * (128 * 40 + 32 * 136) * 2 <= STATIC_SHARED_LIMIT
    assert threads == 128
    if kind == "mma":
        assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in text
        assert "cp.async.cg.shared.global" in text
    else:
        assert "nvcuda::wmma::mma_sync(" in text
