"""GPU Matmul rule on int8 operands accumulated in int32 where WMMA is the tensor-core path:
int8 WMMA 16x16x16 (``signed char`` fragments, an ``int`` accumulator) on sm_75 for the
quantized linear layer with either weight layout (an ``(n, k)`` weight into a ``col_major``
``matrix_b``, a ``(k, n)`` one into a ``row_major`` one), the shared tiles in 16-column planes
(32-byte aligned tiles), the dequantizing epilogue fused into the write-back; exactly equal
under the race-checking emulator at reduced sizes (ragged ones padded); ptxas at 4096^3 for
sm_75 without spills. sm_70 has no int8 WMMA: the SIMT schedule, with the reason."""

from __future__ import annotations

import pytest
from test_gpu_matmul_int8 import cuda_text, emulate_equal, quantized_linear

import tilecraft as tc
from tilecraft.ir import Var
from tilecraft.rules.gpu import MatmulConfig
from tilecraft.rules.gpu._mm_tensor_core import why_not_tensor_core
from tilecraft.runtime.cuda_compile import ptxas_info

FRAGMENT = "nvcuda::wmma::fragment<nvcuda::wmma::{}, 16, 16, 16, {}"
SHAPES = [((64, 64, 64), True), ((48, 80, 96), True), ((64, 64, 64), False),
          ((48, 80, 96), False)]  # fmt: skip


def assert_int8_wmma(text: str, weight_nk: bool) -> None:
    """``text`` multiplies int8 WMMA fragments into int32 ones, no mma.sync, no ldmatrix."""
    assert FRAGMENT.format("matrix_a", "signed char, nvcuda::wmma::row_major") in text
    layout = "col_major" if weight_nk else "row_major"
    assert FRAGMENT.format("matrix_b", f"signed char, nvcuda::wmma::{layout}") in text
    assert FRAGMENT.format("accumulator", "int>") in text
    assert "nvcuda::wmma::mma_sync(" in text
    assert "mma.sync" not in text
    assert "ldmatrix" not in text


@pytest.mark.parametrize(("shape", "weight_nk"), SHAPES,
                         ids=["nk", "nk_ragged", "kn", "kn_ragged"])  # fmt: skip
def test_int8_on_wmma_equal(shape: tuple[int, int, int], weight_nk: bool) -> None:
    text = emulate_equal(quantized_linear(*shape, weight_nk=weight_nk), "sm_75")
    assert_int8_wmma(text, weight_nk)
    assert "main_kernel1" not in text  # the dequantizing epilogue fused into the write-back


def test_int8_on_wmma_symbolic_rows_equal() -> None:
    # a prefill's symbolic sequence length: padded to whole tiles, guarded copy-back
    func = quantized_linear(Var("m"), 80, 96)  # type: ignore[arg-type]
    target = tc.Target("cuda -arch=sm_75")
    sch, text = cuda_text(func, "sm_75")
    assert_int8_wmma(text, True)
    tc.testing.check_numeric(sch.func, func, emulate_gpu="racecheck", target=target,
                             shape_vars={"m": 37})  # fmt: skip


def test_int32_output_on_wmma_equal() -> None:
    text = emulate_equal(quantized_linear(64, 128, 128, dequantize=False), "sm_75")
    assert_int8_wmma(text, True)
    assert "nvcuda::wmma::store_matrix_sync(" in text  # int32 tiles stored to the output


def test_int8_tiles_are_32_byte_aligned_planes() -> None:
    # a row of 64 int8 holds four 16 x 16 tiles: kept in planes of 16 columns (ldm 16), each
    # plane 128 x 16 + 32 bytes (stride 32 mod 128: the fetch's stores hit distinct banks)
    _, text = cuda_text(quantized_linear(256, 256, 256), "sm_75")
    loads = [line for line in text.splitlines() if "load_matrix_sync(" in line]
    assert loads
    assert all(line.rstrip().endswith(", 16);") for line in loads), loads
    assert any("* 2080)" in line for line in loads), loads


@pytest.mark.parametrize(("arch", "expected"), [("sm_70", False), ("sm_75", True),
                                                ("sm_80", True)])  # fmt: skip
def test_int8_wmma_is_a_target_fact(arch: str, expected: bool) -> None:
    assert MatmulConfig.for_target(tc.Target(f"cuda -arch={arch}")).int8_wmma is expected


def test_int8_on_sm70_takes_simt_with_reason() -> None:
    func = quantized_linear(48, 80, 96)
    text = emulate_equal(func, "sm_70")
    assert "wmma" not in text
    assert "mma" not in text
    sch = tc.Schedule(func)
    why = why_not_tensor_core(sch.func, sch.get_block("matmul"), sch, "wmma")
    assert why is not None
    assert "int8 WMMA needs sm_72+" in why


@pytest.mark.nvcc
@pytest.mark.parametrize("weight_nk", [True, pytest.param(False, marks=pytest.mark.slow)],
                         ids=["nk", "kn"])  # fmt: skip
def test_int8_wmma_4096_cubed_compiles_without_spills(weight_nk: bool) -> None:
    _, text = cuda_text(quantized_linear(4096, 4096, 4096, weight_nk=weight_nk), "sm_75")
    assert_int8_wmma(text, weight_nk)
    (stats,) = ptxas_info(text, "sm_75").values()
    assert not stats.spills, stats
    assert stats.stack_bytes == 0, stats
    assert stats.registers * 256 <= 65536, stats  # 8 warps of 32 x 64
    # two stages of A (128 x 64: four planes of 128 x 16 + 32 bytes) and B ((n, k): the same;
    # (k, n): eight planes of 64 x 16 + 32), one int32 16 x 16 staging tile per warp (8)
    b = 4 * (128 * 16 + 32) if weight_nk else 8 * (64 * 16 + 32)
    assert stats.shared_bytes == 2 * (4 * (128 * 16 + 32) + b) + 8 * 16 * 16 * 4
