"""Tensor-core Matmul with 128 x 128 block tiles and a 3- or 4-stage ``cp.async`` pipeline:
the operand tiles in dynamic shared memory (above the 48 KiB of static shared memory), as
many stages as the target's opt-in shared memory holds; equal under the race-checking
emulator at reduced and ragged sizes; ptxas at 4096^3 without spills, rows padded or
XOR-swizzled (shared memory exactly the tiles)."""

from __future__ import annotations

import shutil
from dataclasses import replace

import pytest
from test_gpu_matmul import linear

import tilecraft as tc
from tilecraft.lower import lower_gpu
from tilecraft.lower.gpu_verify import kernel_resources
from tilecraft.rules.gpu import Matmul, MatmulConfig, TensorCoreTile
from tilecraft.rules.gpu._mm_tensor_core import fit_stages
from tilecraft.runtime import build_cuda_source
from tilecraft.runtime.cuda_compile import ptxas_info

SM80 = tc.Target("cuda -arch=sm_80")


def config(target: tc.Target, stages: int, swizzle: bool = False) -> MatmulConfig:
    """128 x 128 x 32 tiles on 2 x 4 warps (64 fp32 accumulators per thread), rows padded
    (or XOR-swizzled)."""
    tile = TensorCoreTile(block_m=128, block_n=128, warps_m=2, warps_n=4, stages=stages,
                          swizzle=swizzle)  # fmt: skip
    return replace(MatmulConfig.for_target(target), tensor_core_tile=tile)


def scheduled(
    func: tc.ir.PrimFunc, target: tc.Target, stages: int, swizzle: bool = False
) -> tuple[tc.Schedule, str]:
    sch = Matmul(config(target, stages, swizzle)).apply(func, target)
    assert isinstance(sch, tc.Schedule), sch
    return sch, build_cuda_source(sch.mod, target).text


def test_stages_are_cut_to_the_shared_memory_that_holds_them() -> None:
    tile = TensorCoreTile(stages=4)
    per_stage = 2 * (128 * 40 + 128 * 40)  # an (n, k) B: rows of block_k, padded
    assert tile.operand_bytes(b_nk=True) == 4 * per_stage
    assert fit_stages(tile, True, 163 * 1024).stages == 4
    assert fit_stages(tile, True, 3 * per_stage + 4096).stages == 3
    assert fit_stages(tile, True, 1024).stages == 2  # two at least (the verifier then refuses)


CASES = [
    pytest.param(3, True, (128, 128, 128), id="3_nk"),
    pytest.param(4, False, (130, 120, 136), id="4_kn_ragged"),
    pytest.param(4, True, (96, 136, 160), id="4_nk_ragged", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("stages", "weight_nk", "shape"), CASES)
def test_128x128_tiles_with_deep_pipelines_equal(
    stages: int, weight_nk: bool, shape: tuple[int, int, int]
) -> None:
    func = linear(*shape, dtype="float16", weight_nk=weight_nk, out_dtype="float32")
    sch, text = scheduled(func, SM80, stages)
    assert text.count("__global__") == 1
    assert "extern __shared__" in text  # the operand tiles: dynamic shared memory
    (kernel,) = lower_gpu(sch.func, SM80).kernels
    tile = config(SM80, stages).tensor_core_tile
    assert kernel_resources(kernel).dyn_shared == tile.operand_bytes(weight_nk)  # S versions
    if shape[0] % 128 == 0 and shape[1] % 128 == 0:  # unpadded: cp.async, S - 1 in flight
        for pending in range(stages):
            assert f"cp.async.wait_group {pending};" in text
        assert f"cp.async.wait_group {stages};" not in text
    tc.testing.check_numeric(sch.func, func, emulate_gpu="racecheck", target=SM80)


def test_symbolic_m_with_four_stages_equal() -> None:
    func = linear(tc.ir.Var("m"), 64, 128, dtype="bfloat16", weight_nk=True, out_dtype="float32")
    sch, _ = scheduled(func, SM80, 4)
    tc.testing.check_numeric(sch.func, func, emulate_gpu="racecheck", target=SM80,
                             shape_vars={"m": 45})  # fmt: skip


# one case per shared layout in the default run, the others under -m slow
PTXAS_CASES = [
    (arch, stages, nk, swizzle) if (arch, stages, nk) == ("sm_80", 4, True) else
    pytest.param(arch, stages, nk, swizzle, marks=pytest.mark.slow)
    for arch in ("sm_80", "sm_90") for stages in (3, 4) for nk in (False, True)
    for swizzle in (False, True)
]  # fmt: skip


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="nvcc/ptxas not on PATH")
@pytest.mark.parametrize(("arch", "stages", "weight_nk", "swizzle"), PTXAS_CASES)
def test_4096_cubed_deep_pipelines_compile_without_spills(
    arch: str, stages: int, weight_nk: bool, swizzle: bool
) -> None:
    target = tc.Target(f"cuda -arch={arch}")
    func = linear(4096, 4096, 4096, dtype="float16", weight_nk=weight_nk, out_dtype="float32")
    sch, text = scheduled(func, target, stages, swizzle)
    (stats,) = ptxas_info(text, arch).values()
    assert not stats.spills, stats
    assert stats.stack_bytes == 0, stats
    assert stats.registers * 256 <= 65536
    (kernel,) = lower_gpu(sch.func, target).kernels
    res = kernel_resources(kernel)
    assert res.dyn_shared == config(target, stages, swizzle).tensor_core_tile.operand_bytes(
        weight_nk
    )
    # exactly the tiles: A 128 x 32, B 128 x 32 ((n, k)) or 32 x 128, rows padded by 8
    # elements, or none when swizzled
    a, b = (128 * 32, 128 * 32) if swizzle else (128 * 40, 128 * 40 if weight_nk else 32 * 136)
    assert res.dyn_shared == stages * 2 * (a + b)
    assert stats.shared_bytes == 8 * 16 * 16 * 4  # the epilogue's staging: 16 x 16 per warp
    limits = target.gpu
    assert limits is not None
    assert stats.shared_bytes + res.dyn_shared <= limits.max_shared_memory_per_block_optin
