"""A record is only served for the target it was measured on: its own ``target`` is checked
against its workload's on load, on commit and on lookup (an edited or merged database once
handed CPU-measured schedules to CUDA lookups and the reverse)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from tune_workloads import add_2d, tile_2d

import tilecraft as tc
from tilecraft import tune as ms
from tilecraft.errors import DatabaseError
from tilecraft.tune.database import target_key
from tilecraft.tune.database.json_db import RECORD_FILE
from tilecraft.tune.database.workload import target_conflict

CPU = tc.Target("cpu")
SM80 = tc.Target("cuda -arch=sm_80")


def _record(target: tc.Target, secs: float = 1e-3, seed: int = 0) -> ms.TuningRecord:
    func = add_2d()
    sch = tc.Schedule(func, seed=seed)
    tile_2d(sch)
    wl = ms.Workload.create(func, target)
    return ms.TuningRecord(wl, sch.trace, (secs,), str(target), ms.args_info(func))


def _json_db_with_record_target(tmp_path: Path, workload: tc.Target, measured_on: str) -> None:
    """A JSON database whose one record of ``workload``'s key says ``measured_on``."""
    db = ms.JSONDatabase(tmp_path)
    db.commit_tuning_record(_record(workload))
    line = json.loads((tmp_path / RECORD_FILE).read_text())
    (tmp_path / RECORD_FILE).write_text(json.dumps({**line, "target": measured_on}) + "\n")


@pytest.mark.parametrize(
    ("workload", "measured_on"),
    [(SM80, "cpu"), (CPU, "cuda -arch=sm_80"), (SM80, "cuda -arch=sm_90"), (CPU, "tpu")],
    ids=["cpu-record-for-cuda", "cuda-record-for-cpu", "other-arch", "unreadable"],
)
def test_json_database_refuses_a_record_of_another_target(
    tmp_path: Path, workload: tc.Target, measured_on: str
) -> None:
    _json_db_with_record_target(tmp_path, workload, measured_on)
    with pytest.warns(UserWarning, match=rf"{RECORD_FILE}:1: skipped .*another target"):
        db = ms.JSONDatabase(tmp_path)
    assert len(db) == 0
    assert db.lookup(add_2d(), workload).schedule is None
    mod = tc.IRModule({"add": add_2d()})
    out = ms.ApplyDatabase(database=db, target=workload)(mod)
    assert "tc.tuned" not in out["add"].attrs


def test_the_warning_names_both_targets(tmp_path: Path) -> None:
    _json_db_with_record_target(tmp_path, SM80, "cpu")
    with pytest.warns(UserWarning, match="another target") as caught:
        ms.JSONDatabase(tmp_path)
    (message,) = [str(w.message) for w in caught]
    assert str(tmp_path / RECORD_FILE) + ":1" in message
    assert "measured on 'cpu'" in message
    assert "its workload is for 'cuda sm_80'" in message


def test_records_of_the_right_target_still_load(tmp_path: Path) -> None:
    db = ms.JSONDatabase(tmp_path)
    db.commit_tuning_record(_record(CPU))
    db.commit_tuning_record(_record(SM80))
    again = ms.JSONDatabase(tmp_path)
    assert len(again) == 2
    assert again.lookup(add_2d(), CPU).record is not None
    found = again.lookup(add_2d(), SM80).record
    assert found is not None
    assert found.target == str(SM80)


def test_sqlite_database_refuses_a_record_of_another_target(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    db = ms.SQLiteDatabase(path)
    db.commit_tuning_record(_record(SM80))
    db.close()
    with sqlite3.connect(path) as conn:
        (line,) = conn.execute("SELECT line FROM records").fetchone()
        conn.execute(
            "UPDATE records SET line = ?", (json.dumps({**json.loads(line), "target": "cpu"}),)
        )
    with pytest.warns(UserWarning, match=r"records row 1: skipped .*another target"):
        again = ms.SQLiteDatabase(path)
    assert again.lookup(add_2d(), SM80).schedule is None
    again.close()


def test_commit_refuses_a_record_of_another_target() -> None:
    rec = _record(SM80)
    wrong = ms.TuningRecord(rec.workload, rec.trace, rec.run_secs, "cpu", rec.args_info)
    db = ms.MemoryDatabase()
    with pytest.raises(DatabaseError, match=r"another target.*measured on 'cpu'"):
        db.commit_tuning_record(wrong)
    assert len(db) == 0


def test_lookup_never_serves_a_record_of_another_target() -> None:
    # a storage that hands out such a record anyway (here: indexed without the checks)
    rec = _record(SM80)
    memory = ms.MemoryDatabase()
    memory._index_workload(rec.workload.key.id, rec.workload)
    memory._index_record(ms.TuningRecord(rec.workload, rec.trace, (1e-3,), "cpu"))
    for db in (memory, ms.UnionDatabase(memory), ms.OrderedUnionDatabase(memory)):
        assert db.lookup(add_2d(), SM80).schedule is None
        assert db.query_tuning_record(add_2d(), SM80) is None
        mod = tc.IRModule({"add": add_2d()})
        assert "tc.tuned" not in ms.ApplyDatabase(database=db, target=SM80)(mod)["add"].attrs


def test_target_conflict() -> None:
    cpu_key, gpu_key = target_key(CPU), target_key(SM80)
    assert target_conflict("cpu", cpu_key) is None
    assert target_conflict(str(CPU), cpu_key) is None
    assert target_conflict(str(SM80), gpu_key) is None
    assert target_conflict("a100", gpu_key) is None  # the preset's arch is sm_80
    assert target_conflict("h100", gpu_key) is not None
    assert target_conflict("cpu", gpu_key) is not None
    assert target_conflict(str(SM80), cpu_key) is not None
