"""The rule contract: from_callable, target availability, Decline."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft.ir import PrimFunc


def _func() -> PrimFunc:
    a = tc.te.placeholder((8,), "float32", name="A")
    return tc.te.create_prim_func([a, tc.te.compute((8,), lambda i: a[i] + 1.0, name="B")])


def test_from_callable_makes_a_named_rule_instance() -> None:
    @dl.ScheduleRule.from_callable("SplitAll")
    def split_all(func: PrimFunc, target: tc.Target, tunable: bool) -> tc.Schedule:
        sch = tc.Schedule(func)
        (i,) = sch.get_loops(sch.get_block("B"))
        sch.split(i, factors=[None, 4])
        return sch

    assert isinstance(split_all, dl.ScheduleRule)
    assert split_all.name == "SplitAll"
    out = split_all.apply(_func(), tc.Target("cpu"), False)
    assert isinstance(out, tc.Schedule)
    assert len(out.get_loops(out.get_block("B"))) == 2
    assert split_all.is_target_available(tc.Target("cuda"))


def test_from_callable_target_kinds_and_decline() -> None:
    @dl.ScheduleRule.from_callable("OnlyCPU", target_kinds=("cpu",))
    def only_cpu(func: PrimFunc, target: tc.Target, tunable: bool) -> dl.Decline:
        return dl.Decline("nothing to do")

    assert only_cpu.is_target_available(tc.Target("cpu"))
    assert not only_cpu.is_target_available(tc.Target("cuda -arch=sm_80"))
    result = only_cpu.apply(_func(), tc.Target("cpu"), False)
    assert isinstance(result, dl.Decline)
    assert str(result) == "nothing to do"


def test_cpu_and_gpu_rule_targets() -> None:
    class Mine(dl.CPURule):
        pass

    class Theirs(dl.GPURule):
        pass

    cpu, gpu = tc.Target("cpu"), tc.Target("cuda -arch=sm_90")
    assert Mine().name == "Mine"
    assert Mine().is_target_available(cpu)
    assert not Mine().is_target_available(gpu)
    assert Theirs().is_target_available(gpu)
    assert not Theirs().is_target_available(cpu)


# -- the template: checks and config resolution before the rule's own schedule -----------------
@dataclass(frozen=True)
class _Numbers:
    width: int

    @classmethod
    def for_target(cls, target: tc.Target) -> _Numbers:
        return cls(width=target.num_cores * 100)


class _Recorder(dl.CPURule):
    Config = _Numbers

    def __init__(self, config: _Numbers | None = None) -> None:
        super().__init__(config)
        self.calls: list[tuple[str, _Numbers, bool]] = []

    def schedule(
        self, func: PrimFunc, target: tc.Target, config: _Numbers, tunable: bool
    ) -> tc.Schedule:
        self.calls.append((func.name, config, tunable))
        return tc.Schedule(func)


def test_the_template_resolves_the_config_per_target_unless_given() -> None:
    cpu = tc.Target("cpu")
    rule = _Recorder()
    assert isinstance(rule.apply(_func(), cpu, True), tc.Schedule)
    assert rule.calls == [("main", _Numbers(width=cpu.num_cores * 100), True)]
    fixed = _Recorder(_Numbers(width=7))
    fixed.apply(_func(), cpu)
    assert fixed.calls == [("main", _Numbers(width=7), False)]
    assert fixed.config_for(cpu) == _Numbers(width=7)


def test_the_template_declines_before_the_rule_runs() -> None:
    rule = _Recorder()
    cpu = tc.Target("cpu")
    cases = {
        "not a PrimFunc: str": rule.apply("main", cpu),  # type: ignore[arg-type]
        "a CPU rule; the target is cuda": rule.apply(_func(), tc.Target("cuda -arch=sm_80")),
        "already scheduled: marked tc.scheduled = 'hand'": rule.apply(
            tc.ir.mark_scheduled(_func(), "hand"), cpu
        ),
    }
    sch = tc.Schedule(_func())
    sch.parallel(sch.get_loops(sch.get_block("B"))[0])
    cases["already scheduled: loop"] = rule.apply(sch.func, cpu)
    for reason, got in cases.items():
        assert isinstance(got, dl.Decline), reason
        assert got.reason.startswith(reason), (reason, got.reason)
    assert rule.calls == []


def test_already_scheduled_names_the_mark_or_the_loop() -> None:
    assert dl.already_scheduled(_func()) is None
    marked = tc.ir.mark_scheduled(_func(), "database")
    assert dl.already_scheduled(marked) == "marked tc.scheduled = 'database'"
    sch = tc.Schedule(_func())
    sch.vectorize(sch.get_loops(sch.get_block("B"))[0])
    assert dl.already_scheduled(sch.func) == "loop i is not serial"


def test_every_cpu_rule_leaves_a_marked_function_alone() -> None:
    marked = tc.ir.mark_scheduled(_func(), "dispatch:mylib")
    for rule in dl.cpu.default_rules():
        got = rule.apply(marked, tc.Target("cpu"), False)
        if rule.name == "Fallback":  # Fallback returns it unchanged, with an empty trace
            assert isinstance(got, tc.Schedule)
            assert got.func is marked or tc.ir.structural_equal(got.func, marked)
            assert len(got.trace) == 0
        else:
            assert isinstance(got, dl.Decline)
            assert got.reason == "already scheduled: marked tc.scheduled = 'dispatch:mylib'"


def test_a_rule_without_schedule_says_so() -> None:
    class Empty(dl.ScheduleRule):
        pass

    with pytest.raises(NotImplementedError, match=r"Empty\.schedule"):
        Empty().apply(_func(), tc.Target("cpu"))


def test_a_config_of_another_rule_is_refused() -> None:
    with pytest.raises(TypeError, match=r"GEMV: argument 'config': expected a GEMVConfig"):
        dl.cpu.GEMV(dl.cpu.MatmulConfig())  # type: ignore[arg-type]
    assert dl.cpu.GEMV(dl.cpu.GEMVConfig()).config == dl.cpu.GEMVConfig()
