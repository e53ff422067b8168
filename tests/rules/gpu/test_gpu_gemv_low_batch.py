"""GPU LowBatchGEMV rule: a symbolic (or small constant) batch of rows times an ``(out, in)``
weight; each weight chunk loaded once per bucket of rows; equal to the unscheduled function
under the race-checking emulator; ptxas for sm_80 and sm_90 without spills; declines."""

from __future__ import annotations

import shutil

import pytest

import tilecraft as tc
from tilecraft.ir import PrimFunc, Var
from tilecraft.lower.gpu_pipeline import lower_gpu
from tilecraft.rules.gpu import LowBatchGEMV, LowBatchGEMVConfig
from tilecraft.runtime import build_cuda_source
from tilecraft.runtime.cuda_compile import ptxas_info
from tilecraft.schedule.testing_utils import verify_trace_roundtrip

SM80 = tc.Target("cuda -arch=sm_80")
te, topi = tc.te, tc.topi


def low_batch(b: int | Var, n: int, k: int, *, dtype: str = "float32",
              bias_relu: bool = False, out_dtype: str | None = None,
              decode_shape: bool = False) -> PrimFunc:  # fmt: skip
    """``y = x @ W^T`` for ``x``: ``(b, k)`` (``(b, 1, k)`` with ``decode_shape``, through
    ``topi.dense``) and ``W``: ``(n, k)``."""
    x = te.placeholder((b, 1, k) if decode_shape else (b, k), dtype, name="x")
    w = te.placeholder((n, k), dtype, name="W")
    if decode_shape:
        y = topi.dense(x, w)
    else:
        y = topi.matmul(x, w, transpose_b=True, out_dtype=out_dtype)
    if out_dtype is not None:
        y = te.compute(y.shape, lambda *i: tc.ir.op.cast(y[i], dtype), name="cast")
    if not bias_relu:
        return te.create_prim_func([x, w, y])
    bias = te.placeholder((n,), dtype, name="bias")
    zero = tc.ir.const(0.0, dtype)
    out = te.compute(y.shape, lambda *i: tc.ir.op.max(y[i] + bias[i[-1]], zero), name="relu")
    return te.create_prim_func([x, w, bias, out])


def scheduled(func: PrimFunc, target: tc.Target = SM80) -> tc.Schedule:
    sch = LowBatchGEMV().apply(func, target)
    assert isinstance(sch, tc.Schedule), sch
    return sch


def emulate_equal(func: PrimFunc, sizes: dict[str, int] | None = None) -> tc.Schedule:
    sch = scheduled(func)
    tc.testing.check_numeric(sch.func, func, emulate_gpu="racecheck", target=SM80,
                             shape_vars=sizes)  # fmt: skip
    assert len(lower_gpu(sch.func, SM80).kernels) == 1  # padding and epilogue inside
    return sch


@pytest.mark.parametrize("batch", [1, 5])
def test_symbolic_batch_with_epilogue_equal(batch: int) -> None:
    func = low_batch(Var("b"), 16, 256, bias_relu=True)
    sch = emulate_equal(func, {"b": batch})
    verify_trace_roundtrip(sch, func)


def test_decode_shaped_input_and_ragged_reduction_equal() -> None:
    emulate_equal(low_batch(Var("b"), 6, 100, decode_shape=True), {"b": 3})


def test_fp16_accumulated_in_fp32_equal() -> None:
    emulate_equal(low_batch(Var("b"), 8, 512, dtype="float16", out_dtype="float32"), {"b": 6})


def test_constant_small_batch_equal() -> None:
    emulate_equal(low_batch(4, 16, 512))


def test_each_weight_chunk_loaded_once_per_bucket() -> None:
    text = build_cuda_source(scheduled(low_batch(Var("b"), 4096, 4096)).mod, SM80).text
    body = text[text.index("for (int k_0") :]
    # one 16-byte load of W per weight row and k step, inside no loop over the bucket's rows
    assert body.count("*(const float4*)(W +") == 1
    assert "__shfl_down_sync" in text
    assert "float matmul_pad_rf[8];" in text  # bucket (4) x rows (2) partial sums


def test_declines_with_reasons() -> None:
    assert "larger than max_batch" in str(LowBatchGEMV().apply(low_batch(64, 16, 64), SM80))
    a = te.placeholder((Var("b"), 64), "float32", name="a")
    w = te.placeholder((64, 32), "float32", name="w")
    strided = te.create_prim_func([a, w, topi.matmul(a, w)])
    assert "strided" in str(LowBatchGEMV().apply(strided, SM80))
    x = te.placeholder((Var("b"), 64), "float32", name="x")
    y = te.placeholder((Var("n"), 64), "float32", name="y")
    both = te.create_prim_func([x, y, topi.matmul(x, y, transpose_b=True)])
    assert "constant 2-D weight" in str(LowBatchGEMV().apply(both, SM80))
    assert LowBatchGEMVConfig.for_target(SM80).bucket == 4


FULL = {
    "fp16_4096": lambda: low_batch(Var("b"), 4096, 4096, dtype="float16", out_dtype="float32"),
    "fp32_bias_relu": lambda: low_batch(Var("b"), 11008, 4096, bias_relu=True),
}


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="nvcc/ptxas not on PATH")
@pytest.mark.parametrize("arch", ["sm_80", pytest.param("sm_90", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", sorted(FULL))
def test_compiles_without_spills(name: str, arch: str) -> None:
    target = tc.Target(f"cuda -arch={arch}")
    src = build_cuda_source(scheduled(FULL[name](), target).mod, target)
    info = ptxas_info(src.text, arch)
    (kernel,) = [k for prog in src.programs.values() for k in prog.kernels]
    stats = info[kernel.name]
    limits = target.gpu
    assert limits is not None
    assert not stats.spills, stats
    assert stats.stack_bytes == 0, stats
    assert 0 < stats.registers <= limits.max_registers_per_thread
    assert stats.shared_bytes <= limits.max_shared_memory_per_block
