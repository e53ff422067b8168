"""The CPU rules on functions they were not written for: already scheduled, partly scheduled
by random primitive sequences, degenerate shapes. Nothing raises; a result is a Decline with a
reason or a schedule computing the same values; ``Fallback`` always returns a schedule."""

from __future__ import annotations

import random

import pytest
from cpu_rule_workloads import CPU, OPS, check_rule, ph

import tilecraft as tc
from tilecraft import te, topi
from tilecraft.rules import CPURule, Decline
from tilecraft.rules import cpu as rules_cpu

SOURCES = ["softmax", "layer_norm", "sum_first", "mean", "transpose", "concat", "matmul",
           "attention", "take", "argmax", "max_pool2d_pad", "rms_norm"]  # fmt: skip


def test_default_rules_order_and_kinds() -> None:
    rules = rules_cpu.default_rules()
    assert [r.name for r in rules] == [
        "Attention",
        "Conv",
        "Matmul",
        "GEMV",
        "Reduction",
        "GeneralReduction",
        "Injective",
        "Fallback",
    ]
    for rule in rules:
        assert isinstance(rule, CPURule)
        assert rule.is_target_available(CPU)
        assert not rule.is_target_available(tc.Target("cuda -arch=sm_90"))
        cfg = type(rule).Config.for_target(CPU)  # type: ignore[attr-defined]
        with pytest.raises(AttributeError):
            cfg.num_cores = 3  # frozen: numbers are data


def _random_steps(func: tc.ir.PrimFunc, rng: random.Random, steps: int) -> tc.ir.PrimFunc:
    sch = tc.Schedule(func)
    for _ in range(steps):
        blocks = sch.get_child_blocks(sch.get_block("root"))
        if not blocks:
            break
        block = rng.choice(blocks)
        loops = sch.get_loops(block)
        op = rng.choice(["split", "fuse", "reorder", "inline", "cache_read", "rfactor"])
        if op == "split" and loops:
            sch.try_(sch.split, rng.choice(loops), factors=[None, rng.choice([2, 3, 8])])
        elif op == "fuse" and len(loops) > 1:
            k = rng.randrange(len(loops) - 1)
            sch.try_(sch.fuse, loops[k], loops[k + 1])
        elif op == "reorder" and len(loops) > 1:
            sch.try_(sch.reorder, *rng.sample(loops, 2))
        elif op == "cache_read":
            sch.try_(sch.cache_read, block, 0, "global")
        elif op == "rfactor" and loops:
            sch.try_(sch.rfactor, loops[-1], 0)
        else:
            sch.try_(sch.compute_inline, block)
    return sch.func


@pytest.mark.parametrize("seed", range(6))
def test_rules_on_partly_scheduled_functions(seed: int) -> None:
    rng = random.Random(seed)
    name = SOURCES[seed % len(SOURCES)]
    build, _, sizes = OPS[name]
    func = _random_steps(build(), rng, rng.randrange(1, 4))
    for rule in rules_cpu.default_rules():
        got = check_rule(rule, func, sizes[:1])
        assert not (rule.name == "Fallback" and isinstance(got, Decline))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6, 60))
def test_rules_on_partly_scheduled_functions_many(seed: int) -> None:
    test_rules_on_partly_scheduled_functions(seed)


def test_scheduling_a_scheduled_function_again() -> None:
    func = OPS["softmax"][0]()
    done = rules_cpu.GeneralReduction().apply(func, CPU, False)
    assert isinstance(done, tc.Schedule)
    for rule in rules_cpu.default_rules():
        got = rule.apply(done.func, CPU, False)
        if rule.name == "Fallback":
            assert isinstance(got, tc.Schedule)
            assert tc.ir.structural_equal(got.func, done.func)
        else:
            assert isinstance(got, Decline)
            assert got.reason.startswith("already scheduled: loop")


def layer_norm_of_one() -> tc.ir.PrimFunc:
    x, g, b = ph((2, 1), "x", "float64"), ph((1,), "g", "float64"), ph((1,), "b", "float64")
    return te.create_prim_func([x, g, b, topi.layer_norm(x, g, b)])


@pytest.mark.parametrize(
    "build",
    [
        lambda: te.create_prim_func([x := ph((1,), "x"), topi.sum(x)]),
        lambda: te.create_prim_func([x := ph((1, 1, 1), "x"), topi.softmax(x, axis=1)]),
        lambda: te.create_prim_func([x := ph((5, 3), "x", "int8"), topi.max(x, axis=0)]),
        lambda: te.create_prim_func([x := ph((3, 5), "x", "bool"), topi.transpose(x)]),
        lambda: layer_norm_of_one(),
        lambda: te.create_prim_func([x := ph((), "x"), topi.exp(x)]),
    ],
    ids=["sum_of_one", "softmax_1x1x1", "max_int8", "transpose_bool", "layer_norm_of_one",
         "scalar"],
)  # fmt: skip
def test_degenerate_shapes(build: object) -> None:
    func = build()  # type: ignore[operator]
    for rule in rules_cpu.default_rules():
        check_rule(rule, func)
