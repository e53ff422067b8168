"""The GPU rules on every kernel of the models (tests/models ``gpu_cases``): a TinyLlama-size
decoder layer (decode with a KV cache, prefill with a symbolic sequence length; fp32 and
fp16), a BERT-base encoder layer, a ViT block, ResNet-18 blocks (convolutions as implicit
GEMMs; fp32 and fp16) and the two tutorial models, through the "zero" pipeline (weights as
arguments, either layout) and the "default" one (weights bound).

* the full list and every rule alone run under ``strict=True`` without an exception: a rule
  alone schedules or declines with a reason; the full list schedules every kernel;
* each scheduled kernel equals its unscheduled form under ``emulate="racecheck"`` (reduced
  sizes);
* each kernel at full size compiles with ptxas for sm_80 and sm_90: no spills, no stack,
  within the register and shared-memory limits;
* decode projections go to GEMV, prefill fp16 projections to Matmul on tensor cores, convs
  to Matmul (fp16 convs on tensor cores).

The default run takes a few models and kernel kinds; ``-m slow`` takes them all.
"""

from __future__ import annotations

import functools

import models
import pytest

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft.graph import get_pipeline
from tilecraft.ir import IRModule, PrimFunc, Var
from tilecraft.lower.gpu_verify import STATIC_SHARED_LIMIT
from tilecraft.runtime import build_cuda_source
from tilecraft.runtime.cuda_compile import ptxas_info
from tilecraft.schedule.analysis import classify_einsum, normalize_prim_func

SM80, SM90 = tc.Target("cuda -arch=sm_80"), tc.Target("cuda -arch=sm_90")
SMALL = models.gpu_case_names("small")
QUICK = ("llama_decode_small_fp16",)
PIPELINES = ("zero", "default")


@functools.cache
def _case(name: str, size: str = "small") -> models.ModelCase:
    return models.gpu_case(name, size)


@functools.cache
def kernels(name: str, pipeline: str, size: str = "small") -> IRModule:
    """The model's kernels after ``pipeline`` for sm_90 (``default``: the weights bound)."""
    case = _case(name, size)
    with SM90:
        return get_pipeline(pipeline, params=case.params if pipeline == "default" else None)(
            case.mod
        )


def shape_vars(func: PrimFunc) -> dict[str, int] | None:
    """A value for each symbolic extent of ``func`` (5: not a multiple of any tile)."""
    names = {v.name for b in func.buffer_params for v in b.shape if isinstance(v, Var)}
    return dict.fromkeys(sorted(names), 5) or None


def projection(func: PrimFunc) -> bool:
    """A kernel whose one reduction is an einsum with a 2-D (weight) right operand."""
    infos = normalize_prim_func(tc.Schedule(func)) or []
    reductions = [b for b in infos if b.is_reduction()]
    einsum = classify_einsum(reductions[0]) if len(reductions) == 1 else None
    return einsum is not None and len(einsum.rhs.buffer.shape) == 2


def on_tensor_cores(sch: tc.Schedule) -> bool:
    return any(inst.kind == "tensorize" for inst in sch.trace.insts)


def _strict_everywhere(name: str) -> None:
    for pipeline in PIPELINES:
        for fname, func in kernels(name, pipeline).prim_funcs():
            outcome = dl.try_rules(func, dl.gpu.default_rules(), SM90, strict=True)
            assert outcome.rule is not None, (fname, outcome.declines)
            for rule in dl.gpu.default_rules():
                alone = dl.try_rules(func, [rule], SM90, strict=True)
                for _, decline in alone.declines:
                    assert decline.reason, (fname, rule.name)


@pytest.mark.parametrize("name", QUICK)
def test_full_list_and_each_rule_alone_strict(name: str) -> None:
    _strict_everywhere(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(SMALL) - set(QUICK)))
def test_full_list_and_each_rule_alone_strict_all_models(name: str) -> None:
    _strict_everywhere(name)


def _emulate_all(name: str, pipeline: str, which: str | None = None) -> None:
    for fname, func in kernels(name, pipeline).prim_funcs():
        if which is not None and fname != which:
            continue
        outcome = dl.try_rules(func, dl.gpu.default_rules(), SM90, strict=True)
        assert outcome.schedule is not None, fname
        tc.testing.check_numeric(
            outcome.schedule.func, func, emulate_gpu="racecheck", target=SM90,
            shape_vars=shape_vars(func),
        )  # fmt: skip


# one kernel of each kind the rules produce for the models (the rest under -m slow)
EMULATE_QUICK = [
    ("llama_prefill_small_fp16", "default", "fused_matmul_add"),  # tensor cores, symbolic M
    ("llama_decode_small_fp16", "default", "fused_matmul4_silu_multiply1"),  # GEMV, fp16
    ("llama_decode_small", "zero", "fused_matmul_add"),  # GEMV, (out, in) weight
    ("resnet18_downsample_small", "default", "fused_conv2d_multiply_add_relu"),  # conv, stride 2
    # fp16 conv on tensor cores, padded, the 1x1 projection's output as the residual
    ("resnet18_downsample_small_fp16", "default", "fused_conv2d1_multiply_add_add1_relu"),
]


@pytest.mark.parametrize(("name", "pipeline", "kernel"), EMULATE_QUICK)
def test_scheduled_kernel_equals_unscheduled(name: str, pipeline: str, kernel: str) -> None:
    assert kernel in dict(kernels(name, pipeline).prim_funcs())
    _emulate_all(name, pipeline, kernel)


def test_prefill_attention_scores_on_tensor_cores_equal() -> None:
    # QK^T of grouped-query attention: K read (seq, d) through a unit group axis, the
    # sequence length symbolic on both sides; K loads with ldmatrix without .trans
    name, kernel = "llama_prefill_small_fp16", "fused_matmul2_multiply_causal_mask"
    func = dict(kernels(name, "default").prim_funcs())[kernel]
    outcome = dl.try_rules(func, dl.gpu.default_rules(), SM90, strict=True)
    assert outcome.schedule is not None
    assert on_tensor_cores(outcome.schedule)
    _emulate_all(name, "default", kernel)


@pytest.mark.slow
@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_scheduled_kernel_equals_unscheduled(name: str, pipeline: str) -> None:
    _emulate_all(name, pipeline)


def _ptxas_within_limits(name: str, arch: str, only: str | None = None) -> None:
    target = tc.Target(f"cuda -arch={arch}")
    limits = target.gpu
    assert limits is not None
    for fname, func in kernels(name, "default", "full").prim_funcs():
        if only == "matmul" and "matmul" not in fname and "conv" not in fname:
            continue
        sch = dl.try_rules(func, dl.gpu.default_rules(), target, strict=True).schedule
        assert sch is not None, fname
        src = build_cuda_source(sch.mod, target)
        info = ptxas_info(src.text, arch)
        for prog in src.programs.values():
            for kernel in prog.kernels:
                stats = info[kernel.name]
                assert not stats.spills, (fname, stats)
                assert stats.stack_bytes == 0, (fname, stats)
                assert 0 < stats.registers <= limits.max_registers_per_thread, (fname, stats)
                threads = kernel.threads_per_block or 1
                assert stats.registers * threads <= limits.registers_per_block, (fname, stats)
                assert stats.shared_bytes <= STATIC_SHARED_LIMIT, (fname, stats)


FULL = models.gpu_case_names("full")


@pytest.mark.nvcc
@pytest.mark.slow
def test_implicit_gemm_convolutions_compile_without_spills() -> None:
    _ptxas_within_limits("resnet18_downsample", "sm_90", only="matmul")


@pytest.mark.nvcc
@pytest.mark.slow
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", FULL)
def test_every_model_kernel_compiles_without_spills(name: str, arch: str) -> None:
    _ptxas_within_limits(name, arch)


# the "zero" pipeline's kernels (no fusion into the projections) under -m slow
QUICK_PIPELINES = ["default", pytest.param("zero", marks=pytest.mark.slow)]


@pytest.mark.parametrize("pipeline", QUICK_PIPELINES)
@pytest.mark.parametrize("name", ["llama_decode_tinyllama", "llama_decode_tinyllama_fp16"])
def test_decode_projections_go_to_gemv_in_either_weight_layout(name: str, pipeline: str) -> None:
    found = 0
    for fname, func in kernels(name, pipeline, "full").prim_funcs():
        if projection(func):
            found += 1
            outcome = dl.try_rules(func, dl.gpu.default_rules(), SM90, strict=True)
            assert outcome.rule == "GEMV", (fname, outcome.declines)
    assert found >= 6  # q, k/v, o (+ residual), gate/up, down (+ residual)


@pytest.mark.parametrize("pipeline", QUICK_PIPELINES)
def test_prefill_fp16_projections_go_to_matmul_on_tensor_cores(pipeline: str) -> None:
    found = 0
    for fname, func in kernels("llama_prefill_tinyllama_fp16", pipeline, "full").prim_funcs():
        if projection(func):
            found += 1
            outcome = dl.try_rules(func, dl.gpu.default_rules(), SM90, strict=True)
            assert outcome.rule == "Matmul", (fname, outcome.declines)
            assert outcome.schedule is not None
            assert on_tensor_cores(outcome.schedule), fname
    assert found >= 6


@pytest.mark.parametrize("name", ["resnet18_block", "resnet18_downsample"])
def test_resnet_convolutions_go_to_matmul(name: str) -> None:
    convs = [(n, f) for n, f in kernels(name, "default", "full").prim_funcs() if "conv" in n]
    assert convs
    for fname, func in convs:
        outcome = dl.try_rules(func, dl.gpu.default_rules(), SM90, strict=True)
        assert outcome.rule == "Matmul", (fname, outcome.declines)


@pytest.mark.parametrize("name", ["resnet18_block_fp16", "resnet18_downsample_fp16"])
def test_resnet_fp16_convolutions_go_to_matmul_on_tensor_cores(name: str) -> None:
    convs = [(n, f) for n, f in kernels(name, "default", "full").prim_funcs() if "conv" in n]
    assert convs
    for fname, func in convs:
        outcome = dl.try_rules(func, dl.gpu.default_rules(), SM90, strict=True)
        assert outcome.rule == "Matmul", (fname, outcome.declines)
        assert outcome.schedule is not None
        assert on_tensor_cores(outcome.schedule), fname
