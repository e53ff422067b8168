"""explain(): the rule taking each function, earlier declines, and the profile."""

from __future__ import annotations

import json

import models
import pytest

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft.ir import PrimFunc
from tilecraft.rules.explain import Status

CPU = tc.Target("cpu")


def test_explain_names_the_rule_and_every_earlier_decline() -> None:
    mod = models.pipelined(models.small("tutorial_reference_b1"))
    report = dl.explain(mod, [dl.cpu.Matmul(), dl.cpu.GEMV()], CPU)
    fused = report["fused_matmul_add_relu"]
    assert fused.status is Status.SCHEDULED
    assert fused.rule == "GEMV"
    assert fused.declines == (
        ("Matmul", "a GEMV (one operand is a vector): left to the GEMV rule"),
    )
    norm = report["layer_norm"]
    assert norm.status is Status.UNSCHEDULED
    assert norm.rule is None
    assert [r for r, _ in norm.declines] == ["Matmul", "GEMV"]
    assert all("reduction block" in why for _, why in norm.declines)
    text = str(report)
    assert "fused_matmul_add_relu" in text
    assert "Matmul: declined: a GEMV" in text
    assert "time (us)" not in text  # no profile asked
    assert report.total_s is None


def test_explain_is_a_plain_dict_and_does_not_change_the_module() -> None:
    mod = models.pipelined(models.small("tutorial_metaschedule_b64"))
    text = mod.script()
    report = dl.explain(mod, [dl.cpu.Matmul(), dl.cpu.GEMV()], CPU)
    assert mod.script() == text
    d = report.to_dict()
    assert json.loads(json.dumps(d)) == d
    funcs = d["functions"]
    assert isinstance(funcs, dict)
    assert funcs["matmul1"]["rule"] == "Matmul"
    assert funcs["transpose"]["status"] == "no rule took it"


def test_explain_reports_functions_scheduled_before() -> None:
    mod = models.pipelined(models.small("tutorial_metaschedule_b64"))
    with CPU:
        done = dl.ApplyDefaultSchedule(dl.cpu.Matmul())(mod)
    report = dl.explain(done, [dl.cpu.Matmul(), dl.cpu.GEMV()], CPU)
    row = report["matmul1"]
    assert row.status is Status.ALREADY_SCHEDULED
    assert row.rule == "Matmul"
    assert "Matmul (before)" in str(report)


def test_explain_without_a_target_uses_the_current_one() -> None:
    mod = models.pipelined(models.small("tutorial_metaschedule_b1"))
    with CPU:
        report = dl.explain(mod, [dl.cpu.GEMV()])
    assert report.target == str(CPU)  # the full description of the current target
    assert report["matmul1"].rule == "GEMV"


@dl.ScheduleRule.from_callable("Fallback")
def do_nothing_fallback(func: PrimFunc, target: tc.Target, tunable: bool) -> tc.Schedule:
    """A stand-in Fallback that takes everything and changes nothing."""
    return tc.Schedule(func)


def _matmul_and_add() -> tc.IRModule:
    a = tc.te.placeholder((192, 192), "float32", name="A")
    b = tc.te.placeholder((192, 192), "float32", name="B")
    mm = tc.te.create_prim_func([a, b, tc.topi.matmul(a, b)])
    x = tc.te.placeholder((16,), "float32", name="x")
    add = tc.te.create_prim_func([x, tc.te.compute((16,), lambda i: x[i] + 1.0, name="y")])
    return tc.IRModule({"big": mm, "small": add})


def test_profile_times_each_kernel_and_flags_a_heavy_fallback() -> None:
    report = dl.explain(_matmul_and_add(), [do_nothing_fallback], CPU, profile=True, repeat=3)
    big, small = report["big"], report["small"]
    assert big.rule == small.rule == "Fallback"
    assert big.time_s is not None
    assert small.time_s is not None
    assert big.time_s > small.time_s > 0
    assert big.share is not None
    assert small.share is not None
    assert big.share + small.share == pytest.approx(1.0)
    assert big.flagged
    assert not small.flagged
    assert report.total_s == pytest.approx(big.time_s + small.time_s)
    text = str(report)
    assert "FLAG" in text
    assert "share" in text


def test_profile_weighs_kernels_by_their_calls_in_the_graph() -> None:
    mod = models.pipelined(models.small("tutorial_reference_b1"))
    report = dl.explain(mod, [dl.cpu.Matmul(), dl.cpu.GEMV()], CPU, profile=True, repeat=3)
    assert {f.name: f.calls for f in report.functions} == dict.fromkeys(
        ["transpose", "layer_norm", "transpose1", "fused_matmul_add_relu", "fused_matmul1_add1"], 1
    )
    assert sum(f.share or 0.0 for f in report.functions) == pytest.approx(1.0)
    # the unscheduled transposes are flagged only when over 10% of the time
    for f in report.functions:
        assert f.flagged == (f.rule is None and (f.share or 0.0) > 0.10)


def test_profile_resolves_symbolic_shapes() -> None:
    mod = models.pipelined(models.small("llama_prefill_small"))
    report = dl.explain(
        mod, [dl.cpu.Matmul(), dl.cpu.GEMV()], CPU, profile=True, shape_vars={"seq": 4},
        repeat=1,
    )  # fmt: skip
    assert all(f.time_s is not None and f.time_s > 0 for f in report.functions)
    assert report["softmax"].calls == 1
    assert report["matmul1"].calls == 2  # the key and value projections
