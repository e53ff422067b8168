"""EvolutionarySearch: seeded and deterministic, cost-model guided, never repeats a candidate,
drops and counts what postprocessors refuse, and survives failing candidates."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from tune_workloads import PoisonBuilder, matmul

import tilecraft as tc
from tilecraft import tune as ms
from tilecraft.errors import TuneError
from tilecraft.schedule import Schedule
from tilecraft.tune.postproc import Postproc
from tilecraft.tune.search import EvolutionarySearch, EvolutionaryTask
from tilecraft.tune.space import cpu_default_space

CPU = tc.Target("cpu -mcpu=x86-64-v3")
SPACE = ms.ScheduleFnSpace(cpu_default_space)


def _fake_secs(key: str) -> float:
    """A deterministic 'measurement' of a candidate."""
    return 1e-3 * (1.0 + int(key[:6], 16) / float(1 << 24))


def _records(task: EvolutionaryTask, cands: Sequence[Schedule]) -> list[ms.TuningRecord]:
    wl = ms.Workload.create(task.task_func, CPU)
    out = []
    for sch in cands:
        key = tc.ir.structural_hash(sch.func)
        out.append(ms.TuningRecord(wl, sch.trace, (_fake_secs(key),), str(CPU), func_hash=key))
    return out


def _search(seed: int, model: str) -> tuple[list[str], EvolutionaryTask]:
    config = EvolutionarySearch(population_size=12, num_generations=2, cost_model=model)
    task = config.start(matmul(32, 32, 32), CPU, SPACE, seed)
    keys: list[str] = []
    for _ in range(3):
        cands = task.generate(6)
        task.notify(cands, _records(task, cands))
        keys += [tc.ir.structural_hash(c.func) for c in cands]
    return keys, task


def test_seeded_search_is_deterministic_and_never_repeats() -> None:
    pytest.importorskip("xgboost")
    first, task = _search(3, "xgb")
    assert len(first) == len(set(first)) == 18
    assert _search(3, "xgb")[0] == first
    assert task.model.trained_on == 18  # retrained as measurements came in
    assert len(task.best) == 18
    assert _search(4, "xgb")[0] != first


def test_started_task_is_whole_and_the_config_is_reusable() -> None:
    config = EvolutionarySearch(population_size=4, num_generations=1, cost_model="random")
    with pytest.raises(TuneError, match="start"):
        config.generate(1)
    a = config.start(matmul(16, 16, 16), CPU, SPACE, 0)
    b = config.start(matmul(16, 16, 16), CPU, SPACE, 0)
    assert a is not b
    assert a.sketches
    assert a.measured == set()
    assert [tc.ir.structural_hash(s.func) for s in a.generate(3)] == [
        tc.ir.structural_hash(s.func) for s in b.generate(3)
    ]
    with pytest.raises(TuneError, match="eps_greedy"):
        EvolutionarySearch(eps_greedy=2.0)
    oracle = EvolutionarySearch(cost_model="oracle")
    with pytest.raises(TuneError, match="cost_model"):
        oracle.start(matmul(16, 16, 16), CPU, SPACE, 0)


def test_measured_records_seed_the_population() -> None:
    config = EvolutionarySearch(population_size=10, num_generations=1, cost_model="random")
    first = config.start(matmul(32, 32, 32), CPU, SPACE, 0)
    cands = first.generate(5)
    records = _records(first, cands)
    resumed = config.start(matmul(32, 32, 32), CPU, SPACE, 0, records)
    assert len(resumed.best) == 5
    assert resumed.measured == {r.func_hash for r in records}
    fresh = {tc.ir.structural_hash(s.func) for s in resumed.generate(5)}
    assert not fresh & {r.func_hash for r in records}  # nothing measured is proposed again


class _Refuse(Postproc):
    name = "refuse_everything"

    def apply(self, sch: Schedule) -> bool:
        del sch
        return False


def test_postprocessor_refusals_are_dropped_and_counted() -> None:
    config = EvolutionarySearch(
        population_size=4, num_generations=1, cost_model="random", postprocs=[_Refuse()]
    )
    task = config.start(matmul(16, 16, 16), CPU, SPACE, 0)
    assert task.generate(3) == []
    assert task.exhausted
    assert task.maker.dropped["refuse_everything"] > 0
    assert "refuse_everything" in (task.last_error or "")


def test_tuning_with_a_failing_candidate_records_it_and_goes_on() -> None:
    builder = PoisonBuilder(ms.LocalBuilder(max_workers=1), lambda i: "exit" if i == 1 else None)
    db = ms.tune_tir(
        matmul(16, 16, 16),
        CPU,
        max_trials_global=6,
        num_trials_per_iter=3,
        strategy=lambda: EvolutionarySearch(
            population_size=6, num_generations=1, cost_model="random"
        ),
        builder=builder,
        runner=ms.LocalRunner(number=1, repeat=1),
        seed=0,
    )
    records = db.get_all_tuning_records()
    assert len(records) == 6
    assert len({r.func_hash for r in records}) == 6
    failed = [r for r in records if not r.ok]
    assert len(failed) == 1
    assert builder.poisoned == {1: "exit"}
    assert all(r.ok for r in records[2:])


@pytest.mark.parametrize("strategy", [ms.ReplayTrace, ms.ReplayFunc])
def test_replay_strategies_start_whole_copies(strategy: type) -> None:
    config = strategy()
    started = config.start(matmul(16, 16, 16), CPU, SPACE, 0)
    assert started is not config
    assert config.func is None  # the configured strategy is left as it was
    assert started.func is not None
    assert len(started.generate(2)) == 2


def test_a_candidate_measured_outside_the_search_is_learned_and_seeds() -> None:
    """The tuning loop measures the rules' schedule first and passes its record on."""
    config = EvolutionarySearch(population_size=6, num_generations=1, cost_model="random")
    task = config.start(matmul(32, 32, 32), CPU, SPACE, 0)
    outside = Schedule(matmul(32, 32, 32))
    i, _, _ = outside.get_loops(outside.get_block("C"))
    outside.parallel(i)
    (record,) = _records(task, [outside])
    task.measured.add(record.func_hash)
    task.notify([outside], [record])
    assert len(task.best) == 1
    assert tc.ir.structural_equal(_replay(task.best[0][1]), outside.func)
    assert record.func_hash not in {tc.ir.structural_hash(s.func) for s in task.generate(4)}


def _replay(trace: tc.schedule.Trace) -> tc.ir.PrimFunc:
    sch = Schedule(matmul(32, 32, 32))
    trace.apply_to_schedule(sch)
    return sch.func


class CountingModel(ms.cost_model.RandomModel):
    """Random scores, counting how many programs were scored."""

    def __init__(self) -> None:
        super().__init__(0)
        self.scored = 0

    def predict(self, features: Sequence[np.ndarray]) -> np.ndarray:
        self.scored += len(features)
        return super().predict(features)


def test_the_first_round_of_an_uninformed_model_draws_only_what_it_proposes() -> None:
    # nothing measured, random scores: generations would mutate random samples into other
    # random samples at ~0.1 s a candidate (matmul 512^3); the round draws `count` instead
    config = EvolutionarySearch(population_size=12, num_generations=2, cost_model=CountingModel())
    task = config.start(matmul(32, 32, 32), CPU, SPACE, 0)
    made = len(task.maker._made)
    cands = task.generate(4)
    assert len(cands) == 4
    assert len(task.maker._made) - made <= 4 + 1  # the proposals (and an eps-greedy draw)
    assert task.model.scored <= 4
    # once something is measured, the generations run again
    task.notify(cands, _records(task, cands))
    assert len(task.generate(4)) == 4
    assert len(task.maker._made) - made > 12


def test_models_say_whether_their_scores_are_informed() -> None:
    assert not ms.cost_model.RandomModel().informed
    pytest.importorskip("xgboost")
    model = ms.cost_model.XGBModel(min_train=2)
    assert not model.informed
    feats = [np.ones((1, ms.features.NUM_FEATURES), np.float32) * i for i in range(1, 3)]
    model.update("task", feats, [1e-3, 2e-3])
    assert model.informed
