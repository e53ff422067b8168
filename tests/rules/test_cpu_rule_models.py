"""Each CPU rule alone on every kernel of the issue-12 models (``tests/models``, small sizes:
the Llama layer's decode and prefill, the BERT layer, both ResNet blocks, both tutorial models,
through the "zero" pipeline and the default one with bound weights): no exception, every
decline with a reason, the expected rule first, and its schedule numerically equal to the
unscheduled kernel (every rule's schedule under ``-m slow``)."""

from __future__ import annotations

import models
import pytest
from cpu_rule_workloads import CPU, check_rule

import tilecraft as tc
from tilecraft.rules import Decline
from tilecraft.rules import cpu as rules_cpu

RULES = {r.name: r for r in rules_cpu.default_rules()}
KERNELS = sorted(models.kernels("small"))

GEMV_CASES = ("llama_decode", "tutorial_reference_b1", "tutorial_metaschedule_b1")
"""Cases whose projections run on one row (a token, or a batch of one): GEMVs."""
ATTENTION = ("matmul2", "matmul3")
"""The Llama layer's attention products (scores, then values): several query heads share a
key/value head, so even one token gives each a small matrix: Matmul."""


def expected_rule(kernel: str) -> str:
    """The first rule of ``default_rules()`` that should take ``"<case>/<pipeline>/<name>"``."""
    case, _, name = kernel.split("/")
    if "rms_norm" in name:
        return "Reduction"
    if "softmax" in name or "layer_norm" in name:
        return "GeneralReduction"
    if "conv2d" in name:  # static NCHW convolutions: the direct Conv rule
        return "Conv"
    if "matmul" in name:
        one_row = case.startswith(GEMV_CASES) and not any(a in name for a in ATTENTION)
        return "GEMV" if one_row else "Matmul"
    return "Injective"  # transposes, reshapes, rotary, concatenation, batch-norm folds


def test_the_models_have_the_kernels_the_rules_are_for() -> None:
    names = {k.split("/")[2] for k in KERNELS}
    for kind in ("rms_norm", "softmax", "layer_norm", "rotary", "concatenate", "conv2d",
                 "transpose", "gelu", "silu"):  # fmt: skip
        assert any(kind in n for n in names), kind
    # the models trace scaled_dot_product_attention as separate operators, so the fused
    # ``attention`` op's rule is exercised by tests/rules/test_cpu_attention.py instead
    assert {expected_rule(k) for k in KERNELS} == set(RULES) - {"Fallback", "Attention"}


def takers(kernel: str) -> list[str]:
    """The rules accepting the kernel, in default order; every decline must say why."""
    out = []
    for rule in rules_cpu.default_rules():
        got = rule.apply(models.kernels("small")[kernel], CPU, False)
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
    check_rule(RULES[names[0]], models.kernels("small")[kernel], (3,))


@pytest.mark.slow
@pytest.mark.parametrize("kernel", KERNELS)
def test_every_rule_alone_is_numerically_equal(kernel: str) -> None:
    func = models.kernels("small")[kernel]
    for rule in rules_cpu.default_rules():
        check_rule(rule, func, (1, 2, 17, 64))
