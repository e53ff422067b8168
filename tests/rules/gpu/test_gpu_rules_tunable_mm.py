"""``tunable=True`` for the matmul family: Matmul (the SIMT k tile), GEMV (rows per block;
threads along the reduction of a strided matrix) and LowBatchGEMV (weight rows per block)
return their schedule with those Config numbers as ``sample_categorical`` instructions; the
tuner's re-draws (``RuleSpace`` with two seeds) give different schedules, each equal to the
unscheduled function under the race-checking emulator and replaying from its trace."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from test_gpu_gemv import gemv
from test_gpu_matmul import linear

import tilecraft as tc
from tilecraft.ir import PrimFunc, Var
from tilecraft.rules import ScheduleRule
from tilecraft.rules.gpu import GEMV, LowBatchGEMV, Matmul
from tilecraft.schedule.testing_utils import verify_trace_roundtrip
from tilecraft.tune.space import RuleSpace

SM80 = tc.Target("cuda -arch=sm_80")
CASES: dict[str, tuple[Callable[[], ScheduleRule], Callable[[], PrimFunc], dict[str, int]]] = {
    "matmul_simt": (Matmul, lambda: linear(32, 32, 64), {}),
    "gemv_rows": (GEMV, lambda: gemv(16, 64, weight_nk=True), {}),
    "gemv_columns": (GEMV, lambda: gemv(64, 64, weight_nk=False), {}),
    "low_batch_gemv": (LowBatchGEMV, lambda: linear(Var("n"), 16, 64, weight_nk=True), {"n": 3}),
}


def decisions(sch: tc.Schedule) -> list[object]:
    return [i.decision for i in sch.trace.insts if i.kind == "sample_categorical"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_two_seeds_give_different_valid_replayable_schedules(name: str) -> None:
    make_rule, make_func, sizes = CASES[name]
    func = make_func()
    own = make_rule().apply(func, SM80, True)
    assert isinstance(own, tc.Schedule), own
    assert decisions(own), "no sampling instruction in a tunable schedule"
    space = RuleSpace(make_rule())
    found: dict[str, tc.Schedule] = {}
    for seed in range(12):
        (sch,) = space.generate(func, SM80, seed)
        found.setdefault(sch.func.script(), sch)
        if len(found) == 2:
            break
    assert len(found) == 2, "every seed gave the same schedule"
    a, b = found.values()
    assert decisions(a) != decisions(b)
    for sch in (a, b):
        verify_trace_roundtrip(sch, func)
        tc.testing.check_numeric(
            sch.func, func, emulate_gpu="racecheck", target=SM80, shape_vars=sizes or None
        )


@pytest.mark.parametrize("name", sorted(CASES))
def test_not_tunable_has_no_sampling(name: str) -> None:
    make_rule, make_func, _ = CASES[name]
    sch = make_rule().apply(make_func(), SM80, False)
    assert isinstance(sch, tc.Schedule)
    assert not decisions(sch)
