"""Tensor-core Matmul with XOR-swizzled shared operand tiles (``TensorCoreTile.swizzle``, the
default on the ``mma`` presets): the layout's bank groups (``ldmatrix`` rows and 16-byte
stores conflict-free), the ``storage_swizzle`` primitive and its lowering, equal under the
race-checking emulator (both B layouts, fp16 and bf16, ragged, batched, 2-4 stages, sm_80 and
sm_90); ptxas at 4096^3 (shared memory exactly the unpadded tiles):
``test_gpu_matmul_tensor_core_stages.py``, for both layouts."""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_gpu_matmul import linear

import tilecraft as tc
from tilecraft.arith.evaluate import evaluate
from tilecraft.errors import LowerError, ScheduleError
from tilecraft.ir import PrimFunc, Var
from tilecraft.lower import lower_gpu
from tilecraft.lower.gpu_verify import kernel_resources
from tilecraft.lower.swizzle_layout import swizzle_supported, swizzled_chunk, swizzled_column
from tilecraft.rules.gpu import Matmul, MatmulConfig, TensorCoreTile
from tilecraft.runtime import build_cuda_source
from tilecraft.script import parse

SM80, SM90 = tc.Target("cuda -arch=sm_80"), tc.Target("cuda -arch=sm_90")


# the layout's banks ---------------------------------------------------------------------------
def bank_group(row: int, chunk: int, chunks: int, swizzle: bool = True) -> int:
    """The 16-byte bank group (of 8 in 128 bytes) holding logical ``chunk`` of ``row``."""
    stored = swizzled_chunk(row, chunk, chunks) if swizzle else chunk
    return (row * chunks + stored) % 8


@pytest.mark.parametrize("chunks", [2, 4, 8, 16])  # rows of 32, 64, 128, 256 bytes
def test_ldmatrix_rows_and_16_byte_stores_hit_distinct_bank_groups(chunks: int) -> None:
    for r0 in range(0, 64, 8):
        for c in range(chunks):  # one 8 x 8 matrix: logical chunk c of 8 consecutive rows
            assert len({bank_group(r0 + r, c, chunks) for r in range(8)}) == 8
    for t0 in range(0, 64 * chunks, 8):  # 8 threads storing 16 consecutive bytes each
        groups = {bank_group(t // chunks, t % chunks, chunks) for t in range(t0, t0 + 8)}
        assert len(groups) == 8
    # unswizzled and unpadded, an ldmatrix read of rows of 64+ bytes would conflict
    if chunks >= 4:
        assert len({bank_group(r, 0, chunks, swizzle=False) for r in range(8)}) < 8


@pytest.mark.parametrize(("cols", "bits"), [(16, 16), (32, 16), (64, 16), (128, 16), (32, 32)])
def test_swizzled_column_expression_matches_the_xor(cols: int, bits: int) -> None:
    chunk = 128 // bits
    r, c = Var("r"), Var("c")
    expr = swizzled_column(r, c, cols, bits)
    for row in range(24):
        stored = sorted(evaluate(expr, {r: row, c: col}) for col in range(cols))
        assert stored == list(range(cols))  # a permutation of the row
        for col in range(cols):
            want = swizzled_chunk(row, col // chunk, cols // chunk) * chunk + col % chunk
            assert evaluate(expr, {r: row, c: col}) == want


def test_swizzle_needs_power_of_two_chunks() -> None:
    assert swizzle_supported(32, 16)
    assert swizzle_supported(8, 16)
    assert not swizzle_supported(40, 16)  # a padded row: 5 chunks
    assert not swizzle_supported(12, 16)  # 24 bytes


# the primitive ---------------------------------------------------------------------------
COPY = """\
@T.prim_func
def main(A: T.Buffer((16, 32), "float32"), B: T.Buffer((16, 32), "float32")):
    with T.block("root"):
        S = T.alloc_buffer((16, 32), "float32", scope="shared")
        for i, j in T.grid(16, 32):
            with T.block("S"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(A[vi, vj])
                T.writes(S[vi, vj])
                S[vi, vj] = A[vi, vj] + T.float32(1.0)
        for i, j in T.grid(16, 32):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(S[vi, vj])
                T.writes(B[vi, vj])
                B[vi, vj] = S[vi, vj]
"""


def test_storage_swizzle_annotates_and_lowers_to_a_permuted_row() -> None:
    func = parse(COPY)
    assert isinstance(func, PrimFunc)
    sch = tc.Schedule(func)
    sch.storage_swizzle(sch.get_block("S"), 0)
    assert sch.get(sch.get_block("S")).annotations["buffer_swizzle"] == (0,)
    tc.testing.verify_trace_roundtrip(sch, func)
    tc.testing.check_numeric(func, sch.func)
    with pytest.raises(ScheduleError, match="storage_swizzle"):
        sch.storage_swizzle(sch.get_block("B"), 0)  # B is a parameter


def test_flatten_refuses_rows_that_are_not_whole_chunks() -> None:
    func = parse(COPY.replace("(16, 32)", "(16, 20)").replace("grid(16, 32)", "grid(16, 20)"))
    assert isinstance(func, PrimFunc)
    sch = tc.Schedule(func)
    sch.storage_swizzle(sch.get_block("S"), 0)
    with pytest.raises(LowerError, match="cannot be swizzled"):
        tc.build(sch.func, tc.Target("cpu"))


# the rule ---------------------------------------------------------------------------------
def config(
    target: tc.Target, swizzle: bool = True, stages: int = 2, big: bool = False
) -> MatmulConfig:
    cfg = MatmulConfig.for_target(target)
    tile = replace(cfg.tensor_core_tile, swizzle=swizzle, stages=stages)
    if big:  # 128 x 128 x 32 tiles on 2 x 4 warps, as test_gpu_matmul_tensor_core_stages
        tile = replace(tile, block_m=128, block_n=128, warps_m=2, warps_n=4)
    return replace(cfg, tensor_core_tile=tile)


def scheduled(func: PrimFunc, target: tc.Target, cfg: MatmulConfig) -> tuple[tc.Schedule, str]:
    sch = Matmul(cfg).apply(func, target)
    assert isinstance(sch, tc.Schedule), sch
    return sch, build_cuda_source(sch.mod, target).text


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_89", "sm_90"])
def test_mma_presets_swizzle_and_wmma_presets_pad(arch: str) -> None:
    assert MatmulConfig.for_target(tc.Target(f"cuda -arch={arch}")).tensor_core_tile.swizzle
    assert not MatmulConfig.for_target(tc.Target("cuda -arch=sm_75")).tensor_core_tile.swizzle


def test_swizzled_tiles_take_no_padding() -> None:
    padded, swizzled = TensorCoreTile(stages=4), TensorCoreTile(stages=4, swizzle=True)
    assert swizzled.operand_bytes(b_nk=True) == 4 * 2 * (128 * 32 + 128 * 32)
    assert swizzled.operand_bytes(b_nk=False) == 4 * 2 * (128 * 32 + 32 * 128)
    assert padded.operand_bytes(b_nk=True) == 4 * 2 * (128 * 40 + 128 * 40)


def operand_shared(sch: tc.Schedule, target: tc.Target) -> int:
    (kernel,) = lower_gpu(sch.func, target).kernels
    res = kernel_resources(kernel)
    return res.static_shared + (res.dyn_shared or 0)


SWIZZLED_CASES = [
    pytest.param((64, 64, 64), "float16", False, None, SM80, id="64_kn_f16"),
    pytest.param((64, 64, 64), "float16", True, None, SM80, id="64_nk_f16"),
    pytest.param((64, 64, 64), "bfloat16", True, None, SM90, id="64_nk_bf16_sm90"),
    pytest.param((48, 80, 40), "float16", True, None, SM80, id="ragged_nk"),
    pytest.param((48, 80, 40), "bfloat16", False, None, SM90, id="ragged_kn_bf16_sm90"),
    pytest.param((32, 64, 64), "float16", False, 2, SM80, id="batched_kn"),
]


@pytest.mark.parametrize(("shape", "dtype", "weight_nk", "batch", "target"), SWIZZLED_CASES)
def test_swizzled_schedules_equal(
    shape: tuple[int, int, int], dtype: str, weight_nk: bool, batch: int | None,
    target: tc.Target,
) -> None:  # fmt: skip
    func = linear(*shape, dtype=dtype, weight_nk=weight_nk, batch=batch, out_dtype="float32")
    sch, text = scheduled(func, target, MatmulConfig.for_target(target))
    assert "ldmatrix.sync" in text
    assert "mma.sync" in text
    tc.testing.check_numeric(sch.func, func, emulate_gpu="racecheck", target=target)


@pytest.mark.parametrize("weight_nk", [False, True], ids=["kn", "nk"])
def test_swizzled_shared_memory_is_the_unpadded_tiles(weight_nk: bool) -> None:
    func = linear(64, 64, 64, dtype="float16", weight_nk=weight_nk, out_dtype="float32")
    staging = 4 * 16 * 16 * 4  # the epilogue's fp32 16 x 16 tile per warp (2 x 2 warps)
    tiles = 2 * 2 * (64 * 32 + 64 * 32)  # two stages of the 64 x 32 A and B tiles
    swz, _ = scheduled(func, SM80, config(SM80, swizzle=True))
    pad, _ = scheduled(func, SM80, config(SM80, swizzle=False))
    assert operand_shared(swz, SM80) == tiles + staging
    assert operand_shared(pad, SM80) > tiles + staging  # padding stays available


DEEP_CASES = [
    pytest.param(3, True, (128, 128, 128), SM80, id="3_nk_sm80"),
    pytest.param(4, False, (128, 128, 128), SM90, id="4_kn_sm90"),
    pytest.param(4, True, (130, 120, 136), SM80, id="4_nk_ragged", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("stages", "weight_nk", "shape", "target"), DEEP_CASES)
def test_swizzled_deep_pipelines_equal(
    stages: int, weight_nk: bool, shape: tuple[int, int, int], target: tc.Target
) -> None:
    func = linear(*shape, dtype="float16", weight_nk=weight_nk, out_dtype="float32")
    cfg = config(target, stages=stages, big=True)
    sch, _ = scheduled(func, target, cfg)
    (kernel,) = lower_gpu(sch.func, target).kernels
    res = kernel_resources(kernel)
    dyn = cfg.tensor_core_tile.operand_bytes(weight_nk)
    assert dyn == stages * 2 * (128 * 32 + 128 * 32)
    assert (res.dyn_shared or 0) + res.static_shared == dyn + 8 * 16 * 16 * 4
    tc.testing.check_numeric(sch.func, func, emulate_gpu="racecheck", target=target)
