"""Every GPU rule on representative workloads at reduced sizes: the rule expected takes the
function (the first of ``default_rules()`` to accept it), and the scheduled function equals
the unscheduled one under ``emulate="racecheck"`` on random inputs."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import workloads as w

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft.ir import PrimFunc, Var
from tilecraft.testing import check_numeric, verify_trace_roundtrip

SM80 = tc.Target("cuda -arch=sm_80")

CASES: dict[str, tuple[Callable[[], PrimFunc], str, dict[str, int]]] = {
    "softmax": (w.softmax, "GeneralReduction", {}),
    "softmax_fp16": (lambda: w.softmax(dtype="float16"), "GeneralReduction", {}),
    "softmax_symbolic_cols": (lambda: w.softmax(4, Var("n")), "GeneralReduction", {"n": 77}),
    "softmax_symbolic_rows": (lambda: w.softmax(Var("m"), 64), "GeneralReduction", {"m": 3}),
    "softmax_channels_nchw": (w.softmax_nchw, "GeneralReduction", {}),
    "log_softmax": (w.log_softmax, "GeneralReduction", {}),
    "logsumexp": (w.logsumexp, "GeneralReduction", {}),
    "layer_norm": (w.layer_norm, "GeneralReduction", {}),
    "layer_norm_fp16": (lambda: w.layer_norm(dtype="float16"), "GeneralReduction", {}),
    "layer_norm_symbolic": (lambda: w.layer_norm(Var("m"), 96), "GeneralReduction", {"m": 2}),
    "layer_norm_axis0": (w.layer_norm_axis0, "GeneralReduction", {}),
    "group_norm": (w.group_norm, "GeneralReduction", {}),
    "rms_norm": (w.rms_norm, "RMSNorm", {}),
    "rms_norm_fp16": (lambda: w.rms_norm(dtype="float16"), "RMSNorm", {}),
    "rms_norm_symbolic_rows": (lambda: w.rms_norm(Var("m"), 128), "RMSNorm", {"m": 3}),
    "add_rms_norm": (w.add_rms_norm, "RMSNorm", {}),
    "add_rms_norm_fp16": (lambda: w.add_rms_norm(dtype="float16"), "RMSNorm", {}),
    "rms_norm_by_hand": (w.rms_norm_by_hand, "RMSNorm", {}),
    "sum_last": (lambda: w.reduce_sum((5, 100), 1), "Reduction", {}),
    "sum_first": (lambda: w.reduce_sum((30, 7), 0), "Reduction", {}),
    "sum_4d_non_last": (lambda: w.reduce_sum((2, 6, 3, 5), 1), "Reduction", {}),
    "sum_4d_two_axes": (lambda: w.reduce_sum((2, 6, 3, 40), (1, 3)), "Reduction", {}),
    "sum_all": (lambda: w.reduce_sum((9, 40), None), "Reduction", {}),
    "sum_symbolic_rows": (lambda: w.reduce_sum((Var("m"), 64), 1), "Reduction", {"m": 5}),
    "sum_fp16": (lambda: w.reduce_sum((3, 200), 1, "float16"), "Reduction", {}),
    "mean_last": (lambda: w.reduce_mean((5, 64), 1), "Reduction", {}),
    "max_short_rows": (lambda: w.reduce_max((50, 6), 1), "Reduction", {}),
    "transpose_2d": (lambda: w.transpose((40, 70)), "Transpose", {}),
    "transpose_batched": (lambda: w.transpose((2, 40, 33), (0, 2, 1)), "Transpose", {}),
    "transpose_3d_reversed": (lambda: w.transpose((5, 6, 40), (2, 1, 0)), "Transpose", {}),
    "transpose_symbolic": (lambda: w.transpose((Var("n"), 64)), "Transpose", {"n": 45}),
    "ewise_broadcast_chain": (w.ewise_chain, "Fallback", {}),
    "ewise_symbolic": (lambda: w.ewise_chain((Var("n"), 20)), "Fallback", {"n": 7}),
    "argmax": (w.argmax, "Fallback", {}),
    "matmul": (lambda: w.matmul(m=32), "Matmul", {}),
    # 16 rows (max_batch) times a (k, n) operand: a small batch of rows, weight-stationary
    "matmul_16_rows": (w.matmul, "LowBatchGEMV", {}),
}
NO_MATMUL_FAMILY = {"GEMV", "LowBatchGEMV", "Matmul"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_schedule_equals_unscheduled(name: str) -> None:
    make, rule, sizes = CASES[name]
    func = make()
    outcome = dl.try_rules(func, dl.gpu.default_rules(), SM80, strict=True)
    assert outcome.rule == rule, outcome.declines
    assert outcome.schedule is not None
    check_numeric(
        outcome.schedule.func, func, emulate_gpu="racecheck", target=SM80, shape_vars=sizes or None
    )


def test_fallback_alone_schedules_a_matmul() -> None:
    func = w.matmul()
    rules = [r for r in dl.gpu.default_rules() if r.name not in NO_MATMUL_FAMILY]
    outcome = dl.try_rules(func, rules, SM80, strict=True)
    assert outcome.rule == "Fallback", outcome.declines
    assert outcome.schedule is not None
    check_numeric(outcome.schedule.func, func, emulate_gpu="racecheck", target=SM80)


def test_schedules_replay_from_their_traces() -> None:
    for make in (w.softmax, w.group_norm, lambda: w.transpose((40, 70))):
        func = make()
        sch = dl.try_rules(func, dl.gpu.default_rules(), SM80).schedule
        assert sch is not None
        verify_trace_roundtrip(sch, func)


@pytest.mark.parametrize(
    "name", ["softmax", "transpose_2d", "ewise_broadcast_chain", "sum_4d_non_last"]
)
def test_tunable_schedules_equal_unscheduled(name: str) -> None:
    make, rule, sizes = CASES[name]
    func = make()
    outcome = dl.try_rules(func, dl.gpu.default_rules(), SM80, strict=True, tunable=True)
    assert outcome.rule == rule
    sch = outcome.schedule
    assert sch is not None
    assert "sample_categorical" in [inst.kind for inst in sch.trace.insts]
    check_numeric(sch.func, func, emulate_gpu="racecheck", target=SM80, shape_vars=sizes or None)
