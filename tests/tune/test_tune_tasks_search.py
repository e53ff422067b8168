"""Task extraction, design spaces and the replay search strategies (no building or running)."""

from __future__ import annotations

import pytest
from tune_workloads import add_2d, add_one, matmul, tile_2d, tile_matmul

import tilecraft as tc
from tilecraft import tune as ms
from tilecraft.errors import TuneError
from tilecraft.frontend import nn
from tilecraft.schedule import Schedule
from tilecraft.tune.space import cpu_default_space, default_space

CPU = tc.Target("cpu")


class TutorialModel(nn.Module):
    """The MetaSchedule tutorial's model: Linear 784->256, ReLU, Linear 256->10 (no bias)."""

    def __init__(self) -> None:
        self.fc1 = nn.Linear(784, 256)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(256, 10, bias=False)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.fc2(self.relu(self.fc1(x)))


def _zero(model: nn.Module, shape: tuple[int, ...]) -> tc.IRModule:
    mod, _ = model.export({"forward": {"x": nn.spec.Tensor(shape, "float32")}})
    with CPU:
        return tc.graph.get_pipeline("zero")(mod)


def test_tutorial_model_gives_four_tasks_of_weight_one() -> None:
    tasks = ms.extract_tasks(_zero(TutorialModel(), (1, 784)), CPU)
    names = sorted(t.task_name for t in tasks)
    assert names == ["fused_matmul_add_relu", "matmul1", "transpose", "transpose1"]
    assert [t.weight for t in tasks] == [1, 1, 1, 1]
    for t in tasks:
        assert list(t.mod) == ["main"]
        assert "op_pattern" not in t.func.attrs
        assert [list(m) for m in t.dispatched] == [[t.task_name]]
        assert t.target is CPU


def test_weights_count_call_sites_and_equal_kernels_share_a_task() -> None:
    class Twice(nn.Module):
        def __init__(self) -> None:
            self.a = nn.Linear(16, 16, bias=False)
            self.b = nn.Linear(16, 16, bias=False)

        def forward(self, x: nn.Tensor) -> nn.Tensor:
            return self.b(self.a(x))

    # the pipeline keeps one "transpose" and one "matmul", each called twice
    tasks = {t.task_name: t for t in ms.extract_tasks(_zero(Twice(), (2, 16)), CPU)}
    assert {n: t.weight for n, t in tasks.items()} == {"transpose": 2, "matmul": 2}


def test_plain_modules_and_scheduled_functions() -> None:
    mod = tc.IRModule({"a": add_2d(), "b": add_2d(), "m": matmul()})
    tasks = ms.extract_tasks(mod)
    assert [(t.task_name, t.weight) for t in tasks] == [("a", 2), ("m", 1)]
    assert [list(m) for m in tasks[0].dispatched] == [["a"], ["b"]]
    done = mod.with_function("m", matmul().with_attr("tc.tuned", True))
    assert [t.task_name for t in ms.extract_tasks(done)] == ["a"]
    assert [t.task_name for t in ms.extract_tasks(add_2d())] == ["main"]
    with pytest.raises(TuneError, match="expected an IRModule"):
        ms.extract_tasks("mod")  # type: ignore[arg-type]


def test_schedule_fn_space_and_its_return_forms() -> None:
    space = ms.ScheduleFnSpace(tile_2d)
    (sch,) = space.generate(add_2d(), CPU, seed=1)
    assert sch.trace.sampling_indices()
    again = ms.ScheduleFnSpace(tile_2d).generate(add_2d(), CPU, seed=1)[0]
    assert tc.ir.structural_equal(sch.func, again.func)  # seeded

    def two(s: Schedule) -> list[Schedule]:
        other = s.copy()
        tile_2d(other)
        return [s, other]

    assert len(ms.ScheduleFnSpace(two).generate(add_2d(), CPU, 0)) == 2
    with pytest.raises(TuneError, match="expected None, a Schedule"):
        ms.ScheduleFnSpace(lambda s: 3).generate(add_2d(), CPU, 0)  # type: ignore[arg-type,return-value]


class FakeRule:
    """The shape of a tunable rule: ``apply(func, target, tunable)``."""

    name = "FakeTile"

    def __init__(self) -> None:
        self.calls: list[bool] = []

    def apply(self, func: tc.PrimFunc, target: tc.Target, tunable: bool) -> object:
        self.calls.append(tunable)
        sch = Schedule(func)  # unseeded: the space re-draws decisions from its own seed
        if len(sch.get_loops(sch.get_block("C"))) != 2:
            return "Decline: not a 2-d elementwise block"
        tile_2d(sch)
        return sch


def test_rule_space_redraws_decisions_reproducibly() -> None:
    rule = FakeRule()
    space = ms.RuleSpace(rule)
    a = space.generate(add_2d(), CPU, seed=5)[0]
    b = space.generate(add_2d(), CPU, seed=5)[0]
    assert rule.calls == [True, True]
    assert tc.ir.structural_equal(a.func, b.func)
    assert space.generate(matmul(), CPU, seed=0) == []  # the rule declined
    assert isinstance(ms.space.as_space(rule), ms.RuleSpace)
    assert isinstance(ms.space.as_space(tile_2d), ms.ScheduleFnSpace)


@pytest.mark.parametrize("strategy", [ms.ReplayTrace, ms.ReplayFunc])
def test_replay_strategies_are_seeded_and_never_repeat(strategy: type) -> None:
    def draw(seed: int, measured: tuple[str, ...] = ()) -> list[str]:
        s = strategy()
        records = [_fake_record(h) for h in measured]
        s.initialize(add_2d(), CPU, ms.ScheduleFnSpace(tile_2d), seed, records)
        return [tc.ir.structural_hash(c.func) for c in s.generate(10)]

    first = draw(0)
    assert len(first) == len(set(first)) == 10
    assert draw(0) == first  # fixed seed, fixed candidates
    resumed = draw(0, measured=tuple(first[:5]))
    assert not set(resumed) & set(first[:5])  # already measured: never proposed again


def test_spaces_run_dry() -> None:
    s = ms.ReplayTrace()
    s.initialize(add_2d(8, 8), CPU, ms.ScheduleFnSpace(tile_2d), 0)
    got = s.generate(100)
    assert len(got) == 16
    assert s.exhausted
    assert s.duplicates > 0


def _fake_record(func_hash: str) -> ms.TuningRecord:
    wl = ms.Workload.create(add_2d(), CPU)
    return ms.TuningRecord(wl, Schedule(add_2d()).trace, (1.0,), "cpu", func_hash=func_hash)


def test_default_space_schedules_every_kernel_of_a_model() -> None:
    mod = _zero(TutorialModel(), (1, 784))
    space = default_space(CPU)
    for task in ms.extract_tasks(mod, CPU):
        for sch in space.generate(task.func, CPU, seed=3):  # rfactor forks a GEMV's sketches
            assert len(sch.trace) > 3
            tc.testing.check_numeric(sch.func, task.func, rtol=1e-4, atol=1e-4)
    assert isinstance(default_space(tc.Target("cuda -arch=sm_80")), ms.space.UnionSpace)
    sch = Schedule(matmul())
    cpu_default_space(sch)
    kinds = [i.kind for i in sch.trace]
    assert kinds.count("sample_perfect_tile") == 3
    assert "parallel" in kinds
    assert "vectorize" in kinds


def test_a_space_that_never_applies_warns() -> None:
    # tile_2d asks for block "C"; add_one has only "B": every draw is a ScheduleError
    with pytest.warns(UserWarning, match="design space gives no new candidate .*get_block"):
        db = ms.tune_tir(add_one(), CPU, max_trials_global=4, space=tile_2d, seed_with_rules=False)
    assert len(db) == 0
    # with the rules' schedule measured first, it is the one record, and the warning stays
    with pytest.warns(UserWarning, match="design space gives no new candidate .*get_block"):
        db = ms.tune_tir(add_one(), CPU, max_trials_global=4, space=tile_2d)
    (record,) = db.get_all_tuning_records()
    assert record.ok


def test_tile_matmul_keeps_the_epilogue() -> None:
    sch = Schedule(matmul(relu=True), seed=0)
    tile_matmul(sch)
    tc.testing.check_numeric(sch.func, matmul(relu=True), rtol=1e-4, atol=1e-4)


def test_a_module_straight_from_export_is_refused_naming_the_pipeline() -> None:
    mod, _ = TutorialModel().export({"forward": {"x": nn.spec.Tensor((1, 784), "float32")}})
    assert not list(mod.prim_funcs())  # graph functions calling operators only
    with pytest.raises(TuneError, match=r"extract_tasks: the module has no PrimFuncs yet.*"
                       r'add, matmul, permute_dims, relu.*get_pipeline\("zero"\)'):  # fmt: skip
        ms.extract_tasks(mod, CPU)


def test_tune_tasks_warns_when_there_is_nothing_to_tune_and_refuses_a_module() -> None:
    db = ms.database.MemoryDatabase()
    with pytest.warns(UserWarning, match=r'tune_tasks: no tasks to tune.*get_pipeline\("zero"\)'):
        out = ms.tune_tasks([], CPU, max_trials_global=1, database=db)
    assert out is db
    assert len(db) == 0
    with pytest.raises(TuneError, match=r"tune_tasks: expected the tasks of a module, got a "
                       r"IRModule; pass extract_tasks\(mod, target\)"):  # fmt: skip
        ms.tune_tasks(_zero(TutorialModel(), (1, 784)), CPU, max_trials_global=1)  # type: ignore[arg-type]
