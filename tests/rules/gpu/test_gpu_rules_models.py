"""The GPU default rules on the small models (tests/models): every function scheduled under
``strict=True``, and the model run GPU-lowered under ``emulate="racecheck"`` equals its
float64 reference. Two models by default, all of them under ``-m slow``."""

from __future__ import annotations

import models
import numpy as np
import pytest

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft.graph import get_pipeline

SM90 = tc.Target("cuda -arch=sm_90")
QUICK = ("llama_decode_small", "bert_layer_small")
ALL = [c.name for c in models.cases("small")]


def _check(name: str) -> None:
    case = next(c for c in models.cases("small") if c.name == name)
    with SM90:
        mod = get_pipeline("default", params=case.params)(case.mod)
        out = dl.ApplyDefaultSchedule(*dl.gpu.default_rules(), strict=True)(mod)
    taken = {n: f.attrs.get(dl.SCHEDULE_RULE_ATTR) for n, f in out.prim_funcs()}
    assert all(taken.values()), taken
    exe = tc.build(out, SM90, emulate="racecheck")
    got = exe[case.entry](*case.inputs)
    expected = case.reference(case.inputs, case.params)
    np.testing.assert_allclose(np.asarray(got), expected, rtol=case.rtol, atol=case.atol)


@pytest.mark.parametrize("name", QUICK)
def test_models_scheduled_by_gpu_rules_match_reference(name: str) -> None:
    _check(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in ALL if n not in QUICK])
def test_all_small_models_scheduled_by_gpu_rules_match_reference(name: str) -> None:
    _check(name)


def test_compile_tutorial_model_for_sm_90_equals_the_cpu_build() -> None:
    case = next(c for c in models.cases("small") if c.name == "tutorial_reference_b1")
    cpu = tc.compile(case.mod, "cpu", params=case.params)[case.entry](*case.inputs)
    exe = tc.compile(case.mod, SM90, params=case.params, emulate="racecheck")
    np.testing.assert_allclose(np.asarray(exe[case.entry](*case.inputs)), cpu, rtol=1e-4, atol=1e-5)
    with SM90:
        mod = get_pipeline("default", params=case.params)(case.mod)
    report = dl.explain(mod, dl.gpu.default_rules(), SM90)
    assert {r.name: r.rule for r in report.functions} == {
        "layer_norm": "GeneralReduction",
        "fused_matmul_add_relu": "GEMV",  # batch 1: one row of output per layer
        "fused_matmul1_add1": "GEMV",
    }
