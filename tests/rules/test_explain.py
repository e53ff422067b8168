"""explain(): the rule taking each function, earlier declines, and the profile."""

from __future__ import annotations

import importlib
import json

import models
import pytest

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft.ir import PrimFunc
from tilecraft.rules.explain import Status

CPU = tc.Target("cpu")
# the module (``tilecraft.rules.explain`` is also the name of its function)
explain_module = importlib.import_module("tilecraft.rules.explain")


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


def test_a_module_straight_from_export_is_refused_naming_the_pipeline() -> None:
    mod = models.small("tutorial_reference_b1").mod
    assert not list(mod.prim_funcs())  # graph functions calling operators only
    with pytest.raises(dl.RuleError, match=r'explain: the module has no PrimFuncs yet.*'
                       r'matmul, permute_dims, relu.*get_pipeline\("default"\)'):  # fmt: skip
        dl.explain(mod, dl.cpu.default_rules(), CPU, profile=True)


def test_profile_times_kernels_inside_whole_forwards_and_reports_the_forward(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mod = models.pipelined(models.small("tutorial_reference_b1"), "default", bind=True)
    profiled: list[str] = []  # graph functions run with per-kernel timing
    alone: list[str] = []  # functions timed by time_evaluator
    real_build = explain_module.build

    def spy_build(m: tc.IRModule, target: tc.Target) -> object:
        exe = real_build(m, target)
        run_profiled, time_evaluator = exe.profile, exe.time_evaluator

        def profile(name: str, *args: object) -> object:
            profiled.append(name)
            return run_profiled(name, *args)

        def timed_alone(name: str, *a: object, **kw: object) -> object:
            alone.append(name)
            return time_evaluator(name, *a, **kw)

        exe.profile, exe.time_evaluator = profile, timed_alone
        return exe

    monkeypatch.setattr(explain_module, "build", spy_build)
    # unscheduled kernels (no parallel loops): timings that do not wait on busy cores' threads
    report = dl.explain(mod, [do_nothing_fallback], CPU, profile=True, repeat=3)
    assert profiled == ["forward"] * (1 + explain_module.PROFILED_FORWARDS)  # warm-up + rounds
    assert alone == []  # every kernel is called by the forward: none is timed alone
    assert report.forward_s is not None
    assert report.total_s is not None
    assert report.forward_s > 0
    assert all(f.time_s is not None and f.time_s > 0 for f in report.functions)
    # the kernels run inside forwards: their sum is no more than the forward, up to noise
    assert report.total_s <= 3 * report.forward_s + 50e-6
    assert report.to_dict()["forward_s"] == report.forward_s
    forward_line = str(report).splitlines()[-1]
    assert forward_line.startswith("forward")
    assert f"{report.forward_s * 1e6:.1f}" in forward_line


def test_profile_of_a_module_without_graph_functions_times_kernels_alone() -> None:
    report = dl.explain(_matmul_and_add(), [do_nothing_fallback], CPU, profile=True, repeat=1)
    assert report.forward_s is None
    assert report.total_s is not None
    assert "forward" not in str(report).splitlines()[-1]
