"""GPU Matmul rule: matmul, linear with either weight layout, batched, symbolic M, padding,
fused producers and epilogues; equal to the unscheduled function under the race-checking
emulator at reduced sizes; ptxas for sm_80 and sm_90 without spills at full size; declines."""

from __future__ import annotations

import shutil

import pytest

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft.ir import PrimFunc, Var
from tilecraft.lower.gpu_pipeline import lower_gpu
from tilecraft.rules.gpu import Matmul, MatmulConfig
from tilecraft.runtime import build_cuda_source
from tilecraft.runtime.cuda_compile import ptxas_info
from tilecraft.schedule.testing_utils import verify_trace_roundtrip

SM80 = tc.Target("cuda -arch=sm_80")
te, topi = tc.te, tc.topi


def linear(m: int | Var, n: int, k: int, *, dtype: str = "float32", weight_nk: bool = False,
           batch: int | Var | None = None, relu: bool = False,
           out_dtype: str | None = None) -> PrimFunc:  # fmt: skip
    """``A @ B`` (``B``: ``(k, n)``, or ``(n, k)`` read transposed when ``weight_nk``), optionally
    batched, accumulated in ``out_dtype`` and cast back, with a ReLU epilogue."""
    lead = () if batch is None else (batch,)
    a = te.placeholder((*lead, m, k), dtype, name="A")
    b = te.placeholder((*lead, *((n, k) if weight_nk else (k, n))), dtype, name="B")
    c = topi.matmul(a, b, transpose_b=weight_nk, out_dtype=out_dtype)
    if out_dtype is not None:
        c = te.compute(c.shape, lambda *i: tc.ir.op.cast(c[i], dtype), name="cast")
    if relu:
        zero = tc.ir.const(0.0, dtype)
        c = te.compute(c.shape, lambda *i: tc.ir.op.max(c[i], zero), name="relu")
    return te.create_prim_func([a, b, c])


SIMT = Matmul(MatmulConfig(tensor_cores=""))


def scheduled(func: PrimFunc, target: tc.Target = SM80, rule: Matmul = SIMT) -> tc.Schedule:
    sch = rule.apply(func, target)
    assert isinstance(sch, tc.Schedule), sch
    return sch


def emulate_equal(func: PrimFunc, sizes: dict[str, int] | None = None,
                  rule: Matmul = SIMT, target: tc.Target = SM80) -> tc.Schedule:  # fmt: skip
    """Scheduled, and equal to ``func`` under the race-checking emulator."""
    sch = scheduled(func, target, rule)
    tc.testing.check_numeric(sch.func, func, emulate_gpu="racecheck", target=target,
                             shape_vars=sizes)  # fmt: skip
    return sch


def kernels(sch: tc.Schedule) -> list[object]:
    return list(lower_gpu(sch.func, SM80).kernels)


# -- numerics under emulation ---------------------------------------------------------------


@pytest.mark.parametrize("weight_nk", [False, True], ids=["weight_kn", "weight_nk"])
def test_linear_both_weight_layouts_equal(weight_nk: bool) -> None:
    func = linear(64, 128, 32, weight_nk=weight_nk, relu=True)
    sch = emulate_equal(func)
    assert len(kernels(sch)) == 1  # the ReLU is the write-back
    verify_trace_roundtrip(sch, func)


def test_fp16_accumulated_in_fp32_and_cast_in_the_write_back() -> None:
    func = linear(32, 64, 64, dtype="float16", out_dtype="float32")
    sch = emulate_equal(func)
    (kernel,) = kernels(sch)
    assert {b.name for b in kernel.shared} == {"A_shared", "B_shared"}


def test_plain_fp16_matmul_equal() -> None:
    emulate_equal(linear(32, 64, 64, dtype="float16"), rule=Matmul())  # fp16 accumulation: SIMT


def test_ragged_shapes_padded_inside_one_kernel() -> None:
    # 50 x 70 x 40 divides none of the tiles: zero-filled loads, a guarded write-back
    sch = emulate_equal(linear(50, 70, 36, relu=True))
    assert len(kernels(sch)) == 1


def test_symbolic_m_equal() -> None:
    func = linear(Var("m"), 64, 32, weight_nk=True)
    sch = emulate_equal(func, {"m": 37})
    (kernel,) = kernels(sch)
    assert isinstance(kernel.grid[1], tc.ir.Expr)
    assert not isinstance(kernel.grid[1], tc.ir.IntImm)


def test_batched_matmul_equal() -> None:
    sch = emulate_equal(linear(16, 32, 16, batch=3))
    (kernel,) = kernels(sch)
    assert [int(e.value) for e in kernel.grid] == [1, 1, 3]


def test_symbolic_batch_equal() -> None:
    emulate_equal(linear(16, 32, 16, batch=Var("b"), weight_nk=True), {"b": 2})


def test_producer_inlined_into_the_shared_load() -> None:
    a = te.placeholder((32, 32), "float32", name="A")
    w = te.placeholder((64, 32), "float32", name="W")
    scaled = te.compute((32, 32), lambda i, k: a[i, k] * tc.ir.const(0.5, "float32"), name="s")
    func = te.create_prim_func([a, w, topi.matmul(scaled, w, transpose_b=True)])
    sch = emulate_equal(func)
    assert len(kernels(sch)) == 1


def test_epilogue_that_cannot_be_fused_runs_as_its_own_kernel() -> None:
    a = te.placeholder((64, 32), "float32", name="A")
    b = te.placeholder((32, 64), "float32", name="B")
    c = topi.matmul(a, b)
    flip = te.compute((64, 64), lambda i, j: c[63 - i, j] * 2.0, name="flip")
    sch = emulate_equal(te.create_prim_func([a, b, flip]))
    assert len(kernels(sch)) == 2
    assert "matmul_local" in sch.func.script()  # still accumulated in registers


# -- structure ------------------------------------------------------------------------------


def test_full_size_tiles_and_vector_loads() -> None:
    sch = scheduled(linear(1024, 1024, 1024))
    (kernel,) = kernels(sch)
    assert kernel.threads_per_block == 128
    shared = {b.name: b.shape[0].value for b in kernel.shared}
    assert shared == {"A_shared": 32 * 20, "B_shared": 16 * 68}  # rows padded by 16 bytes
    text = build_cuda_source(sch.mod, SM80).text
    assert "*(const float4*)(A +" in text
    assert "*(const float4*)(B +" in text
    assert "float matmul_local[16];" in text


def test_config_is_per_target() -> None:
    assert MatmulConfig.for_target(tc.Target("cuda -arch=sm_80")).tensor_cores == "mma"
    assert MatmulConfig.for_target(tc.Target("cuda -arch=sm_75")).tensor_cores == "wmma"
    small = Matmul(MatmulConfig(threads=(4, 8), per_thread=(2, 2)))
    sch = small.apply(linear(64, 64, 64), SM80)
    assert isinstance(sch, tc.Schedule)
    (kernel,) = kernels(sch)
    assert kernel.threads_per_block == 32


# -- declines -------------------------------------------------------------------------------


def test_declines_with_reasons() -> None:
    x = te.placeholder((1, 64), "float32", name="x")
    w = te.placeholder((128, 64), "float32", name="w")
    gemv = te.create_prim_func([x, w, topi.matmul(x, w, transpose_b=True)])
    assert "GEMV" in str(Matmul().apply(gemv, SM80))
    a = te.placeholder((16, 16), "float32", name="a")
    add = te.create_prim_func([a, te.compute((16, 16), lambda i, j: a[i, j] + 1.0, name="b")])
    assert "exactly one reduction block" in str(Matmul().apply(add, SM80))
    r = te.reduce_axis((0, 16), name="r")
    sq = te.compute((16,), lambda i: te.sum(a[i, r] * a[i, r], axis=r), name="sq")
    assert "not an einsum" in str(Matmul().apply(te.create_prim_func([a, sq]), SM80))
    ai = te.placeholder((16, 16), "int32", name="ai")
    bi = te.placeholder((16, 16), "int32", name="bi")
    imm = te.create_prim_func([ai, bi, topi.matmul(ai, bi)])
    assert "dtype int32" in str(Matmul().apply(imm, SM80))
    assert "GPU rule" in str(Matmul().apply(linear(16, 16, 16), tc.Target("cpu")))


def test_in_the_rule_list_declines_nothing_it_can_take() -> None:
    func = linear(64, 64, 64)
    mod = tc.ir.IRModule({"main": func})
    with SM80:
        out = dl.ApplyDefaultSchedule(Matmul())(mod)
    assert out["main"].attrs["tc.schedule_rule"] == "Matmul"


# -- ptxas at full size ---------------------------------------------------------------------

FULL = {
    "fp32": lambda: linear(1024, 1024, 1024),
    "fp32_weight_nk_relu": lambda: linear(1024, 4096, 4096, weight_nk=True, relu=True),
    "ragged": lambda: linear(1000, 1000, 1000, relu=True),
    "symbolic_m": lambda: linear(Var("m"), 4096, 4096, weight_nk=True),
    "batched": lambda: linear(128, 128, 64, batch=32),
    "fp16_acc_fp32": lambda: linear(1024, 1024, 1024, dtype="float16", out_dtype="float32"),
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
    assert stats.registers * (kernel.threads_per_block or 1) <= limits.registers_per_block
    assert stats.shared_bytes <= limits.max_shared_memory_per_block
