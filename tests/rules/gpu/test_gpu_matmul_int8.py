"""GPU Matmul rule on int8 operands accumulated in int32 (a quantized linear layer:
``int32(x[i, k]) * int32(w[j, k])`` and the ``(k, n)`` weight form, dequantized by a scale and a
bias into fp16 in the write-back): ``mma.sync`` m16n8k32 ``.s32.s8.s8.s32`` + ``ldmatrix`` on
int8 rows + ``cp.async`` on sm_80 / sm_90 (a ``(k, n)`` weight transposed into ``(n, k)`` on
its way into shared memory); equal under the race-checking emulator at reduced sizes (ragged ones
padded); ptxas at 4096^3 without spills. int8 WMMA on sm_75 and the SIMT schedule on sm_70:
``test_gpu_matmul_int8_wmma.py``."""

from __future__ import annotations

import pytest

import tilecraft as tc
from tilecraft import te, topi
from tilecraft.ir import PrimFunc
from tilecraft.rules.gpu import Matmul
from tilecraft.runtime import build_cuda_source
from tilecraft.runtime.cuda_compile import ptxas_info

INT8_MMA = "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"


def quantized_linear(
    m: int, n: int, k: int, *, weight_nk: bool = True, dequantize: bool = True
) -> PrimFunc:
    """``x @ w^T`` (``w``: ``(n, k)``, or ``(k, n)`` unless ``weight_nk``) of int8 operands in
    int32, then ``fp16(float32(acc) * scale[j] + bias[j])`` when ``dequantize``."""
    x = te.placeholder((m, k), "int8", name="x")
    w = te.placeholder((n, k) if weight_nk else (k, n), "int8", name="w")
    acc = topi.matmul(x, w, transpose_b=weight_nk, out_dtype="int32")
    if not dequantize:
        return te.create_prim_func([x, w, acc])
    scale = te.placeholder((n,), "float32", name="scale")
    bias = te.placeholder((n,), "float32", name="bias")
    cast = tc.ir.op.cast
    out = te.compute(
        acc.shape,
        lambda i, j: cast(cast(acc[i, j], "float32") * scale[j] + bias[j], "float16"),
        name="dequantize",
    )
    return te.create_prim_func([x, w, scale, bias, out])


def cuda_text(func: PrimFunc, arch: str) -> tuple[tc.Schedule, str]:
    target = tc.Target(f"cuda -arch={arch}")
    sch = Matmul().apply(func, target)
    assert isinstance(sch, tc.Schedule), sch
    return sch, build_cuda_source(sch.mod, target).text


def emulate_equal(func: PrimFunc, arch: str) -> str:
    sch, text = cuda_text(func, arch)
    target = tc.Target(f"cuda -arch={arch}")
    tc.testing.check_numeric(sch.func, func, emulate_gpu="racecheck", target=target)
    return text


SHAPES = [((64, 64, 64), True), ((48, 80, 96), True), ((64, 64, 64), False),
          ((48, 80, 96), False)]  # fmt: skip


@pytest.mark.parametrize("arch", ["sm_80", pytest.param("sm_90", marks=pytest.mark.slow)])
@pytest.mark.parametrize(("shape", "weight_nk"), SHAPES,
                         ids=["nk", "nk_ragged", "kn", "kn_ragged"])  # fmt: skip
def test_int8_on_tensor_cores_equal(shape: tuple[int, int, int], weight_nk: bool,
                                    arch: str) -> None:  # fmt: skip
    text = emulate_equal(quantized_linear(*shape, weight_nk=weight_nk), arch)
    assert INT8_MMA in text
    lines = [line for line in text.splitlines() if "ldmatrix.sync" in line]
    assert lines
    assert not any(".trans" in line for line in lines)  # 8-bit elements: (n, k) in shared
    assert "main_kernel1" not in text  # the dequantizing epilogue fused into the write-back


def test_int8_on_sm90_equal() -> None:
    text = emulate_equal(quantized_linear(64, 64, 64), "sm_90")
    assert INT8_MMA in text


def test_int32_output_without_epilogue_equal() -> None:
    text = emulate_equal(quantized_linear(64, 128, 128, dequantize=False), "sm_80")
    assert INT8_MMA in text
    assert "cp.async.cg.shared.global" in text  # two k steps: the pipeline


def test_mixed_integer_einsum_declines() -> None:
    x = te.placeholder((64, 64), "int8", name="x")
    w = te.placeholder((64, 64), "int32", name="w")
    func = te.create_prim_func([x, w, topi.matmul(topi.cast(x, "int32"), w)])
    got = Matmul().apply(func, tc.Target("cuda -arch=sm_80"))
    assert isinstance(got, tc.rules.Decline)


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("weight_nk", [True, pytest.param(False, marks=pytest.mark.slow)],
                         ids=["nk", "kn"])  # fmt: skip
def test_int8_4096_cubed_compiles_without_spills(weight_nk: bool, arch: str) -> None:
    _, text = cuda_text(quantized_linear(4096, 4096, 4096, weight_nk=weight_nk), arch)
    assert text.count(INT8_MMA) >= 1
    (stats,) = ptxas_info(text, arch).values()
    assert not stats.spills, stats
    assert stats.stack_bytes == 0, stats
    # two stages of 128 x (64 + 16) int8 A and B tiles, one int32 16 x 16 tile per warp (8)
    assert stats.shared_bytes == 2 * 2 * 128 * 80 + 8 * 16 * 16 * 4
