"""Tensor-core GEMMs on a real GPU (marked ``gpu``: skipped without one).

Each kernel is compared with numpy and with its lockstep emulation; the 4096^3 fp16 GEMM is
timed against ``torch.matmul`` when PyTorch is installed (run with ``-s`` to see the ratio).
"""

from __future__ import annotations

import numpy as np
import pytest
from lockstep import run_lockstep
from tensor_core_kernels import make_gemm, schedule_mma_gemm, schedule_wmma_gemm

import tilecraft as tc
from tilecraft.lower.gpu_pipeline import lower_gpu
from tilecraft.testing.numeric import bf16_to_f32, f32_to_bf16

pytestmark = pytest.mark.gpu
GPU = tc.Target("cuda -arch=sm_90")


def _operands(m: int, n: int, k: int, dtype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Device operands (fp16, or bf16 bit patterns) and the float64 reference."""
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    if dtype == "float16":
        a16, b16 = a.astype(np.float16), b.astype(np.float16)
        ref = a16.astype(np.float64) @ b16.astype(np.float64)
    else:
        a16, b16 = f32_to_bf16(a), f32_to_bf16(b)
        ref = bf16_to_f32(a16).astype(np.float64) @ bf16_to_f32(b16).astype(np.float64)
    return a16, b16, ref


@pytest.mark.parametrize(
    ("kind", "dtype"), [("mma", "float16"), ("mma", "bfloat16"), ("wmma", "float16")]
)
def test_tensor_core_gemm_runs_on_gpu(kind: str, dtype: str) -> None:
    from tilecraft.runtime import build_cuda

    m = n = k = 1024
    sch = (schedule_mma_gemm if kind == "mma" else schedule_wmma_gemm)(make_gemm(m, n, k, dtype))
    lib = build_cuda(sch.func, GPU)
    a, b, ref = _operands(m, n, k, dtype)
    c = np.full((m, n), np.nan, np.float32)
    lib["main"](a, b, c)
    np.testing.assert_allclose(c, ref, rtol=1e-3, atol=1e-3)


def test_gpu_agrees_with_the_lockstep_emulation() -> None:
    from tilecraft.runtime import build_cuda

    m, n, k = 256, 128, 64
    sch = schedule_mma_gemm(make_gemm(m, n, k))
    a, b, _ = _operands(m, n, k, "float16")
    on_gpu = np.full((m, n), np.nan, np.float32)
    build_cuda(sch.func, GPU)["main"](a, b, on_gpu)
    emulated = np.full((m, n), np.nan, np.float32)
    run_lockstep(lower_gpu(sch.func, GPU), {"A": a, "B": b, "matmul": emulated})
    # the same products; only the order of the fp32 sums inside an mma may differ
    np.testing.assert_allclose(on_gpu, emulated, rtol=1e-5, atol=1e-5)


def test_4096_gemm_against_torch_matmul() -> None:
    torch = pytest.importorskip("torch")
    from tilecraft.runtime import build_cuda

    n = 4096
    sch = schedule_mma_gemm(make_gemm(n, n, n))
    lib = build_cuda(sch.func, GPU)
    a = torch.rand(n, n, device="cuda", dtype=torch.float16) - 0.5
    b = torch.rand(n, n, device="cuda", dtype=torch.float16) - 0.5
    c = torch.empty(n, n, device="cuda", dtype=torch.float32)
    lib["main"](a, b, c)
    torch.cuda.synchronize()
    want = a.float() @ b.float()
    assert torch.allclose(c, want, rtol=1e-2, atol=1e-2)
    ours = lib.time_evaluator("main", number=10, repeat=3)(a, b, c).median
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.matmul(a, b)
    start.record()
    for _ in range(10):
        torch.matmul(a, b)
    end.record()
    torch.cuda.synchronize()
    theirs = start.elapsed_time(end) / 10 / 1e3
    tflops = 2 * n**3 / ours / 1e12
    line = f"4096^3 fp16 GEMM: {ours * 1e3:.3f} ms ({tflops:.1f} TFLOP/s), "
    line += f"torch.matmul {theirs * 1e3:.3f} ms, ratio {ours / theirs:.2f}"
    print(line)  # noqa: T201
    assert ours > 0
