"""GPU LowBatchGEMV rule: a symbolic (or small constant) batch of rows times an ``(out, in)``
or an ``(in, out)`` weight; each weight chunk loaded once per bucket of rows; equal to the
unscheduled function under the race-checking emulator; ptxas for sm_80 and sm_90 without
spills; declines."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest

import tilecraft as tc
from tilecraft.ir import PrimFunc, Var
from tilecraft.lower.gpu_pipeline import lower_gpu
from tilecraft.rules.gpu import LowBatchGEMV, LowBatchGEMVConfig
from tilecraft.runtime import build_cuda_source
from tilecraft.runtime.cuda_compile import ptxas_info
from tilecraft.schedule.testing_utils import verify_trace_roundtrip
from tilecraft.schedule.trace import Trace

SM80 = tc.Target("cuda -arch=sm_80")
SM90 = tc.Target("cuda -arch=sm_90")
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


def low_batch_kn(b: int | Var, k: int, n: int, *, dtype: str = "float32",
                 bias_silu: bool = True) -> PrimFunc:  # fmt: skip
    """``silu(x @ W + bias)`` for ``x``: ``(b, k)`` and ``W``: ``(k, n)`` (reduction strided),
    fp16 accumulated in fp32 and cast back."""
    x = te.placeholder((b, k), dtype, name="x")
    w = te.placeholder((k, n), dtype, name="W")
    acc = "float32" if dtype == "float16" else None
    y = topi.matmul(x, w, out_dtype=acc)
    if acc is not None:
        y = te.compute(y.shape, lambda *i: tc.ir.op.cast(y[i], dtype), name="cast")
    if not bias_silu:
        return te.create_prim_func([x, w, y])
    bias = te.placeholder((n,), dtype, name="bias")

    def silu(*i: tc.ir.Expr) -> tc.ir.Expr:
        v = y[i] + bias[i[-1]]
        return v * tc.ir.op.sigmoid(v)

    return te.create_prim_func([x, w, bias, te.compute(y.shape, silu, name="silu")])


def scheduled(func: PrimFunc, target: tc.Target = SM80) -> tc.Schedule:
    sch = LowBatchGEMV().apply(func, target)
    assert isinstance(sch, tc.Schedule), sch
    return sch


def emulate_equal(func: PrimFunc, sizes: dict[str, int] | None = None,
                  target: tc.Target = SM80) -> tc.Schedule:  # fmt: skip
    sch = scheduled(func, target)
    tc.testing.check_numeric(sch.func, func, emulate_gpu="racecheck", target=target,
                             shape_vars=sizes)  # fmt: skip
    assert len(lower_gpu(sch.func, target).kernels) == 1  # padding and epilogue inside
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


# -- (in, out) weights: reduction strided ---------------------------------------------------


@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_kn_weight_symbolic_batch_bias_silu_equal(target: tc.Target, dtype: str) -> None:
    func = low_batch_kn(Var("b"), 256, 384, dtype=dtype)
    sch = scheduled(func, target)
    for batch in (1, 3, 5, 17):
        tc.testing.check_numeric(sch.func, func, emulate_gpu="racecheck", target=target,
                                 shape_vars={"b": batch})  # fmt: skip
    assert len(lower_gpu(sch.func, target).kernels) == 1  # padding and epilogue inside


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_kn_weight_constant_batch_equal(dtype: str) -> None:
    func = low_batch_kn(4, 256, 384, dtype=dtype)
    verify_trace_roundtrip(emulate_equal(func, target=SM90), func)


def test_kn_weight_ragged_reduction_and_odd_columns_equal() -> None:
    # k = 100 is no multiple of the reduction threads (guarded, scalar loads); 6 columns take
    # 2-element vectors; a constant batch of 3 is padded to one bucket
    emulate_equal(low_batch_kn(3, 100, 6))
    emulate_equal(low_batch_kn(Var("b"), 100, 6, bias_silu=False), {"b": 5})


def test_kn_weight_tunable_trace_replays() -> None:
    func = low_batch_kn(Var("b"), 256, 384)
    sch = LowBatchGEMV().apply(func, SM80, tunable=True)
    assert isinstance(sch, tc.Schedule), sch
    assert "sample_categorical" in [i.kind for i in sch.trace.insts]
    verify_trace_roundtrip(sch, func)


def test_kn_weight_vector_loaded_once_per_bucket() -> None:
    sch = scheduled(low_batch_kn(Var("b"), 4096, 11008))
    text = build_cuda_source(sch.mod, SM80).text
    body = text[text.index("for (int k_0") :]
    # one 16-byte load of W per k step, outside the loop over the bucket's rows
    assert body.count("*(const float4*)(W +") == 1
    assert "float matmul_pad_rf[16];" in text  # bucket (4) x lanes (4) partial sums
    assert "__shared__" in text  # partial sums combined across threadIdx.y


def test_declines_with_reasons() -> None:
    assert "larger than max_batch" in str(LowBatchGEMV().apply(low_batch(64, 16, 64), SM80))
    a = te.placeholder((Var("b"), 64), "float32", name="a")
    w = te.placeholder((64, Var("n")), "float32", name="w")
    symbolic_cols = te.create_prim_func([a, w, topi.matmul(a, w)])
    assert "constant 2-D weight" in str(LowBatchGEMV().apply(symbolic_cols, SM80))
    x = te.placeholder((Var("b"), 64), "float32", name="x")
    y = te.placeholder((Var("n"), 64), "float32", name="y")
    both = te.create_prim_func([x, y, topi.matmul(x, y, transpose_b=True)])
    assert "constant 2-D weight" in str(LowBatchGEMV().apply(both, SM80))
    assert LowBatchGEMVConfig.for_target(SM80).bucket == 4


@pytest.mark.parametrize("weight_nk", [True, False], ids=["out_in", "in_out"])
def test_declines_a_symbolic_sequence_of_one_batch_item(weight_nk: bool) -> None:
    # prefill: x (1, seq, k), a prompt's rows, not a decode batch: left to Matmul
    x = te.placeholder((1, Var("seq"), 64), "float32", name="x")
    w = te.placeholder((32, 64) if weight_nk else (64, 32), "float32", name="W")
    func = te.create_prim_func([x, w, topi.matmul(x, w, transpose_b=weight_nk)])
    assert "outermost dimension" in str(LowBatchGEMV().apply(func, SM80))
    # a decode batch (b, 1, k) is taken
    scheduled(low_batch_kn(Var("b"), 64, 32) if not weight_nk else low_batch(
        Var("b"), 32, 64, decode_shape=True))  # fmt: skip


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="nvcc/ptxas not on PATH")
def test_kn_weight_every_sampled_reduction_split_fits_shared_memory() -> None:
    # a 16-row bucket of fp16 columns: the partial sums of k_threads x 16 x 64 columns
    # bound the threads along k; every candidate replays and fits the 48 KiB of a block
    func = low_batch_kn(Var("b"), 4096, 11008, dtype="float16")
    cfg = replace(LowBatchGEMVConfig.for_target(SM90), bucket=16)
    sch = LowBatchGEMV(cfg).apply(func, SM90, tunable=True)
    assert isinstance(sch, tc.Schedule), sch
    data = json.loads(sch.trace.as_json())
    (pick,) = [i for i in data["insts"] if i["kind"] == "sample_categorical"]
    assert len(pick["attrs"]["candidates"]) > 1
    for choice in range(len(pick["attrs"]["candidates"])):
        pick["decision"] = choice
        again = tc.Schedule(func)
        Trace.from_json(json.dumps(data)).apply_to_schedule(again)
        src = build_cuda_source(again.mod, SM90)
        (stats,) = ptxas_info(src.text, "sm_90").values()
        assert stats.shared_bytes <= 48 * 1024, stats
        assert not stats.spills, stats


FULL = {
    "fp16_4096": lambda: low_batch(Var("b"), 4096, 4096, dtype="float16", out_dtype="float32"),
    "fp32_bias_relu": lambda: low_batch(Var("b"), 11008, 4096, bias_relu=True),
    "kn_fp16_bias_silu": lambda: low_batch_kn(Var("b"), 4096, 11008, dtype="float16"),
    "kn_fp32_bias_silu": lambda: low_batch_kn(Var("b"), 4096, 11008),
    "kn_fp16_batch_16": lambda: low_batch_kn(16, 4096, 11008, dtype="float16"),
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
