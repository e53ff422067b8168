"""Each CPU rule alone on every kernel of four models (tutorial, BERT-like encoder layer,
Llama-style decoder layer, ResNet-18-like basic block): no exception, and either a decline
with a reason or a schedule numerically equal to the unscheduled kernel."""

from __future__ import annotations

import pytest
from cpu_rule_models import model_kernels
from cpu_rule_workloads import CPU, check_rule

import tilecraft as tc
from tilecraft.rules import Decline
from tilecraft.rules import cpu as rules_cpu

RULES = {r.name: r for r in rules_cpu.default_rules()}
KERNELS = sorted(model_kernels())

# the rule of default_rules() that takes each kind of kernel; a key with a "/" names one
# model's kernels (the quickstart model runs at batch 1: its matmuls are GEMVs)
EXPECTED = {
    "quickstart/fused_matmul": "GEMV",
    "layer_norm": "GeneralReduction",
    "attention": "GeneralReduction",
    "rms_norm": "Reduction",
    "mean": "Reduction",
    "max_pool2d": "Reduction",
    "transpose": "Injective",
    "reshape": "Injective",
    "rotary": "Injective",
    "matmul": "Matmul",
    "conv2d": "Matmul",  # as an implicit GEMM
}


def expected_rule(kernel: str) -> str:
    name = kernel.split("/", 1)[1]
    return next(
        rule for key, rule in EXPECTED.items() if (key in kernel if "/" in key else key in name)
    )


def test_the_models_have_the_kernels_the_rules_are_for() -> None:
    names = {k.split("/", 1)[1] for k in KERNELS}
    assert {"layer_norm", "rms_norm", "attention", "max_pool2d", "mean", "transpose"} <= names
    assert any("rotary" in n for n in names)
    assert any(n.startswith("fused_conv2d") for n in names)


def takers(kernel: str) -> list[str]:
    """The rules accepting the kernel, in default order; every decline must say why."""
    out = []
    for rule in rules_cpu.default_rules():
        got = rule.apply(model_kernels()[kernel], CPU, False)
        if isinstance(got, Decline):
            assert got.reason, f"{rule.name} declined {kernel} without a reason"
        else:
            assert isinstance(got, tc.Schedule)
            out.append(rule.name)
    return out


@pytest.mark.parametrize("kernel", KERNELS)
def test_every_rule_alone_on_the_kernel(kernel: str) -> None:
    """Every rule runs without raising; the expected one takes the kernel and is correct."""
    names = takers(kernel)
    assert names, f"{kernel}: no rule took it (Fallback must)"
    assert names[0] == expected_rule(kernel), names
    assert names[-1] == "Fallback"
    check_rule(RULES[names[0]], model_kernels()[kernel], (3,))


@pytest.mark.slow
@pytest.mark.parametrize("kernel", KERNELS)
def test_every_rule_alone_is_numerically_equal(kernel: str) -> None:
    func = model_kernels()[kernel]
    for rule in rules_cpu.default_rules():
        check_rule(rule, func, (1, 2, 17, 64))
