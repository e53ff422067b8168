"""The rules' schedule as first candidate, task schedulers and the shared trial budget."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import pytest
from fake_workers import HashBuilder, TableRunner
from tune_workloads import PoisonBuilder, add_2d, add_one, matmul, tile_1d, tile_matmul

import tilecraft as tc
from tilecraft import tune as ms
from tilecraft.errors import TuneError
from tilecraft.ir import structural_hash
from tilecraft.rules import cpu as cpu_rules
from tilecraft.rules import try_rules
from tilecraft.schedule import Schedule
from tilecraft.tune._defaults import rules_candidate
from tilecraft.tune.scheduler import GradientBased, RoundRobin, as_scheduler

CPU = tc.Target("cpu -mcpu=x86-64-v3")


def _rules_hash(func: tc.PrimFunc) -> str:
    outcome = try_rules(func, cpu_rules.default_rules(), CPU)
    assert outcome.schedule is not None
    return structural_hash(outcome.schedule.func)


def _order(db: ms.Database) -> list[str]:
    """Function hashes of the records, in the order they were committed."""
    return [r.func_hash for r in db.get_all_tuning_records()]


# -- the defaults are a candidate ------------------------------------------------------------
def slow_matmul(sch: Schedule) -> None:
    """A bad space: the reduction outermost, sampled tiles, nothing parallel or vectorized."""
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=8))
    sch.reorder(k, j, i0, i1)


def test_the_rules_schedule_is_measured_first_and_wins_over_a_bad_space() -> None:
    func = matmul(32, 32, 32)
    rules = _rules_hash(func)
    # the runner makes every candidate of the space slower than the rules' schedule
    runner = TableRunner({rules: 0.5e-3})
    db = ms.tune_tir(func, CPU, max_trials_global=5, space=slow_matmul, builder=HashBuilder(),
                     runner=runner, progress=False)  # fmt: skip
    order = _order(db)
    assert order[0] == rules
    assert len(order) == 5
    assert len(set(order)) == 5
    best = db.lookup(func, CPU)
    assert best.schedule is not None
    assert structural_hash(best.schedule.func) == rules


def test_bad_candidates_of_a_real_run_leave_the_rules_schedule_best() -> None:
    # every candidate after the first computes a wrong value (the builder poisons it): only
    # the rules' schedule, measured first, is a valid record
    func = add_one(256)
    builder = PoisonBuilder(ms.LocalBuilder(max_workers=1), lambda i: None if i == 0 else "wrong")
    with builder.inner:
        db = ms.tune_tir(func, CPU, max_trials_global=3, space=tile_1d, builder=builder,
                         progress=False)  # fmt: skip
    recs = db.get_all_tuning_records()
    assert len(recs) == 3
    assert [r.func_hash for r in recs if r.ok] == [_rules_hash(func)]
    assert sum(not r.ok for r in recs) == 2


def test_seed_with_rules_false_leaves_the_space_alone() -> None:
    func = matmul(32, 32, 32)
    db = ms.tune_tir(func, CPU, max_trials_global=4, space=tile_matmul, builder=HashBuilder(),
                     runner=TableRunner(), seed_with_rules=False, progress=False)  # fmt: skip
    assert _rules_hash(func) not in _order(db)


def test_a_rerun_does_not_measure_the_rules_schedule_again(tmp_path: object) -> None:
    func = matmul(32, 32, 32)
    kw = {"space": tile_matmul, "runner": TableRunner(), "progress": False, "work_dir": tmp_path}
    ms.tune_tir(func, CPU, max_trials_global=2, builder=HashBuilder(), **kw)
    db = ms.tune_tir(func, CPU, max_trials_global=4, builder=HashBuilder(), **kw)
    order = _order(db)
    assert len(order) == 4
    assert len(set(order)) == 4
    assert order.count(_rules_hash(func)) == 1


# -- schedulers ------------------------------------------------------------------------------
@dataclass
class View:
    weight: int = 1
    history: list[float] = field(default_factory=list)
    done: bool = False

    @property
    def trials(self) -> int:
        return len(self.history)


def test_round_robin_takes_turns_and_passes_over_done_tasks() -> None:
    tasks = [View(), View(), View()]
    rr = RoundRobin()
    assert [rr.next_task(tasks) for _ in range(4)] == [0, 1, 2, 0]
    tasks[1].done = True
    assert [rr.next_task(tasks) for _ in range(3)] == [2, 0, 2]


def test_gradient_visits_each_task_then_follows_the_weighted_gain() -> None:
    slow_heavy = View(weight=4, history=[8e-3, 8e-3, 8e-3])
    fast = View(weight=1, history=[1e-3, 1e-3, 1e-3])
    improving = View(weight=1, history=[9e-3, 5e-3, 2e-3, 1e-3])
    tasks = [fast, slow_heavy, improving]
    sched = GradientBased(alpha=0.5, window=2)
    assert [sched.next_task(tasks) for _ in range(3)] == [0, 1, 2]  # warm-up, in order
    # gains: fast 0.5*1e-3/3; slow_heavy 4*0.5*8e-3/3; improving 0.5*(4e-3/2) + 0.5*1e-3/4
    assert sched.gain(slow_heavy) == pytest.approx(4 * 0.5 * 8e-3 / 3)
    assert sched.gain(improving) == pytest.approx(0.5 * 2e-3 + 0.5 * 0.25e-3)
    assert sched.next_task(tasks) == 1
    slow_heavy.done = True
    assert sched.next_task(tasks) == 2
    # no success yet: first in line while it has had fewer trials than the window
    assert sched.gain(View(history=[math.inf])) == math.inf
    assert sched.gain(View(history=[math.inf] * 2)) == 0.0


def test_scheduler_names_and_bad_values() -> None:
    assert isinstance(as_scheduler("round-robin"), RoundRobin)
    assert isinstance(as_scheduler("gradient"), GradientBased)
    with pytest.raises(TuneError, match="task_scheduler: expected one of"):
        as_scheduler("fastest")
    with pytest.raises(TuneError, match="alpha must be in"):
        GradientBased(alpha=2.0)


# -- the global budget -----------------------------------------------------------------------
def _three() -> tc.IRModule:
    return tc.IRModule({"a": add_2d(8, 8), "b": add_2d(8, 16), "c": add_2d(16, 16)})


def _counts(db: ms.Database) -> Counter[tuple[int, ...]]:
    """Records per task, told apart by their first argument's shape."""
    return Counter(tuple(r.args_info[0].shape) for r in db.get_all_tuning_records())


@pytest.mark.parametrize("scheduler", ["round-robin", "gradient"])
def test_the_global_budget_is_shared_and_the_per_task_cap_holds(scheduler: str) -> None:
    builder = HashBuilder()
    db = ms.tune_tir(_three(), CPU, max_trials_global=7, max_trials_per_task=3,
                     num_trials_per_iter=1, space=tile_1d_2d, builder=builder,
                     runner=TableRunner(), task_scheduler=scheduler, progress=False)  # fmt: skip
    counts = _counts(db)
    assert sum(counts.values()) == 7 == builder.built
    assert len(counts) == 3
    assert max(counts.values()) <= 3


@pytest.mark.parametrize("scheduler", ["round-robin", "gradient"])
def test_a_small_budget_reaches_every_task_before_one_takes_a_long_turn(scheduler: str) -> None:
    # 64 trials a turn, 7 in all: the first turn used to take all 7
    db = ms.tune_tir(_three(), CPU, max_trials_global=7, num_trials_per_iter=64,
                     space=tile_1d_2d, builder=HashBuilder(), runner=TableRunner(),
                     task_scheduler=scheduler, progress=False)  # fmt: skip
    counts = _counts(db)
    assert sum(counts.values()) == 7
    assert len(counts) == 3
    assert min(counts.values()) >= 2


def tile_1d_2d(sch: Schedule) -> None:
    """Split the two loops of block "C"."""
    i, j = sch.get_loops(sch.get_block("C"))
    sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=16))
    sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=16))


def test_tune_tir_pass_shares_one_budget_over_every_function() -> None:
    db = ms.MemoryDatabase()
    with CPU, db:
        out = ms.TuneTIR(max_trials_global=4, space=tile_1d_2d, builder=HashBuilder(),
                         runner=TableRunner(), progress=False)(_three())  # fmt: skip
    assert len(db) == 4  # not 4 per function
    assert out.script() == _three().script()


def test_a_rerun_spends_nothing_on_tasks_that_reached_their_budget(tmp_path: object) -> None:
    kw = {"work_dir": tmp_path, "space": tile_1d_2d, "runner": TableRunner(), "progress": False,
              "num_trials_per_iter": 2}  # fmt: skip
    ms.tune_tir(_three(), CPU, max_trials_global=6, max_trials_per_task=2,
                builder=HashBuilder(), **kw)  # fmt: skip
    again = HashBuilder()
    db = ms.tune_tir(_three(), CPU, max_trials_global=6, max_trials_per_task=2, builder=again,
                     **kw)  # fmt: skip
    assert again.built == 0
    assert len(db) == 6
    # a larger global budget, the same cap: every task already reached its cap
    more = HashBuilder()
    ms.tune_tir(_three(), CPU, max_trials_global=20, max_trials_per_task=2, builder=more, **kw)
    assert more.built == 0
    # a larger cap: only the new trials are spent
    db = ms.tune_tir(_three(), CPU, max_trials_global=20, max_trials_per_task=3, builder=more,
                     **kw)  # fmt: skip
    assert more.built == 3
    assert len(db) == 9


def test_the_same_seed_and_measurements_give_the_same_search() -> None:
    def run(seed: int) -> list[str]:
        db = ms.tune_tir(_three(), CPU, max_trials_global=9, num_trials_per_iter=2,
                         space=tile_1d_2d, builder=HashBuilder(), runner=TableRunner(),
                         seed=seed, progress=False)  # fmt: skip
        return _order(db)

    first = run(3)
    assert run(3) == first
    assert run(4) != first


def test_tune_irmod_positional_form_and_op_names(tmp_path: object) -> None:
    with CPU:
        ms.TuneIRMod(tmp_path, 3, ["b"], space=tile_1d_2d, builder=HashBuilder(),
                     runner=TableRunner(), progress=False)(_three())  # fmt: skip
    db = ms.JSONDatabase(tmp_path)
    assert _counts(db) == {(8, 16): 3}


def test_the_first_candidate_is_the_targets_own_rules_schedule() -> None:
    cpu = rules_candidate(add_one(64), CPU, "add_one")
    gpu = rules_candidate(add_one(64), tc.Target("cuda -arch=sm_90"), "add_one")
    assert isinstance(cpu, Schedule)
    assert isinstance(gpu, Schedule)
    assert not tc.ir.structural_equal(cpu.func, add_one(64))
    assert "threadIdx.x" in gpu.func.script()  # the GPU rules bound it to threads
    assert "threadIdx" not in cpu.func.script()


def test_a_function_no_rule_takes_starts_the_search_alone(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tilecraft.rules as rules_pkg

    monkeypatch.setattr(rules_pkg, "default_rules", lambda target: [])
    with caplog.at_level("INFO", logger="tilecraft.tune"):
        assert rules_candidate(add_one(64), CPU, "add_one") is None
    assert "task add_one: no default rule takes it" in caplog.text
