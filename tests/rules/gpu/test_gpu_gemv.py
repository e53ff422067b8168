"""GPU GEMV rule: both weight layouts, fused epilogues, fp16 with fp32 accumulation, batched
and symbolic extents, ragged reductions; equal to the unscheduled function under the
race-checking emulator; ptxas for sm_80 and sm_90 without spills at full size; declines."""

from __future__ import annotations

import shutil

import pytest

import tilecraft as tc
from tilecraft.ir import PrimFunc, Var
from tilecraft.lower.gpu_pipeline import lower_gpu
from tilecraft.rules.gpu import GEMV, GEMVConfig
from tilecraft.runtime import build_cuda_source
from tilecraft.runtime.cuda_compile import ptxas_info
from tilecraft.schedule.testing_utils import verify_trace_roundtrip

SM80 = tc.Target("cuda -arch=sm_80")
te, topi = tc.te, tc.topi


def gemv(n: int | Var, k: int | Var, *, dtype: str = "float32", weight_nk: bool = True,
         bias_relu: bool = False, batch: int | Var | None = None,
         out_dtype: str | None = None) -> PrimFunc:  # fmt: skip
    """``y = x @ W^T`` (``W``: ``(n, k)``, reduction contiguous) or ``x @ W`` (``(k, n)``,
    reduction strided), optionally batched, accumulated in ``out_dtype`` and cast back, with a
    ``max(y + bias, 0)`` epilogue."""
    lead = () if batch is None else (batch,)
    x = te.placeholder((*lead, 1, k), dtype, name="x")
    w = te.placeholder((*lead, *((n, k) if weight_nk else (k, n))), dtype, name="W")
    y = topi.matmul(x, w, transpose_b=weight_nk, out_dtype=out_dtype)
    if out_dtype is not None:
        y = te.compute(y.shape, lambda *i: tc.ir.op.cast(y[i], dtype), name="cast")
    if not bias_relu:
        return te.create_prim_func([x, w, y])
    bias = te.placeholder((n,), dtype, name="bias")
    zero = tc.ir.const(0.0, dtype)
    out = te.compute(y.shape, lambda *i: tc.ir.op.max(y[i] + bias[i[-1]], zero), name="relu")
    return te.create_prim_func([x, w, bias, out])


def scheduled(func: PrimFunc, target: tc.Target = SM80) -> tc.Schedule:
    sch = GEMV().apply(func, target)
    assert isinstance(sch, tc.Schedule), sch
    return sch


def emulate_equal(func: PrimFunc, sizes: dict[str, int] | None = None) -> tc.Schedule:
    sch = scheduled(func)
    tc.testing.check_numeric(sch.func, func, emulate_gpu="racecheck", target=SM80,
                             shape_vars=sizes)  # fmt: skip
    return sch


def one_kernel_text(sch: tc.Schedule) -> str:
    assert len(lower_gpu(sch.func, SM80).kernels) == 1  # the epilogue is fused
    return build_cuda_source(sch.mod, SM80).text


# -- numerics under emulation ---------------------------------------------------------------


@pytest.mark.parametrize("weight_nk", [True, False], ids=["reduction_contiguous", "strided"])
@pytest.mark.parametrize(("n", "k"), [(16, 512), (10, 100)], ids=["even", "ragged"])
def test_both_layouts_with_epilogue_equal(weight_nk: bool, n: int, k: int) -> None:
    func = gemv(n if weight_nk else 8 * n, k, weight_nk=weight_nk, bias_relu=True)
    sch = emulate_equal(func)
    one_kernel_text(sch)
    verify_trace_roundtrip(sch, func)


@pytest.mark.parametrize("weight_nk", [True, False], ids=["reduction_contiguous", "strided"])
def test_fp16_accumulates_in_fp32(weight_nk: bool) -> None:
    func = gemv(256 if not weight_nk else 16, 512 if weight_nk else 64, dtype="float16",
                weight_nk=weight_nk, out_dtype="float32")  # fmt: skip
    emulate_equal(func)


def test_batched_gemv_with_symbolic_rows_equal() -> None:
    # decode attention scores: q[h, 0, d] . K[h, s, d] over a symbolic sequence length
    emulate_equal(gemv(Var("s"), 64, batch=4), {"s": 9})


def test_strided_symbolic_reduction_equal() -> None:
    # attention times V: p[h, 0, s] . V[h, s, d], the reduction s symbolic
    emulate_equal(gemv(64, Var("s"), weight_nk=False, batch=2), {"s": 13})


# -- structure ------------------------------------------------------------------------------


def test_reduction_contiguous_uses_vector_loads_and_warp_shuffles() -> None:
    text = one_kernel_text(scheduled(gemv(4096, 4096, dtype="float16", out_dtype="float32")))
    assert "*(const uint4*)(W +" in text  # eight halves per load
    assert "__shfl_down_sync" in text
    (kernel,) = lower_gpu(scheduled(gemv(4096, 4096)).func, SM80).kernels
    assert [e.value for e in kernel.grid] == [1024, 1, 1]  # four rows per block


def test_epilogue_written_once_per_element() -> None:
    # the rows layout: thread r writes row r; the strided layout: one thread per column
    for weight_nk in (True, False):
        text = one_kernel_text(scheduled(gemv(4096, 4096, weight_nk=weight_nk, bias_relu=True)))
        body = text[text.index("relu[") - 200 : text.index("relu[")]
        assert "if (" in body


def test_strided_layout_reads_rows_coalesced_and_fills_the_gpu() -> None:
    sch = scheduled(gemv(4096, 4096, weight_nk=False))
    text = one_kernel_text(sch)
    assert "*(const float4*)(W +" in text
    (kernel,) = lower_gpu(sch.func, SM80).kernels
    blocks = kernel.grid[0].value
    assert blocks >= 2 * 108  # two blocks per A100 multiprocessor
    assert GEMVConfig.for_target(SM80).sm_count == 108


# -- declines -------------------------------------------------------------------------------


def test_declines_with_reasons() -> None:
    a = te.placeholder((32, 16), "float32", name="a")
    b = te.placeholder((16, 32), "float32", name="b")
    mm = te.create_prim_func([a, b, topi.matmul(a, b)])
    assert "not a GEMV" in str(GEMV().apply(mm, SM80))
    sym_cols = gemv(Var("n"), 64, weight_nk=False)
    assert "symbolic" in str(GEMV().apply(sym_cols, SM80))
    assert "GPU rule" in str(GEMV().apply(gemv(16, 16), tc.Target("cpu")))


# -- ptxas at full size ---------------------------------------------------------------------

FULL = {
    "fp16_nk": lambda: gemv(4096, 4096, dtype="float16", out_dtype="float32"),
    "fp16_kn": lambda: gemv(4096, 4096, dtype="float16", weight_nk=False, out_dtype="float32"),
    "fp32_nk_bias_relu": lambda: gemv(11008, 4096, bias_relu=True),
    "fp32_kn_bias_relu": lambda: gemv(4096, 11008, weight_nk=False, bias_relu=True),
    "scores_symbolic": lambda: gemv(Var("s"), 128, batch=32, dtype="float16"),
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
