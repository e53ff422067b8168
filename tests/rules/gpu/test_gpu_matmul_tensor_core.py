"""GPU Matmul rule on tensor cores: fp16/bf16 operands accumulated in fp32, ``mma.sync`` +
``ldmatrix`` + ``cp.async`` on sm_80+, WMMA on sm_75; both weight layouts, batched, ragged
shapes and a symbolic M padded; the epilogue (fp16 cast, bias, ReLU / SiLU, the padded
copy-back) fused into the write-back, one kernel; equal under the race-checking emulator at
reduced sizes; ptxas at 4096^3 without spills; the SIMT schedule for a symbolic K."""

from __future__ import annotations

import shutil

import pytest
from test_gpu_matmul import linear

import tilecraft as tc
from tilecraft import te, topi
from tilecraft.ir import PrimFunc, Var
from tilecraft.rules.gpu import Matmul, MatmulConfig
from tilecraft.runtime import build_cuda_source
from tilecraft.runtime.cuda_compile import ptxas_info

SM80, SM75 = tc.Target("cuda -arch=sm_80"), tc.Target("cuda -arch=sm_75")


def cuda_text(func: PrimFunc, target: tc.Target) -> tuple[tc.Schedule, str]:
    sch = Matmul().apply(func, target)
    assert isinstance(sch, tc.Schedule), sch
    return sch, build_cuda_source(sch.mod, target).text


def emulate_equal(func: PrimFunc, target: tc.Target) -> str:
    sch, text = cuda_text(func, target)
    tc.testing.check_numeric(sch.func, func, emulate_gpu="racecheck", target=target)
    return text


@pytest.mark.parametrize("weight_nk", [False, True], ids=["weight_kn", "weight_nk"])
@pytest.mark.parametrize("target", [SM80, SM75], ids=["mma", "wmma"])
def test_both_weight_layouts_on_tensor_cores_equal(weight_nk: bool, target: tc.Target) -> None:
    func = linear(64, 64, 64, dtype="float16", weight_nk=weight_nk, out_dtype="float32")
    text = emulate_equal(func, target)
    if target is SM80:
        assert "mma.sync.aligned.m16n8k16" in text
        assert "ldmatrix.sync.aligned" in text
        assert "cp.async" in text
    else:
        assert "nvcuda::wmma::mma_sync(" in text


def ldmatrix_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "ldmatrix.sync" in line]


@pytest.mark.parametrize("weight_nk", [False, True], ids=["weight_kn", "weight_nk"])
def test_b_fragments_load_two_tiles_per_ldmatrix_x4(weight_nk: bool) -> None:
    # an (n, k) weight stays (n, k) in shared memory (16-byte cp.async fetch, no transpose)
    # and loads with ldmatrix without .trans; a (k, n) one with .trans; B's two n8 tiles per
    # 16 columns in one ldmatrix.x4
    text = emulate_equal(linear(64, 64, 64, dtype="float16", weight_nk=weight_nk,
                                out_dtype="float32"), SM80)  # fmt: skip
    lines = ldmatrix_lines(text)
    assert lines
    assert all(".x4." in line for line in lines)
    assert any(".trans" in line for line in lines) != weight_nk
    assert text.count("cp.async.cg.shared.global") == 4  # A and B, prologue and steady state


@pytest.mark.parametrize("m", [50, Var("m")], ids=["ragged", "symbolic_m"])
def test_nk_weight_without_transpose_padded_equal(m: int | Var) -> None:
    func = linear(m, 70, 40, dtype="bfloat16", weight_nk=True, out_dtype="float32")
    sch, text = cuda_text(func, SM80)
    assert not any(".trans" in line for line in ldmatrix_lines(text))
    shape_vars = {"m": 23} if isinstance(m, Var) else None
    tc.testing.check_numeric(sch.func, func, emulate_gpu="racecheck", target=SM80,
                             shape_vars=shape_vars)  # fmt: skip


FP16_ACC = [(False, 64, False), (True, 50, False), (True, 64, True)]


@pytest.mark.parametrize(("weight_nk", "m", "relu"), FP16_ACC, ids=["kn", "nk_ragged", "relu"])
def test_fp16_accumulation_on_mma_equal(weight_nk: bool, m: int, relu: bool) -> None:
    # a function accumulating in fp16 keeps fp16 accumulators (mma .f16.f16.f16.f16), fp16
    # fragment stores and an fp16 staged epilogue
    func = linear(m, 64, 48, dtype="float16", weight_nk=weight_nk, relu=relu)
    text = emulate_equal(func, SM80)
    assert "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16" in text
    assert ".f32" not in text


def test_fp16_accumulation_stays_simt_on_wmma() -> None:
    _, text = cuda_text(linear(64, 64, 64, dtype="float16"), SM75)
    assert "wmma" not in text


def test_batched_and_bf16_on_mma_equal() -> None:
    text = emulate_equal(linear(32, 32, 32, dtype="bfloat16", batch=2, out_dtype="float32"), SM80)
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in text


@pytest.mark.parametrize("target", [SM80, SM75], ids=["mma", "wmma"])
def test_ragged_shapes_padded_to_whole_tiles_equal(target: tc.Target) -> None:
    # zero-filled (scalar) loads into shared memory; the copy-back and the cast fused into
    # the GEMM's write-back
    func = linear(50, 70, 40, dtype="float16", weight_nk=True, out_dtype="float32")
    text = emulate_equal(func, target)
    assert ("mma.sync" in text) == (target is SM80)
    assert text.count("__global__") == 1


@pytest.mark.parametrize("target", [SM80, SM75], ids=["mma", "wmma"])
def test_symbolic_m_on_tensor_cores_equal(target: tc.Target) -> None:
    # a prefill projection: the sequence length symbolic, padded to whole 128-row tiles
    func = linear(Var("m"), 64, 64, dtype="float16", weight_nk=True, out_dtype="float32")
    sch, text = cuda_text(func, target)
    assert ("mma.sync" in text) == (target is SM80)
    tc.testing.check_numeric(sch.func, func, emulate_gpu="racecheck", target=target,
                             shape_vars={"m": 37})  # fmt: skip


def test_padded_operands_fetched_with_zero_filling_cp_async_equal() -> None:
    # a prefill projection's rows past the sequence length are zero-filled by the 16-byte
    # cp.async itself (source size 0), not by scalar guarded loads
    func = linear(Var("m"), 64, 64, dtype="float16", weight_nk=True, out_dtype="float32")
    sch, text = cuda_text(func, SM80)
    assert "cp.async.cg.shared.global [%0], [%1], 16, %2;" in text
    tc.testing.check_numeric(sch.func, func, emulate_gpu="racecheck", target=SM80,
                             shape_vars={"m": 19})  # fmt: skip


def test_symbolic_reduction_and_disabled_tensor_cores_get_the_simt_schedule() -> None:
    _, text = cuda_text(linear(64, 64, Var("k"), dtype="float16", out_dtype="float32"), SM80)
    assert "mma.sync" not in text
    simt = Matmul(MatmulConfig(tensor_cores=""))
    sch = simt.apply(linear(64, 64, 64, dtype="float16", out_dtype="float32"), SM80)
    assert isinstance(sch, tc.Schedule)
    assert "mma" not in build_cuda_source(sch.mod, SM80).text


def linear_bias_act(m: int | Var, n: int, k: int, act: str, weight_nk: bool) -> PrimFunc:
    """``act(fp16(A @ B) + bias)``: fp16 operands, fp32 accumulation, an fp16 output."""
    a = te.placeholder((m, k), "float16", name="A")
    b = te.placeholder((n, k) if weight_nk else (k, n), "float16", name="B")
    bias = te.placeholder((n,), "float16", name="bias")
    c = topi.matmul(a, b, transpose_b=weight_nk, out_dtype="float32")
    d = te.compute(c.shape, lambda i, j: tc.ir.op.cast(c[i, j], "float16") + bias[j], name="d")
    return te.create_prim_func([a, b, bias, getattr(topi, act)(d)])


EPILOGUES = [("relu", False, 64), ("silu", True, 64), ("silu", False, 50)]


@pytest.mark.parametrize(("act", "weight_nk", "m"), EPILOGUES, ids=["relu", "silu_nk", "ragged"])
@pytest.mark.parametrize("target", [SM80, SM75], ids=["mma", "wmma"])
def test_bias_and_activation_fused_into_the_write_back_equal(
    act: str, weight_nk: bool, m: int, target: tc.Target
) -> None:
    func = linear_bias_act(m, 64, 32, act, weight_nk)
    text = emulate_equal(func, target)
    assert text.count("__global__") == 1  # the epilogue in the GEMM's write-back
    assert ("mma.sync" in text) == (target is SM80)
    assert ("wmma::store_matrix_sync" in text) == (target is SM75)


@pytest.mark.parametrize("target", [SM80, SM75], ids=["mma", "wmma"])
def test_epilogue_writes_the_output_in_16_byte_vectors_equal(target: tc.Target) -> None:
    # each warp stages a 16 x 16 fp32 tile; each thread reads 8 staged values (two 16-byte
    # shared loads), 8 bias values (one), and writes 8 fp16 outputs with one 16-byte store
    text = emulate_equal(linear_bias_act(64, 128, 32, "silu", False), target)
    stores = [line for line in text.splitlines() if "T_silu" in line and "=" in line]
    assert stores
    assert all(line.strip().startswith("*(uint4*)(T_silu + ") for line in stores)
    assert "uint4 tc_vec0[2] = {};" in text  # eight fp32 staged lanes: two 128-bit loads


@pytest.mark.parametrize("target", [SM80, SM75], ids=["mma", "wmma"])
def test_symbolic_m_with_an_epilogue_is_one_kernel_equal(target: tc.Target) -> None:
    func = linear_bias_act(Var("m"), 64, 32, "relu", True)
    sch, text = cuda_text(func, target)
    assert text.count("__global__") == 1
    tc.testing.check_numeric(sch.func, func, emulate_gpu="racecheck", target=target,
                             shape_vars={"m": 21})  # fmt: skip


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="nvcc/ptxas not on PATH")
@pytest.mark.parametrize("arch", ["sm_80", pytest.param("sm_90", marks=pytest.mark.slow)])
@pytest.mark.parametrize("m", [4096, Var("m")], ids=["4096", "symbolic_m"])
def test_fused_epilogue_compiles_without_spills(arch: str, m: int | Var) -> None:
    target = tc.Target(f"cuda -arch={arch}")
    _, text = cuda_text(linear_bias_act(m, 4096, 4096, "silu", True), target)
    info = ptxas_info(text, arch)
    assert len(info) == 1
    for stats in info.values():
        assert not stats.spills, stats
        assert stats.stack_bytes == 0, stats


# one layout and arch in the default run, the other five under -m slow
CASES = [
    (nk, arch) if (nk, arch) == (True, "sm_80") else pytest.param(nk, arch, marks=pytest.mark.slow)
    for nk in (False, True)
    for arch in ("sm_75", "sm_80", "sm_90")
]


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="nvcc/ptxas not on PATH")
@pytest.mark.parametrize("arch", ["sm_80", pytest.param("sm_90", marks=pytest.mark.slow)])
@pytest.mark.parametrize("m", [1000, Var("m")], ids=["ragged", "symbolic_m"])
def test_padded_gemm_compiles_without_spills(arch: str, m: int | Var) -> None:
    target = tc.Target(f"cuda -arch={arch}")
    func = linear(m, 1000, 4096, dtype="float16", weight_nk=True, out_dtype="float32")
    _, text = cuda_text(func, target)
    info = ptxas_info(text, arch)
    assert len(info) == 1  # the GEMM, the copy-back and the cast fused into its write-back
    for stats in info.values():
        assert not stats.spills, stats
        assert stats.stack_bytes == 0, stats


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="nvcc/ptxas not on PATH")
@pytest.mark.parametrize("arch", ["sm_80", pytest.param("sm_90", marks=pytest.mark.slow)])
def test_fp16_accumulation_compiles_without_spills(arch: str) -> None:
    func = linear(4096, 4096, 4096, dtype="float16", weight_nk=True, relu=True)
    _, text = cuda_text(func, tc.Target(f"cuda -arch={arch}"))
    (stats,) = ptxas_info(text, arch).values()
    assert not stats.spills, stats
    assert stats.stack_bytes == 0, stats
    assert "f16.f16.f16.f16" in text


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="nvcc/ptxas not on PATH")
@pytest.mark.parametrize(("weight_nk", "arch"), CASES)
def test_4096_cubed_compiles_without_spills(weight_nk: bool, arch: str) -> None:
    target = tc.Target(f"cuda -arch={arch}")
    func = linear(4096, 4096, 4096, dtype="float16", weight_nk=weight_nk, out_dtype="float32")
    _, text = cuda_text(func, target)
    info = ptxas_info(text, arch)
    limits = target.gpu
    assert limits is not None
    for stats in info.values():
        assert not stats.spills, stats
        assert stats.stack_bytes == 0, stats
        assert stats.registers * 128 <= limits.registers_per_block
    # one kernel (the fp16 cast fused into the write-back): two stages of a 128 x 32 A
    # tile and a 32 x 128 B tile (an (n, k) B: 128 x 32, untransposed), and
    # one fp32 16 x 16 tile per warp (4 warps; two mma fragment tiles, one WMMA) staging the
    # epilogue
    assert len(info) == 1
    frag = 16 * 16 * 4
    # (sm_80/90: swizzled, unpadded tiles; sm_75: rows padded by 8 elements)
    pad = 8 if arch == "sm_75" else 0
    b_tile = 128 * (32 + pad) if weight_nk else 32 * (128 + pad)
    a_tile = 128 * (32 + pad)
    assert max(s.shared_bytes for s in info.values()) == 2 * (a_tile + b_tile) * 2 + 4 * frag
    assert ("mma.sync" in text) == (arch != "sm_75")
