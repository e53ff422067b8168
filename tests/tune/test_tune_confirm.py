"""Confirmation: the fastest functions and the rules' schedule measured again side by side, so
one lucky measurement on a loaded machine does not pick a schedule slower than the rules."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from fake_workers import HashBuilder, TableRunner
from tune_workloads import matmul, tile_matmul

import tilecraft as tc
from tilecraft import tune as ms
from tilecraft.errors import TuneError
from tilecraft.ir import structural_hash
from tilecraft.rules import cpu as cpu_rules
from tilecraft.rules import try_rules
from tilecraft.tune._confirm import is_confirmation

CPU = tc.Target("cpu -mcpu=x86-64-v3")


def _rules_hash(func: tc.PrimFunc) -> str:
    outcome = try_rules(func, cpu_rules.default_rules(), CPU)
    assert outcome.schedule is not None
    return structural_hash(outcome.schedule.func)


class LuckyRunner(TableRunner):
    """The rules' schedule always 1 ms; every other function 2 ms, except the first
    measurement of the first of them, which comes out 0.5 ms (a quiet moment)."""

    def __init__(self, rules: str) -> None:
        super().__init__({rules: 1e-3}, default=2e-3)
        self.lucky: str | None = None

    def run(self, inputs: Sequence[ms.RunnerInput]) -> list[ms.RunnerResult]:
        out = []
        for inp, res in zip(inputs, super().run(inputs), strict=True):
            key = str(inp.artifact)
            if self.lucky is None and key not in self.table:
                self.lucky = key
                res = ms.RunnerResult((0.5e-3,))
            out.append(res)
        return out


def _tune(func: tc.PrimFunc, runner: ms.Runner, confirm_top: int, **kw: object) -> ms.Database:
    return ms.tune_tir(func, CPU, max_trials_global=6, space=tile_matmul, builder=HashBuilder(),
                       runner=runner, progress=False, confirm_top=confirm_top,
                       **kw)  # type: ignore[arg-type]  # fmt: skip


def test_one_lucky_measurement_picks_a_slower_function_without_confirmation() -> None:
    func = matmul(32, 32, 32)
    runner = LuckyRunner(_rules_hash(func))
    best = _tune(func, runner, 0).lookup(func, CPU)
    assert best.schedule is not None
    assert structural_hash(best.schedule.func) == runner.lucky


def test_confirmation_measures_again_and_the_rules_schedule_wins() -> None:
    func = matmul(32, 32, 32)
    rules = _rules_hash(func)
    runner = LuckyRunner(rules)
    db = _tune(func, runner, 2)
    records = db.get_all_tuning_records()
    again = [r for r in records if is_confirmation(r)]
    # the two fastest (the lucky one, the rules') measured twice more each, in turn
    assert [r.func_hash for r in again] == [runner.lucky, rules, runner.lucky, rules]
    assert len(records) - len(again) == 6  # confirmations are not trials
    best = db.lookup(func, CPU)
    assert best.schedule is not None
    assert structural_hash(best.schedule.func) == rules
    assert best.record is not None
    assert best.record.mean_secs == pytest.approx(1e-3)


def test_confirmations_are_not_trials_on_a_rerun(tmp_path: Path) -> None:
    func = matmul(32, 32, 32)
    runner = LuckyRunner(_rules_hash(func))
    _tune(func, runner, 2, work_dir=tmp_path)
    ran = len(runner.ran)
    db = _tune(func, runner, 2, work_dir=tmp_path)
    assert len(runner.ran) == ran  # the budget was spent: nothing measured, nothing confirmed
    assert sum(not is_confirmation(r) for r in db.get_all_tuning_records()) == 6
    with pytest.raises(TuneError, match="confirm_top"):
        _tune(func, runner, -1)
