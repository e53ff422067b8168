"""PostOrderApply spaces of search rules: distinct valid candidates, replayable traces, the
write-cache and packing choices sampled and mutated, the evolutionary strategy by name, and
the cost model kept in work_dir."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from tune_workloads import matmul

import tilecraft as tc
from tilecraft import tune as ms
from tilecraft.errors import TuneError
from tilecraft.schedule import Schedule, Trace
from tilecraft.tune.mutator import MutateParallel, MutateTileCache, MutateUnroll
from tilecraft.tune.postproc import apply_postprocs, default_postprocs, keys
from tilecraft.tune.space import (
    AddRFactor,
    AutoInline,
    MultiLevelTiling,
    PostOrderApply,
    RandomComputeLocation,
    default_space,
    search_rules_space,
)
from tilecraft.tune.space.post_order_apply import block_names

CPU = tc.Target("cpu -mcpu=x86-64-v3 -num-cores=2")


def _finished(func: tc.ir.PrimFunc, trace: Trace, seed: int = 0) -> Schedule:
    sch = Schedule(func, seed=seed)
    trace.apply_to_schedule(sch)
    assert apply_postprocs(sch, default_postprocs(CPU)) is None
    return sch


def _softmax(m: int = 8, n: int = 48) -> tc.ir.PrimFunc:
    x = tc.te.placeholder((m, n), "float32", name="x")
    return tc.te.create_prim_func([x, tc.topi.softmax(x, axis=-1)])


def _row_sum(m: int = 2, n: int = 256) -> tc.ir.PrimFunc:
    x = tc.te.placeholder((m, n), "float32", name="x")
    k = tc.te.reduce_axis((0, n), name="k")
    y = tc.te.compute((m,), lambda i: tc.te.sum(x[i, k], axis=k), name="y")
    return tc.te.create_prim_func([x, y])


def _sketch_traces(func: tc.ir.PrimFunc, seeds: range) -> list[Trace]:
    space = search_rules_space(CPU)
    return [s.trace for seed in seeds for s in space.generate(func, CPU, seed)]


def test_matmul_space_gives_distinct_valid_candidates() -> None:
    func = matmul(32, 32, 32, relu=True)
    keys_seen = set()
    for trace in _sketch_traces(func, range(4)):
        sch = _finished(func, trace)
        keys_seen.add(tc.ir.structural_hash(sch.func))
        tc.testing.check_numeric(sch.func, func, rtol=1e-4, atol=1e-4)
    assert len(keys_seen) == 4


def test_traces_replay_to_the_same_function() -> None:
    func = matmul(32, 32, 32)
    (sch,) = search_rules_space(CPU).generate(func, CPU, seed=4)
    again = Schedule(func)
    Trace.from_json(sch.trace.as_json()).apply_to_schedule(again)
    assert tc.ir.structural_equal(again.func, sch.func)


def test_cache_and_pack_choices_are_sampled_and_change_the_program() -> None:
    func = matmul(32, 32, 32)
    seen: dict[str, set[int]] = {keys.WRITE_CACHE: set(), keys.PACK: set()}
    for trace in _sketch_traces(func, range(12)):
        by_output = {id(i.outputs[0]): i for i in trace if i.kind == "sample_categorical"}
        for inst in trace:
            key = dict(inst.attrs).get("key")
            if inst.kind == "annotate" and key in seen:
                seen[key].add(by_output[id(inst.inputs[1])].decision)
    assert seen[keys.WRITE_CACHE] == {0, 1, 2, keys.REGISTER_TILE}
    assert seen[keys.PACK] == {0, 1, 2}
    (sch,) = search_rules_space(CPU).generate(func, CPU, seed=0)
    fixed = sch.trace
    for index in fixed.sampling_indices():
        if fixed[index].kind == "sample_categorical":
            fixed = fixed.with_decision(index, 0)
    plain = _finished(func, fixed)
    cached = fixed
    for index in fixed.sampling_indices()[-4:-2]:  # write cache and pack of block C
        cached = cached.with_decision(index, 2)
    rich = _finished(func, cached)
    kinds = [i.kind for i in rich.trace]
    assert "cache_read" in kinds
    assert "cache_write" in kinds or "set_scope" in kinds
    assert "cache_read" not in [i.kind for i in plain.trace]
    tc.testing.check_numeric(rich.func, func, rtol=1e-4, atol=1e-4)


def test_mutators_change_cache_parallel_and_unroll_samples() -> None:
    func = matmul(32, 32, 32)
    (sch,) = search_rules_space(CPU).generate(func, CPU, seed=1)
    rng = random.Random(0)
    for mutator in (MutateTileCache(), MutateParallel(), MutateUnroll()):
        new = mutator.apply(func, sch.trace, rng)
        assert new is not None, mutator
        changed = [i for i in new.sampling_indices() if new[i].decision != sch.trace[i].decision]
        assert len(changed) == 1
        out = _finished(func, new)
        tc.testing.check_numeric(out.func, func, rtol=1e-4, atol=1e-4)


def test_softmax_space_places_reductions_and_inlines() -> None:
    func = _softmax()
    kinds: set[str] = set()
    for trace in _sketch_traces(func, range(2)):
        kinds |= {i.kind for i in trace}
        sch = _finished(func, trace)
        tc.testing.check_numeric(sch.func, func, rtol=1e-4, atol=1e-4)
    assert {"sample_compute_location", "compute_at", "rfactor"} <= kinds


def test_elementwise_intermediates_are_inlined() -> None:
    a = tc.te.placeholder((16, 16), "float32", name="a")
    b = tc.te.compute((16, 16), lambda i, j: a[i, j] + 1.0, name="b")
    c = tc.te.compute((16, 16), lambda i, j: b[i, j] * 2.0, name="c")
    func = tc.te.create_prim_func([a, c])
    (sch,) = search_rules_space(CPU).generate(func, CPU, seed=0)
    kinds = [i.kind for i in sch.trace]
    assert "compute_inline" in kinds or "reverse_compute_inline" in kinds
    assert len(block_names(sch.func)) == 2  # one block left, and the root
    tc.testing.check_numeric(_finished(func, sch.trace).func, func)


def test_rfactor_forks_small_spatial_reductions() -> None:
    func = _row_sum()
    sketches = search_rules_space(CPU).generate(func, CPU, seed=0)
    assert len(sketches) == 3
    assert sum(any(i.kind == "rfactor" for i in s.trace) for s in sketches) == 2
    for sch in sketches:
        out = _finished(func, sch.trace)
        tc.testing.check_numeric(out.func, func, rtol=1e-4, atol=1e-4)


def test_rules_decline_what_they_do_not_handle() -> None:
    func = matmul(16, 16, 16)
    sch = Schedule(func)
    block = sch.get_block("C")
    assert AutoInline().apply(sch, block, CPU) == [sch]  # a reduction is never inlined
    assert not RandomComputeLocation().applies(sch, block)  # writes the output
    assert not AddRFactor().applies(sch, block, CPU)  # 256 spatial iterations
    assert MultiLevelTiling().applies(sch, block)
    with pytest.raises(TuneError, match="SearchRule"):
        PostOrderApply([object()])  # type: ignore[list-item]
    gpu_rules = default_space(tc.Target("cuda -arch=sm_90")).spaces[0].rules  # type: ignore[attr-defined]
    assert [r.name for r in gpu_rules] == [r.name for r in ms.space.gpu_search_rules()]


def test_evolutionary_by_name_shares_one_model_and_it_round_trips(tmp_path: Path) -> None:
    from tilecraft.tune.search import EvolutionarySearch
    from tilecraft.tune.tune import _cost_model, _strategy_factory

    model = ms.cost_model.RandomModel(3)
    factory = _strategy_factory("evolutionary", model)
    first, second = factory(), factory()
    assert isinstance(first, EvolutionarySearch)
    assert first.cost_model is model
    assert second.cost_model is model
    model.save(tmp_path / "cost_model")
    again = _cost_model(None, "evolutionary", tmp_path, seed=0)
    assert isinstance(again, ms.cost_model.RandomModel)
    assert again.seed == 3
    assert _cost_model(None, "replay-trace", tmp_path, seed=0) is None


@pytest.mark.slow
def test_tune_evolutionary_by_name_saves_and_reloads_the_model(tmp_path: Path) -> None:
    func = matmul(16, 16, 16)
    runner = ms.LocalRunner(number=1, repeat=1)
    db = ms.tune_tir(func, CPU, work_dir=tmp_path, max_trials_global=6, strategy="evolutionary",
                     runner=runner, num_trials_per_iter=4, progress=False)  # fmt: skip
    runner.close()
    assert len(db.get_all_tuning_records()) == 6
    saved = tmp_path / "cost_model" / "model.json"
    assert saved.exists()
    model = ms.cost_model.load_model(saved.parent)
    assert isinstance(model, ms.cost_model.CostModel)
    again = ms.tune_tir(func, CPU, work_dir=tmp_path, max_trials_global=8, strategy="evolutionary",
                        runner=ms.LocalRunner(number=1, repeat=1), num_trials_per_iter=4,
                        progress=False)  # fmt: skip
    assert len(again.get_all_tuning_records()) == 8  # resumed with the saved model
    sch = ms.compile_tir(db, func, CPU)
    assert sch is not None
    tc.testing.check_numeric(sch.func, func, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_one_model_object_is_shared_by_every_task() -> None:
    seen: list[str] = []

    class Spy(ms.cost_model.RandomModel):
        def update(self, group, features, secs):  # type: ignore[no-untyped-def]
            seen.append(group)

    a, b = matmul(16, 16, 16), matmul(16, 32, 16)
    tasks = ms.extract_tasks(tc.ir.IRModule({"a": a, "b": b}), CPU)
    runner = ms.LocalRunner(number=1, repeat=1)
    ms.tune_tasks(tasks, CPU, max_trials_global=4, num_trials_per_iter=2, runner=runner,
                  strategy="evolutionary", cost_model=Spy(), progress=False)  # fmt: skip
    runner.close()
    assert len(set(seen)) == 2
    with pytest.raises(TuneError, match="evolutionary"):
        ms.tune_tasks(tasks, CPU, max_trials_global=1, cost_model="random")


def test_numeric_reference_of_rfactor_sum() -> None:
    func = _row_sum()
    x = np.random.default_rng(0).random((2, 256), dtype=np.float32)
    for sch in search_rules_space(CPU).generate(func, CPU, seed=2):
        out = _finished(func, sch.trace)
        y = np.zeros(2, "float32")
        tc.build(out.mod, target=CPU)["main"](x, y)
        np.testing.assert_allclose(y, x.sum(axis=1), rtol=1e-4)
