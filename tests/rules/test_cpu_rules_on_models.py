"""Every CPU rule, alone and in the default list, through ``ApplyDefaultSchedule(strict=True)``
on the module of every issue-12 model (``tests/models``: the Llama layer's decode and
prefill, the BERT layer, both ResNet blocks, both tutorial models; small sizes): no exception,
each kernel declined with a reason or scheduled into a function numerically equal to the
unscheduled one; ``explain`` gives every Llama kernel but pure data movement to a rule other
than ``Fallback`` (at the TinyLlama sizes too)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import models
import numpy as np
import pytest

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft.ir import PrimFunc

CPU = tc.Target("cpu")
CASES = [c.name for c in models.cases("small")]


@pytest.mark.parametrize("pipeline", ["zero", "default"])
@pytest.mark.parametrize("name", CASES)
def test_every_kernel_declined_with_a_reason_or_scheduled(name: str, pipeline: str) -> None:
    """Each rule alone (``try_rules([rule], strict=True)``, what the pass runs per function)
    and the default list through the pass itself, strict: no exception, a reason for every
    decline, and the pass takes each kernel with the first rule that accepts it alone, never
    with ``Fallback``. (Each rule's schedule is checked numerically, kernel by kernel, in
    test_cpu_rule_models.py.)"""
    mod = models.pipelined(models.small(name), pipeline, bind=pipeline == "default")
    with CPU:
        out = dl.ApplyDefaultSchedule(*dl.cpu.default_rules(), strict=True)(mod)
    for kernel, func in mod.prim_funcs():
        takers = []
        for rule in dl.cpu.default_rules():
            outcome = dl.try_rules(func, [rule], CPU, strict=True)
            if outcome.rule is None:
                assert [(r, bool(d.reason)) for r, d in outcome.declines] == [(rule.name, True)]
            else:
                takers.append(outcome.rule)
        new = out[kernel]
        assert isinstance(new, PrimFunc)
        assert new.attrs[dl.SCHEDULE_RULE_ATTR] == takers[0] != "Fallback", (kernel, takers)
        assert takers[-1] == "Fallback"


def _data_movement(name: str) -> bool:
    """A kernel that only moves data: transposes, reshapes, concatenations (no arithmetic)."""
    ops = name.removeprefix("fused_").split("_")
    moves = ("transpose", "reshape", "concatenate")
    return all(op.rstrip("0123456789") in moves for op in ops)


@pytest.mark.parametrize("size", ["small", pytest.param("full", marks=pytest.mark.slow)])
def test_explain_gives_every_llama_kernel_to_a_rule_other_than_fallback(size: str) -> None:
    for case in models.cases(size)[:2]:  # decode, prefill
        assert case.name.startswith("llama")
        report = dl.explain(models.pipelined(case, "default"), dl.cpu.default_rules(), CPU)
        taken = {f.name: f.rule for f in report.functions}
        assert None not in taken.values(), report
        fallback = sorted(n for n, rule in taken.items() if rule == "Fallback")
        assert all(_data_movement(n) for n in fallback), (case.name, fallback)
        assert "GEMV" in taken.values() if "decode" in case.name else "Matmul" in taken.values()


def test_data_movement_names() -> None:
    assert _data_movement("fused_transpose3_reshape6_concatenate1")
    assert _data_movement("reshape3")
    assert not _data_movement("fused_reshape1_rotary_embedding1_transpose1")
    assert not _data_movement("rms_norm")


def test_models_kernels_go_to_the_expected_rules() -> None:
    expect = {
        "tutorial_reference_b1": {"fused_matmul_add_relu": "GEMV", "fused_matmul1_add1": "GEMV",
                                  "layer_norm": "GeneralReduction"},
        "tutorial_reference_b64": {"fused_matmul_add_relu": "Matmul",
                                   "fused_matmul1_add1": "Matmul"},
        "tutorial_metaschedule_b1": {"fused_matmul_add_relu": "GEMV", "matmul1": "GEMV"},
        "tutorial_metaschedule_b64": {"fused_matmul_add_relu": "Matmul", "matmul1": "Matmul"},
        "llama_prefill_small": {"matmul": "Matmul", "fused_matmul4_silu_multiply1": "Matmul",
                                "fused_matmul5_add": "Matmul", "rms_norm": "Reduction",
                                "softmax": "GeneralReduction"},
        "llama_decode_small": {"matmul": "GEMV", "fused_matmul4_silu_multiply1": "GEMV",
                               "fused_matmul2_multiply_causal_mask": "Matmul",
                               "fused_concatenate_reshape3": "Injective"},
        "bert_layer_small": {"fused_matmul3_add2_gelu": "Matmul",
                             "fused_matmul4_add_add1": "Matmul"},
        "resnet18_block_small": {"fused_conv2d_multiply_add_relu": "Conv",
                                 "fused_conv2d_multiply_add_add1_relu": "Conv"},
    }  # fmt: skip
    for name, want in expect.items():
        with CPU:
            mod = models.pipelined(models.small(name), "default", bind=True)
            out = dl.ApplyDefaultSchedule(*dl.cpu.default_rules(), strict=True)(mod)
        got = {n: f.attrs.get(dl.SCHEDULE_RULE_ATTR) for n, f in out.prim_funcs()}
        assert {n: got[n] for n in want} == want, name


@pytest.mark.parametrize(
    "name", ["tutorial_reference_b64", "llama_prefill_small", "resnet18_block_small"]
)
def test_scheduled_model_runs_like_the_unscheduled_one(name: str) -> None:
    case = models.small(name)
    mod = models.pipelined(case)
    with CPU:
        scheduled = dl.ApplyDefaultSchedule(*dl.cpu.default_rules(), strict=True)(mod)
    args = [*case.inputs, *case.params.values()]
    want = tc.build(mod, target="cpu")[case.entry](*args)
    got = tc.build(scheduled, target="cpu")[case.entry](*args)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, case.expected(), rtol=case.rtol, atol=case.atol)


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
