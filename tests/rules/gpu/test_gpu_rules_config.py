"""The GPU machine description per arch, rule configs derived from it, decline reasons,
``tunable=True`` sampling, the rule order and ``explain`` on a GPU target."""

from __future__ import annotations

import re

import pytest
import workloads as w

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft.lower.gpu_pipeline import lower_gpu
from tilecraft.rules.gpu.config import compute_capability, gpu_arch
from tilecraft.schedule import Trace

SM80 = tc.Target("cuda -arch=sm_80")


@pytest.mark.parametrize(
    ("arch", "preset", "tensor_cores", "cp_async", "optin_kib"),
    [
        ("sm_70", "sm_70", True, False, 96),
        ("sm_75", "sm_75", True, False, 64),
        ("sm_80", "sm_80", True, True, 163),
        ("sm_86", "sm_86", True, True, 99),
        ("sm_87", "sm_86", True, True, 99),  # no preset: the nearest lower one
        ("sm_89", "sm_89", True, True, 99),
        ("sm_90", "sm_90", True, True, 227),
        ("sm_100", "sm_90", True, True, 227),
    ],
)
def test_arch_presets(arch: str, preset: str, tensor_cores: bool, cp_async: bool,
                      optin_kib: int) -> None:  # fmt: skip
    got = gpu_arch(tc.Target(f"cuda -arch={arch}"))
    assert got is not None
    assert (got.arch, got.tensor_cores, got.cp_async) == (preset, tensor_cores, cp_async)
    assert got.shared_per_block_optin == optin_kib * 1024
    assert got.shared_per_block == 48 * 1024
    assert got.warp_size == 32


def test_sm_90a_is_sm_90() -> None:
    assert compute_capability("sm_90a") == 90
    assert gpu_arch("sm_90a") == gpu_arch("sm_90")


def test_old_archs_and_cpu_targets_are_declined_with_a_reason() -> None:
    func = w.softmax()
    got = dl.gpu.GeneralReduction().apply(func, tc.Target("cuda -arch=sm_60"))
    assert isinstance(got, dl.Decline)
    assert "no GPU preset for sm_60 (the oldest is sm_70)" in got.reason
    got = dl.gpu.Fallback().apply(func, tc.Target("cpu -mcpu=x86-64-v2"))
    assert isinstance(got, dl.Decline)
    assert "a GPU rule" in got.reason


def test_configs_follow_the_arch() -> None:
    cfg = dl.gpu.RMSNorm.Config.for_target(SM80)
    assert cfg.max_row_threads == 512
    assert dl.gpu.Reduction.Config.for_target(SM80).max_row_threads == 256
    assert dl.gpu.Transpose.Config.for_target(SM80).tile == 32


@pytest.mark.parametrize(
    ("rule", "make", "reason"),
    [
        (dl.gpu.Reduction(), w.softmax, r"2 reduction blocks .*several reductions"),
        (dl.gpu.Reduction(), w.matmul, r"multiply-accumulate \(matmul-like\)"),
        (dl.gpu.Reduction(), w.ewise_chain, r"no reduction block"),
        (dl.gpu.GeneralReduction(), w.argmax, r"T_argmax"),
        (dl.gpu.RMSNorm(), w.layer_norm, r"2 reductions; an RMS norm has one"),
        (dl.gpu.RMSNorm(), lambda: w.reduce_sum((4, 64), 1), r"not a sum of squares"),
        (dl.gpu.Transpose(), w.ewise_chain, r"innermost in its inputs too"),
        (dl.gpu.Transpose(), w.softmax, r"a reduction or opaque block"),
    ],
)
def test_decline_reasons(rule: dl.ScheduleRule, make, reason: str) -> None:
    got = rule.apply(make(), SM80)
    assert isinstance(got, dl.Decline)
    assert re.search(reason, got.reason), got.reason


def test_already_scheduled_functions_are_declined() -> None:
    func = w.softmax()
    sch = dl.gpu.GeneralReduction().apply(func, SM80)
    assert isinstance(sch, tc.Schedule)
    for rule in dl.gpu.default_rules():
        got = rule.apply(sch.func, SM80)
        assert isinstance(got, dl.Decline)
        assert "already scheduled" in got.reason


def test_tunable_rules_sample_the_threads_per_row() -> None:
    func = w.softmax(4, 512)
    sch = dl.gpu.GeneralReduction().apply(func, SM80, tunable=True)
    assert isinstance(sch, tc.Schedule)
    kinds = [inst.kind for inst in sch.trace.insts]
    assert "sample_categorical" in kinds
    again = tc.Schedule(func)
    Trace.from_json(sch.trace.as_json()).apply_to_schedule(again)
    assert tc.ir.structural_equal(again.func, sch.func)


def test_default_rules_order() -> None:
    names = [r.name for r in dl.gpu.default_rules()]
    assert names == [
        "GEMV", "LowBatchGEMV", "Matmul", "RMSNorm", "Reduction", "GeneralReduction",
        "Transpose", "Fallback",
    ]  # fmt: skip


def test_explain_on_a_gpu_target() -> None:
    mod = tc.IRModule({"softmax": w.softmax(), "rms": w.rms_norm(), "t": w.transpose((8, 40))})
    report = dl.explain(mod, dl.gpu.default_rules(), tc.Target("cuda -arch=sm_90"))
    assert report["softmax"].rule == "GeneralReduction"
    assert report["rms"].rule == "RMSNorm"
    assert report["t"].rule == "Transpose"
    text = str(report)
    assert "target: cuda -arch=sm_90" in text
    assert "Reduction: declined: 2 reduction blocks" in text


def test_transpose_tile_is_padded_by_one_element() -> None:
    sch = dl.gpu.Transpose().apply(w.transpose((4096, 4096)), SM80)
    assert isinstance(sch, tc.Schedule)
    (kernel,) = lower_gpu(sch.func, SM80).kernels
    assert [b.shape[0].value for b in kernel.shared] == [32 * 33]
    assert [int(e.value) for e in kernel.block[:2]] == [32, 8]


def test_reduction_over_a_middle_axis_takes_one_thread_per_output_and_no_shared_memory() -> None:
    sch = dl.gpu.Reduction().apply(w.reduce_sum((8, 512, 32, 32), 1), SM80)
    assert isinstance(sch, tc.Schedule)
    (kernel,) = lower_gpu(sch.func, SM80).kernels
    assert not kernel.shared
    assert int(kernel.block[0].value) == 256


def test_softmax_over_a_symbolic_row_takes_a_block_per_row() -> None:
    sch = dl.gpu.GeneralReduction().apply(w.softmax(tc.ir.Var("m"), 4096), SM80)
    assert isinstance(sch, tc.Schedule)
    (kernel,) = lower_gpu(sch.func, SM80).kernels
    assert isinstance(kernel.grid[0], tc.ir.Var)
    assert int(kernel.block[0].value) == 256
