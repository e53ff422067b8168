"""Every topi operator through the CPU rules: which rule takes it, and each rule alone on it.

For each operator of :data:`cpu_rule_workloads.OPS`: the first accepting rule of
``default_rules()`` is the expected one, and every rule alone either declines with a reason or
returns a schedule computing the same values as the unscheduled function (odd sizes, several
runtime values of symbolic extents, float16/float64/int32 where the operator allows).
"""

from __future__ import annotations

import random

import pytest
from cpu_rule_workloads import CPU, OPS, check_rule

import tilecraft as tc
from tilecraft.rules import Decline
from tilecraft.rules import cpu as rules_cpu

RULES = {r.name: r for r in rules_cpu.default_rules()}


def first_taker(func: tc.ir.PrimFunc) -> tuple[str, dict[str, str]]:
    """The name of the first rule accepting ``func`` and the reasons of those before it."""
    reasons: dict[str, str] = {}
    for rule in rules_cpu.default_rules():
        got = rule.apply(func, CPU, False)
        if not isinstance(got, Decline):
            return rule.name, reasons
        reasons[rule.name] = got.reason
    return "", reasons


@pytest.mark.parametrize("name", sorted(OPS))
def test_expected_rule_takes_the_operator(name: str) -> None:
    build, expected, sizes = OPS[name]
    func = build()
    taker, reasons = first_taker(func)
    assert taker == expected, f"{name}: {taker} took it; earlier declines: {reasons}"
    assert all(reasons.values()), reasons
    check_rule(RULES[taker], func, sizes)


def each_rule_alone(rule_name: str, names: list[str]) -> None:
    """Raises nothing; declines with a reason or schedules correctly (one size each)."""
    rule = RULES[rule_name]
    taken = []
    for name in names:
        build, _, sizes = OPS[name]
        got = check_rule(rule, build(), sizes[1:2])
        if not isinstance(got, Decline):
            taken.append(name)
    expected = sorted(n for n in names if OPS[n][1] == rule_name)
    assert set(expected) <= set(taken), sorted(set(expected) - set(taken))


RULE_NAMES = ["Reduction", "GeneralReduction", "Injective", "Fallback"]


@pytest.mark.parametrize("rule_name", RULE_NAMES)
def test_each_rule_alone_on_a_sample_of_operators(rule_name: str) -> None:
    each_rule_alone(rule_name, random.Random(rule_name).sample(sorted(OPS), 12))


@pytest.mark.slow
@pytest.mark.parametrize("rule_name", RULE_NAMES)
def test_each_rule_alone_on_every_operator(rule_name: str) -> None:
    each_rule_alone(rule_name, sorted(OPS))
