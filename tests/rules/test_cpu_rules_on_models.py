"""Every CPU rule, alone and together, on every kernel of the tutorial, BERT, Llama and ResNet
models, under ``strict=True``: no exception, and each kernel is either declined with a reason
or scheduled into a function numerically equal to the unscheduled one."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import rule_models as rm

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft.ir import PrimFunc

CPU = tc.Target("cpu")
SHAPE_VARS = {"seq_len": 5}


def _check(func: PrimFunc, scheduled: PrimFunc) -> None:
    names = {v.name for b in func.buffer_params for v in b.shape_vars()}
    # reductions run in another order: float32 sums of up to a few hundred terms
    tc.testing.check_numeric(
        scheduled, func, rtol=1e-4, atol=1e-5,
        shape_vars={k: v for k, v in SHAPE_VARS.items() if k in names},
    )  # fmt: skip


def _rule_sets() -> dict[str, list[dl.ScheduleRule]]:
    return {
        "Matmul": [dl.cpu.Matmul()],
        "GEMV": [dl.cpu.GEMV()],
        "both": [dl.cpu.Matmul(), dl.cpu.GEMV()],
    }


@pytest.mark.parametrize("model", sorted(rm.MODELS))
def test_every_kernel_declined_with_a_reason_or_scheduled_and_equal(model: str) -> None:
    mod = rm.model_module(model)
    taken: dict[str, set[str]] = {}
    for label, rules in _rule_sets().items():
        with CPU:
            out = dl.ApplyDefaultSchedule(*rules, strict=True)(mod)
        for name, func in mod.prim_funcs():
            outcome = dl.try_rules(func, rules, CPU, strict=True)
            new = out[name]
            assert isinstance(new, PrimFunc)
            if outcome.rule is None:
                assert new is func
                assert outcome.declines, name
                assert all(d.reason for _, d in outcome.declines), (name, outcome.declines)
                continue
            assert new.attrs[dl.SCHEDULE_RULE_ATTR] == outcome.rule
            taken.setdefault(name, set()).add(f"{label}:{outcome.rule}")
            if label != "both":  # the combined run takes the same schedules
                _check(func, new)
    assert taken, f"no rule took any kernel of {model}"


def test_models_kernels_go_to_the_expected_rules() -> None:
    expect = {
        "quickstart_b1": {"fused_matmul_add_relu": "GEMV", "fused_matmul1_add1": "GEMV"},
        "quickstart_b64": {"fused_matmul_add_relu": "Matmul", "fused_matmul1_add1": "Matmul"},
        "mlp_b1": {"fused_matmul_add_relu": "GEMV", "matmul1": "GEMV"},
        "mlp_b64": {"fused_matmul_add_relu": "Matmul", "matmul1": "Matmul"},
        "llama_prefill": {"matmul": "Matmul", "fused_matmul1_silu_multiply": "Matmul",
                          "fused_matmul2_add": "Matmul"},
        "llama_decode": {"matmul": "GEMV", "fused_matmul1_silu_multiply": "GEMV"},
        "bert": {"fused_matmul1_add2_gelu": "Matmul", "fused_matmul2_add_add1": "Matmul"},
        "resnet_block": {"fused_conv2d_add_relu": "Matmul", "fused_conv2d_add_add1_relu": "Matmul"},
    }  # fmt: skip
    rules = [dl.cpu.Matmul(), dl.cpu.GEMV()]
    for model, want in expect.items():
        with CPU:
            out = dl.ApplyDefaultSchedule(*rules, strict=True)(rm.model_module(model))
        got = {n: f.attrs.get(dl.SCHEDULE_RULE_ATTR) for n, f in out.prim_funcs()}
        for name, rule in want.items():
            assert got[name] == rule, (model, name, got)
        assert got.get("layer_norm") is None
        assert got.get("transpose") is None


@pytest.mark.parametrize(("model", "shape"), [("quickstart_b64", (64, 768)),
                                             ("llama_prefill", (1, 7, 64)),
                                             ("resnet_block", (1, 16, 14, 14))])  # fmt: skip
def test_scheduled_model_runs_like_the_unscheduled_one(model: str, shape: tuple[int, ...]) -> None:
    mod, params = rm.model_and_params(model)
    with CPU:
        scheduled = dl.ApplyDefaultSchedule(dl.cpu.Matmul(), dl.cpu.GEMV(), strict=True)(mod)
    x = np.random.default_rng(0).standard_normal(shape).astype("float32")
    want = tc.build(mod, target="cpu")["forward"](x, *params.values())
    got = tc.build(scheduled, target="cpu")["forward"](x, *params.values())
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _topi_workloads() -> dict[str, Callable[[], PrimFunc]]:
    path = Path(__file__).resolve().parents[1] / "schedule" / "analysis_workloads.py"
    spec = importlib.util.spec_from_file_location("rules_analysis_workloads", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.WORKLOADS  # type: ignore[no-any-return]


TOPI = _topi_workloads()


@pytest.mark.parametrize("name", sorted(TOPI))
def test_every_topi_operator_declined_with_a_reason_or_scheduled_and_equal(name: str) -> None:
    func = TOPI[name]()
    outcome = dl.try_rules(func, [dl.cpu.Matmul(), dl.cpu.GEMV()], CPU, strict=True)
    if outcome.schedule is None:
        assert [r for r, _ in outcome.declines] == ["Matmul", "GEMV"]
        assert all(d.reason for _, d in outcome.declines)
        return
    names = {v.name for b in func.buffer_params for v in b.shape_vars()}
    tc.testing.check_numeric(
        outcome.schedule.func, func, rtol=1e-4, atol=1e-5, shape_vars=dict.fromkeys(names, 5)
    )
