"""The rule contract: from_callable, target availability, Decline."""

from __future__ import annotations

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
