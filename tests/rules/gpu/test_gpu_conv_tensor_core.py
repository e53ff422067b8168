"""GPU Matmul rule on fp16 convolutions: the implicit GEMM normalized to ``C[o, (n h w)] +=
W[o, (c r q)] * X[(n h w), (c r q)]`` on tensor cores (``mma.sync`` + ``ldmatrix`` on sm_80+);
3x3 stride 1 and 2, 1x1, batch 1 and 2, bias + ReLU and a residual add fused into the
write-back; equal under the race-checking emulator at reduced sizes; ptxas at a ResNet-18
``layer1`` size without spills; depthwise convs, fp32 and WMMA targets keep the SIMT schedule,
with the reason."""

from __future__ import annotations

import pytest

import tilecraft as tc
from tilecraft import te, topi
from tilecraft.ir import PrimFunc
from tilecraft.rules.gpu import Matmul
from tilecraft.rules.gpu._mm_conv_tc import is_implicit_gemm, normalize_conv
from tilecraft.rules.gpu._mm_tensor_core import why_not_tensor_core
from tilecraft.runtime import build_cuda_source
from tilecraft.runtime.cuda_compile import ptxas_info
from tilecraft.schedule.analysis import classify_einsum

SM80, SM90, SM75 = (tc.Target(f"cuda -arch={a}") for a in ("sm_80", "sm_90", "sm_75"))


def conv(n: int = 1, c: int = 32, o: int = 32, hw: int = 8, k: int = 3, s: int = 1,
         p: int = 1, *, dtype: str = "float16", bias_relu: bool = True, residual: bool = False,
         groups: int = 1) -> PrimFunc:  # fmt: skip
    """NCHW ``conv2d`` (OIHW weight), then ``+ bias[o]``, ``+ residual``, ReLU as asked."""
    x = te.placeholder((n, c, hw, hw), dtype, name="x")
    w = te.placeholder((o, c // groups, k, k), dtype, name="w")
    y = topi.conv2d(x, w, stride=s, padding=p, groups=groups)
    args = [x, w]
    if bias_relu:
        b = te.placeholder((o,), dtype, name="bias")
        y = te.compute(y.shape, lambda n_, a, h, w_: y[n_, a, h, w_] + b[a], name="add_bias")
        args.append(b)
    if residual:
        r = te.placeholder(tuple(y.shape), dtype, name="res")
        y = te.compute(y.shape, lambda *i: y[i] + r[i], name="add_res")
        args.append(r)
    if bias_relu:
        zero = tc.ir.const(0.0, dtype)
        y = te.compute(y.shape, lambda *i: tc.ir.op.max(y[i], zero), name="relu")
    return te.create_prim_func([*args, y])


def schedule(func: PrimFunc, target: tc.Target) -> tc.Schedule:
    sch = Matmul().apply(func, target)
    assert isinstance(sch, tc.Schedule), sch
    return sch


def on_tensor_cores(sch: tc.Schedule) -> bool:
    return any(inst.kind == "tensorize" for inst in sch.trace.insts)


CASES = {
    "3x3_s1": {"k": 3, "s": 1, "p": 1},
    "3x3_s2": {"k": 3, "s": 2, "p": 1},  # 4x4 outputs: (n h w) padded to the tile
    "1x1": {"k": 1, "s": 1, "p": 0, "bias_relu": False},  # the output written directly
}


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("case", list(CASES))
def test_conv_on_tensor_cores_equal(case: str, batch: int) -> None:
    func = conv(batch, **CASES[case])  # type: ignore[arg-type]
    sch = schedule(func, SM80)
    assert on_tensor_cores(sch)
    text = build_cuda_source(sch.mod, SM80).text
    assert "mma.sync.aligned.m16n8k16" in text
    assert "ldmatrix.sync.aligned" in text
    # the weight, read w[o, k // 9, k % 9 // 3, k % 3], is contiguous along k: 16-byte
    # cp.async; the im2col gather is not: guarded scalar loads (1x1: k = 32 is one k step,
    # no pipeline, so no cp.async)
    assert ("cp.async.cg.shared.global" in text) == (case != "1x1")
    tc.testing.check_numeric(sch.func, func, emulate_gpu="racecheck", target=SM80)


@pytest.mark.parametrize("residual", [False, True], ids=["bias_relu", "residual"])
def test_conv_epilogue_fused_on_sm90_equal(residual: bool) -> None:
    # bias, residual add and ReLU fused into the write-back: one kernel
    func = conv(2, residual=residual)
    sch = schedule(func, SM90)
    assert on_tensor_cores(sch)
    src = build_cuda_source(sch.mod, SM90)
    assert sum(len(p.kernels) for p in src.programs.values()) == 1
    assert "mma.sync.aligned.m16n8k16" in src.text
    tc.testing.check_numeric(sch.func, func, emulate_gpu="racecheck", target=SM90)


def test_conv_normalized_to_one_i_j_k() -> None:
    # fails before the change: the conv took the SIMT schedule (three reduction iterators)
    sch = tc.Schedule(conv(2))
    assert is_implicit_gemm(sch, "conv2d")
    assert normalize_conv(sch, "conv2d") is None
    block = sch.get(sch.get_block("conv2d"))
    einsum = classify_einsum(block)
    assert einsum is not None
    assert [int(iv.dom.extent.value) for iv in block.iter_vars] == [32, 128, 288]
    assert einsum.lhs.buffer.shape[-1].value == 288  # the weight, (o, k)
    assert why_not_tensor_core(sch.func, sch.get_block("conv2d"), sch, "mma") is None


def test_depthwise_conv_declines_with_reason() -> None:
    func = conv(1, 32, 32, groups=32)
    sch = tc.Schedule(func)
    why = normalize_conv(sch, "conv2d")
    assert why is not None
    assert "depthwise" in why.reason
    got = Matmul().apply(func, SM80)  # a GEMV per channel once staged: left to GEMV rules
    assert not isinstance(got, tc.Schedule) or not on_tensor_cores(got)


def test_fp32_conv_keeps_simt_with_reason() -> None:
    func = conv(1, dtype="float32")
    sch = tc.Schedule(func)
    assert normalize_conv(sch, "conv2d") is None
    why = why_not_tensor_core(sch.func, sch.get_block("conv2d"), sch, "mma")
    assert why is not None
    assert "float32" in why
    assert not on_tensor_cores(schedule(func, SM80))


def test_wmma_target_keeps_simt_for_fp16_accumulation_equal() -> None:
    # topi.conv2d accumulates fp16 in fp16: mma only; sm_75 keeps the SIMT schedule
    func = conv(1)
    sch = tc.Schedule(func)
    assert normalize_conv(sch, "conv2d") is None
    why = why_not_tensor_core(sch.func, sch.get_block("conv2d"), sch, "wmma")
    assert why is not None
    assert "accumulator" in why
    simt = schedule(func, SM75)
    assert not on_tensor_cores(simt)
    tc.testing.check_numeric(simt.func, func, emulate_gpu="racecheck", target=SM75)


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_resnet_layer1_conv_compiles_without_spills(arch: str) -> None:
    # 64 -> 64 channels, 56x56, 3x3, bias + residual + ReLU: one kernel; ptxas reports
    # 80 registers (sm_80) / 72 (sm_90), 22528 shared bytes, 128 threads
    target = tc.Target(f"cuda -arch={arch}")
    sch = schedule(conv(1, 64, 64, 56, residual=True), target)
    assert on_tensor_cores(sch)
    src = build_cuda_source(sch.mod, target)
    info = ptxas_info(src.text, arch)
    kernels = [k for p in src.programs.values() for k in p.kernels]
    assert len(kernels) == 1
    stats = info[kernels[0].name]
    assert not stats.spills, stats
    assert stats.stack_bytes == 0, stats
    assert 0 < stats.registers <= 128, stats
    assert stats.shared_bytes <= 48 * 1024, stats
