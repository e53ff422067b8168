"""The default space holds the default rules' schedule and its one-knob neighbours, and the
search strategies draw such fixed sketches once each without starving the sampled ones."""

from __future__ import annotations

from dataclasses import dataclass

from fake_workers import HashBuilder, TableRunner
from tune_workloads import matmul, tile_matmul

import tilecraft as tc
from tilecraft import tune as ms
from tilecraft.ir import structural_hash
from tilecraft.rules import cpu as cpu_rules
from tilecraft.schedule import Schedule
from tilecraft.tune._defaults import rules_candidate
from tilecraft.tune.space import RuleVariants, ScheduleFnSpace, UnionSpace, default_space
from tilecraft.tune.space.rule_variants import config_variants

CPU = tc.Target("cpu -mcpu=avx512 -num-cores=1")


def _softmax(m: int = 16, n: int = 256) -> tc.ir.PrimFunc:
    x = tc.te.placeholder((m, n), "float32", name="x")
    return tc.te.create_prim_func([x, tc.topi.softmax(x, axis=-1)])


@dataclass(frozen=True)
class Knobs:
    reduce_vectors: int = 2
    mr: int = 2
    flag: bool = True
    other: int = 7


def test_config_variants_move_one_known_knob_at_a_time() -> None:
    got = config_variants(Knobs())
    assert got[0] == Knobs()
    # reduce_vectors halved and doubled, mr two down (0: skipped) and two up; the others kept
    assert got[1:] == [Knobs(reduce_vectors=1), Knobs(reduce_vectors=4), Knobs(mr=4)]
    assert config_variants(None) == [None]


def test_softmax_variants_start_with_the_rules_schedule_and_are_correct() -> None:
    func = _softmax()
    sketches = RuleVariants().generate(func, CPU, 0)
    rules = rules_candidate(func, CPU, "softmax")
    assert rules is not None
    assert structural_hash(sketches[0].func) == structural_hash(rules.func)
    keys = {structural_hash(s.func) for s in sketches}
    assert len(keys) == len(sketches) >= 2  # partial-sum vectors moved: other schedules
    for sch in sketches:
        tc.testing.check_numeric(sch.func, func, rtol=1e-4, atol=1e-4)
        again = Schedule(func)
        sch.trace.apply_to_schedule(again)
        assert structural_hash(again.func) == structural_hash(sch.func)


def test_the_default_space_holds_the_rule_variants() -> None:
    func = _softmax()
    variants = {structural_hash(s.func) for s in RuleVariants().generate(func, CPU, 0)}
    found = {structural_hash(s.func) for s in default_space(CPU).generate(func, CPU, 0)}
    assert variants < found  # and the search rules' sketches besides


class FixedMatmul(cpu_rules.Matmul):
    """The CPU Matmul rule with nothing sampled (its ``tunable`` path samples the ``m``
    blocks and the ``K`` unroll): its variants are fixed sketches."""

    def schedule(
        self, func: tc.ir.PrimFunc, target: tc.Target, cfg: cpu_rules.MatmulConfig, tunable: bool
    ) -> object:
        del tunable
        return super().schedule(func, target, cfg, False)


def _mixed_space() -> UnionSpace:
    """Tiled matmuls (sampled) and the rule variants (fixed sketches)."""
    return UnionSpace([ScheduleFnSpace(tile_matmul), RuleVariants([FixedMatmul()])])


def test_replay_trace_draws_each_fixed_sketch_once_and_goes_on_sampling() -> None:
    func = matmul(32, 32, 32)
    variants = {
        structural_hash(s.func) for s in RuleVariants([FixedMatmul()]).generate(func, CPU, 0)
    }
    db = ms.tune_tir(func, CPU, max_trials_global=12, space=_mixed_space(), builder=HashBuilder(),
                     runner=TableRunner(), seed_with_rules=False, progress=False)  # fmt: skip
    keys = [r.func_hash for r in db.get_all_tuning_records()]
    assert len(keys) == len(set(keys)) == 12  # not starved by the fixed sketches' repeats
    assert variants <= set(keys)


def test_evolutionary_search_puts_the_fixed_sketches_in_its_first_round() -> None:
    func = matmul(32, 32, 32)
    variants = {
        structural_hash(s.func) for s in RuleVariants([FixedMatmul()]).generate(func, CPU, 0)
    }
    db = ms.tune_tir(func, CPU, max_trials_global=8, space=_mixed_space(), builder=HashBuilder(),
                     runner=TableRunner(), seed_with_rules=False, strategy="evolutionary",
                     cost_model="random", num_trials_per_iter=8, progress=False)  # fmt: skip
    keys = [r.func_hash for r in db.get_all_tuning_records()]
    assert len(keys) == len(set(keys)) == 8
    assert variants <= set(keys)


class NoConfigArgument(cpu_rules.GeneralReduction):
    """A rule subclass whose constructor takes no config: no variants, still its schedule."""

    def __init__(self) -> None:
        super().__init__()


def test_a_rule_built_without_a_config_gives_its_own_schedule_only() -> None:
    func = _softmax()
    (sch,) = RuleVariants([NoConfigArgument()]).generate(func, CPU, 0)
    tc.testing.check_numeric(sch.func, func, rtol=1e-4, atol=1e-4)
