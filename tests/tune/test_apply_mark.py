"""ApplyDatabase, the default rules and task extraction read and write one "scheduled" mark.

A function scheduled by any pass (or by hand) is left alone by every other pass that
schedules, in either order: the first to schedule a function keeps it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tune_workloads import add_2d, matmul, tile_2d

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft import tune as ms
from tilecraft.ir import PrimFunc, mark_scheduled, scheduled_by, structural_equal
from tilecraft.tune.database.workload import WorkloadKey

CPU = tc.Target("cpu")


def _tuned_database(work_dir: Path) -> ms.JSONDatabase:
    """A JSON database on disk with one measured record for ``add_2d``: its loops tiled."""
    db = ms.JSONDatabase(work_dir)
    wl = db.commit_workload(add_2d(), CPU)
    sch = tc.Schedule(add_2d(), seed=0)
    tile_2d(sch)
    args = ms.args_info(add_2d())
    db.commit_tuning_record(ms.TuningRecord(wl, sch.trace, (1e-3,), "cpu", args))
    return db


def _module() -> tc.IRModule:
    return tc.IRModule({"add": add_2d(), "mm": matmul()})


def _strip_mark(func: PrimFunc) -> PrimFunc:
    keep = {k: v for k, v in func.attrs.items() if k not in ("tc.scheduled", "tc.tuned")}
    return func.update(attrs=tc.ir.Attrs(keep))


def test_database_then_rules_leaves_the_tuned_function_as_the_database_made_it(
    tmp_path: Path,
) -> None:
    _tuned_database(tmp_path)
    with CPU:
        applied = ms.ApplyDatabase(work_dir=tmp_path)
        tuned = applied(_module())
        assert list(applied.report.matched) == ["add"]
        out = dl.ApplyDefaultSchedule(*dl.cpu.default_rules())(tuned)
    assert scheduled_by(tuned["add"]) == "database"  # type: ignore[arg-type]
    assert out["add"] is tuned["add"]
    assert structural_equal(out["add"], tuned["add"])
    assert scheduled_by(out["add"]) == "database"  # type: ignore[arg-type]
    # the rules did run: the function without records was scheduled by one of them
    assert (scheduled_by(out["mm"]) or "").startswith("rule:")  # type: ignore[arg-type]
    # and without the mark the rules would have scheduled the tuned function again
    with CPU:
        bare = tc.IRModule({"add": _strip_mark(tuned["add"])})  # type: ignore[arg-type]
        again = dl.ApplyDefaultSchedule(*dl.cpu.default_rules())(bare)
    assert not structural_equal(again["add"], bare["add"])


def test_rules_then_database_leaves_the_rule_schedule(tmp_path: Path) -> None:
    _tuned_database(tmp_path)
    with CPU:
        ruled = dl.ApplyDefaultSchedule(*dl.cpu.default_rules())(_module())
        applied = ms.ApplyDatabase(work_dir=tmp_path)
        out = applied(ruled)
    by = scheduled_by(ruled["add"])  # type: ignore[arg-type]
    assert by is not None
    assert by.startswith("rule:")
    assert ruled["add"].attrs["tc.schedule_rule"] == by.removeprefix("rule:")
    assert out["add"] is ruled["add"]
    assert applied.report.missed["add"] == "already scheduled"
    assert not applied.report.matched


@pytest.mark.parametrize("by", ["hand", "dispatch:mylib", "rule:Mine", "database"])
def test_a_marked_function_is_left_alone_by_every_pass(tmp_path: Path, by: str) -> None:
    _tuned_database(tmp_path)
    mod = tc.IRModule({"add": mark_scheduled(add_2d(), by), "mm": matmul()})
    with CPU:
        from_db = ms.ApplyDatabase(work_dir=tmp_path)(mod)
        from_rules = dl.ApplyDefaultSchedule(*dl.cpu.default_rules())(mod)
    assert from_db["add"] is mod["add"]
    assert from_rules["add"] is mod["add"]
    assert [t.task_name for t in ms.extract_tasks(mod, CPU)] == ["mm"]
    assert dl.scheduled_reason(mod["add"]) == f"tc.scheduled = {by!r}"  # type: ignore[arg-type]


def test_extract_tasks_skips_what_a_pass_scheduled(tmp_path: Path) -> None:
    _tuned_database(tmp_path)
    with CPU:
        tuned = ms.ApplyDatabase(work_dir=tmp_path)(_module())
    assert [t.task_name for t in ms.extract_tasks(tuned, CPU)] == ["mm"]
    with CPU:
        ruled = dl.ApplyDefaultSchedule(*dl.cpu.default_rules())(_module())
    assert ms.extract_tasks(ruled, CPU) == []


def test_the_workload_key_ignores_the_mark() -> None:
    func = add_2d()
    for by in ("hand", "database", "rule:Injective", "dispatch:mylib"):
        assert WorkloadKey.of(mark_scheduled(func, by), CPU) == WorkloadKey.of(func, CPU)


def test_a_rule_whose_name_cannot_be_a_mark_is_refused_early() -> None:
    @dl.ScheduleRule.from_callable("two words")
    def rule(func: PrimFunc, target: tc.Target, tunable: bool) -> None:
        return None

    with pytest.raises(dl.RuleError, match="unusable name"):
        dl.ApplyDefaultSchedule(rule)
