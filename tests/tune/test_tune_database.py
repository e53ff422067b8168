"""Databases: keys, equality modes, JSON lines and SQLite storage, unions, robustness."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest
from tune_workloads import add_2d, matmul, tile_2d, tile_matmul

import tilecraft as tc
from tilecraft import tune as ms
from tilecraft.errors import DatabaseError, TuneError
from tilecraft.tune.database import ModuleEquality, anchor_block, target_key, workload_hash
from tilecraft.tune.database.json_db import RECORD_FILE, WORKLOAD_FILE

CPU = tc.Target("cpu")
GPU = tc.Target("cuda -arch=sm_80")
HERE = Path(__file__).parent


def _record(
    db: ms.Database,
    func: tc.PrimFunc,
    fn: object,
    secs: float | None,
    seed: int = 0,
    target: tc.Target = CPU,
) -> ms.TuningRecord:
    wl = db.commit_workload(func, target)
    sch = tc.Schedule(func, seed=seed)
    fn(sch)  # type: ignore[operator]
    rec = ms.TuningRecord(
        wl,
        sch.trace,
        None if secs is None else (secs, secs),
        str(target),
        ms.args_info(func),
        error=None if secs is not None else "boom",
        func_hash=tc.ir.structural_hash(sch.func),
    )
    db.commit_tuning_record(rec)
    return rec


def test_workload_key_parts() -> None:
    func = matmul()
    renamed = func.update(name="other").with_attr("op_pattern", 4)
    key = ms.Workload.create(func, CPU).key
    assert key == ms.Workload.create(renamed, CPU).key  # names and op_pattern do not matter
    assert key.target.startswith("cpu ")
    assert key.target == target_key(CPU)
    assert key.version == ms.database.FORMAT_VERSION
    assert ms.Workload.create(func, GPU).key != key
    assert ms.Workload.create(matmul(32, 32, 16), CPU).key.shash != key.shash
    assert target_key(GPU) == "cuda sm_80"


def test_equality_modes() -> None:
    plain, fused = matmul(), matmul(relu=True)
    anchor = ModuleEquality.ANCHOR_BLOCK
    assert workload_hash(plain, anchor) == workload_hash(fused, anchor)
    structural = ModuleEquality.STRUCTURAL
    assert workload_hash(plain, structural) != workload_hash(fused, structural)
    block = anchor_block(fused)
    assert block is not None
    assert block.name == "C"
    assert anchor_block(add_2d()) is not None
    # no constant arrays in tilecraft PrimFuncs: ignore-ndarray hashes like structural
    assert workload_hash(fused, ModuleEquality.IGNORE_NDARRAY) == workload_hash(
        fused, ModuleEquality.STRUCTURAL
    )
    with pytest.raises(TuneError, match="module_equality"):
        ModuleEquality.parse("exact")


def test_anchor_block_database_shares_records_between_fused_variants(tmp_path: Path) -> None:
    db = ms.JSONDatabase(tmp_path, module_equality="anchor-block")
    _record(db, matmul(), tile_matmul, 1e-3)
    found = db.lookup(matmul(relu=True), CPU)
    assert found.schedule is not None
    tc.testing.check_numeric(found.schedule.func, matmul(relu=True), rtol=1e-4, atol=1e-4)
    strict = ms.JSONDatabase(tmp_path)  # structural: the anchor records are another key
    assert strict.lookup(matmul(relu=True), CPU).schedule is None


def test_json_database_round_trip_and_top_k(tmp_path: Path) -> None:
    func = add_2d()
    db = ms.JSONDatabase(tmp_path)
    for seed, secs in enumerate([3e-3, 1e-3, None, 2e-3]):
        _record(db, func, tile_2d, secs, seed)
    again = ms.JSONDatabase(tmp_path)
    assert len(again) == 4
    wl = again.commit_workload(func, CPU)
    assert again.has_workload(func, CPU)
    assert not again.has_workload(func, GPU)
    top = again.get_top_k(wl, 2)
    assert [r.mean_secs for r in top] == [1e-3, 2e-3]
    assert [r.ok for r in again.records_of(wl)] == [True, True, False, True]
    best = again.query_tuning_record(func, CPU)
    assert best is not None
    assert best.mean_secs == 1e-3
    assert best.args_info == ms.args_info(func)
    mod = again.query_ir_module(func, CPU)
    assert mod is not None
    assert tc.ir.structural_hash(mod["main"]) == best.func_hash
    lines = (tmp_path / RECORD_FILE).read_text().splitlines()
    assert len(lines) == 4
    assert all(json.loads(ln)["format"] == "tilecraft.record" for ln in lines)
    assert len((tmp_path / WORKLOAD_FILE).read_text().splitlines()) == 1


def test_records_are_never_applied_to_another_target(tmp_path: Path) -> None:
    db = ms.JSONDatabase(tmp_path)
    _record(db, add_2d(), tile_2d, 1e-3)
    found = db.lookup(add_2d(), GPU)
    assert found.schedule is None
    assert "records exist only for other targets" in found.reason
    assert target_key(CPU) in found.reason
    failed = ms.MemoryDatabase()
    _record(failed, add_2d(), tile_2d, None)
    reason = failed.lookup(add_2d(), CPU).reason
    assert "all 1 records of the workload failed (first: boom)" in reason


def test_torn_last_line_is_skipped_and_repaired(tmp_path: Path) -> None:
    db = ms.JSONDatabase(tmp_path)
    _record(db, add_2d(), tile_2d, 1e-3, 0)
    path = tmp_path / RECORD_FILE
    whole = path.read_text()
    with path.open("a") as f:
        f.write(whole[: len(whole) // 2])  # a writer killed in the middle of a line
    with pytest.warns(UserWarning, match="torn"):
        torn = ms.JSONDatabase(tmp_path)
    assert len(torn) == 1
    _record(torn, add_2d(), tile_2d, 2e-3, 1)  # the next writer ends the torn line first
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        after = ms.JSONDatabase(tmp_path)
    assert len(after) == 2
    assert any("torn" in str(w.message) for w in caught)
    assert len(path.read_text().splitlines()) == 3


def test_foreign_versions_are_skipped(tmp_path: Path) -> None:
    db = ms.JSONDatabase(tmp_path)
    _record(db, add_2d(), tile_2d, 1e-3)
    line = json.loads((tmp_path / RECORD_FILE).read_text().splitlines()[0])
    with (tmp_path / RECORD_FILE).open("a") as f:
        f.write(json.dumps({**line, "version": 99, "new_field": 1}) + "\n")
    with pytest.warns(UserWarning, match="another format version"):
        assert len(ms.JSONDatabase(tmp_path)) == 1


def test_commit_checks_records() -> None:
    db = ms.MemoryDatabase()
    rec = _record(db, add_2d(), tile_2d, 1e-3)
    with pytest.raises(DatabaseError, match="exactly one"):
        db.commit_tuning_record(ms.TuningRecord(rec.workload, rec.trace, None, "cpu"))
    with pytest.raises(DatabaseError, match="TuningRecord"):
        db.commit_tuning_record("record")  # type: ignore[arg-type]


def test_unions_and_schedule_fn_database(tmp_path: Path) -> None:
    mine, team = ms.JSONDatabase(tmp_path / "mine"), ms.JSONDatabase(tmp_path / "team")
    _record(mine, add_2d(), tile_2d, 5e-3, seed=1)
    _record(team, add_2d(), tile_2d, 1e-3, seed=2)
    _record(team, matmul(), tile_matmul, 1e-3)
    union = ms.UnionDatabase(mine, team)
    best = union.query_tuning_record(add_2d(), CPU)
    assert best is not None
    assert best.mean_secs == 1e-3
    ordered = ms.OrderedUnionDatabase(mine, team)
    first = ordered.query_tuning_record(add_2d(), CPU)
    assert first is not None
    assert first.mean_secs == 5e-3
    assert ordered.lookup(matmul(), CPU).schedule is not None  # falls through to team
    assert len(union) == 3
    with pytest.raises(DatabaseError, match="read-only"):
        union.commit_workload(add_2d(), CPU)

    def fallback(sch: tc.Schedule) -> bool:
        sch.parallel(sch.get_loops(sch.get_block("C"))[0])
        return True

    fn_db = ms.ScheduleFnDatabase(fallback)
    assert fn_db.lookup(add_2d(), CPU).schedule is not None
    assert "declined" in ms.ScheduleFnDatabase(lambda sch: False).lookup(add_2d(), CPU).reason
    layered = ms.OrderedUnionDatabase(mine, fn_db)
    assert layered.lookup(add_2d(), CPU).record is not None  # the record wins
    other = layered.lookup(add_2d(), GPU)
    assert other.schedule is not None
    assert other.record is None
    with pytest.raises(DatabaseError, match="stores nothing"):
        fn_db.commit_workload(add_2d(), CPU)


def test_with_database_makes_it_current() -> None:
    db = ms.MemoryDatabase()
    assert ms.Database.current() is None
    with db:
        assert ms.Database.current() is db
    assert ms.Database.current() is None


def test_sqlite_database(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    db = ms.SQLiteDatabase(path)
    for seed, secs in enumerate([2e-3, 1e-3]):
        _record(db, add_2d(), tile_2d, secs, seed)
    db.close()
    again = ms.SQLiteDatabase(path)
    assert len(again) == 2
    found = again.lookup(add_2d(), CPU)
    assert found.record is not None
    assert found.record.mean_secs == 1e-3
    again.close()
    with pytest.raises(DatabaseError, match="closed"):
        _record(again, add_2d(), tile_2d, 1e-3)
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(DatabaseError):
        ms.SQLiteDatabase(junk)


_WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {here!r})
    import tilecraft as tc
    from tilecraft import tune as ms
    from tune_workloads import add_2d, tile_2d
    import pathlib, time
    json_dir, sqlite_path, wid, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    gate = pathlib.Path(json_dir).parent
    (gate / f"ready-{{wid}}").touch()
    while not (gate / "go").exists():  # start together, so the commits interleave
        time.sleep(0.005)
    func = add_2d()
    sch = tc.Schedule(func, seed=wid)
    tile_2d(sch)
    info = ms.args_info(func)
    for db in (ms.JSONDatabase(json_dir), ms.SQLiteDatabase(sqlite_path)):
        wl = db.commit_workload(func, "cpu")
        for i in range(count):
            if i % 10 == 0:  # yield now and then, so that even on a busy machine the writers
                time.sleep(0.002)  # overlap instead of running one after another
            db.commit_tuning_record(ms.TuningRecord(wl, sch.trace, (wid + i * 1e-6,), "cpu", info,
                                                    extra={{"writer": wid, "i": i}}))
    """
)


@pytest.mark.parametrize("count", [250, pytest.param(1000, marks=pytest.mark.slow, id="1000-each")])
def test_concurrent_writers_lose_nothing(tmp_path: Path, count: int) -> None:
    # four processes commit `count` records each into one JSONDatabase and one SQLiteDatabase
    # (1,000 each in the slow run; 250 in the default run, with the same interleaving)
    script = tmp_path / "writer.py"
    script.write_text(_WRITER.format(here=str(HERE)))
    json_dir, sqlite_path = tmp_path / "db", tmp_path / "db.sqlite"
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(json_dir), str(sqlite_path), str(w), str(count)]
        )
        for w in range(4)
    ]
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("ready-*"))) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    (tmp_path / "go").touch()
    assert [p.wait(timeout=600) for p in procs] == [0, 0, 0, 0]
    for db in (ms.JSONDatabase(json_dir), ms.SQLiteDatabase(sqlite_path)):
        records = db.get_all_tuning_records()
        assert len(records) == 4 * count
        seen = {(r.extra["writer"], r.extra["i"]) for r in records}
        assert seen == {(w, i) for w in range(4) for i in range(count)}
        assert len(db._workloads()) == 1
        order = [r.extra["writer"] for r in records]
        assert sum(a != b for a, b in itertools.pairwise(order)) > 3  # the writers interleaved


_READER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {here!r})
    import numpy as np
    import tilecraft as tc
    from tilecraft import tune as ms
    from tune_workloads import add_2d, tile_2d
    work_dir, mode = sys.argv[1], sys.argv[2]
    func = add_2d()
    if mode == "write":
        db = ms.JSONDatabase(work_dir)
        wl = db.commit_workload(func, "cpu")
        sch = tc.Schedule(func, seed=3)
        tile_2d(sch)
        db.commit_tuning_record(ms.TuningRecord(wl, sch.trace, (1e-3,), "cpu",
                                                ms.args_info(func)))
        print(tc.ir.structural_hash(sch.func))
    else:
        mod = tc.IRModule({{"add": func.with_attr("op_pattern", 0)}})
        with tc.Target("cpu"):
            out = ms.ApplyDatabase(work_dir)(mod)
        assert out["add"].attrs["tc.tuned"], out["add"].attrs
        tc.testing.check_numeric(out["add"], lambda a, b: a + b)
        print(tc.ir.structural_hash(out["add"].update(attrs={{}})))
    """
)


def test_database_written_by_one_process_applies_in_another(tmp_path: Path) -> None:
    script = tmp_path / "rw.py"
    script.write_text(_READER.format(here=str(HERE)))
    outs = []
    for mode, seed in (("write", "1"), ("read", "4242")):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run(
            [sys.executable, str(script), str(tmp_path / "db"), mode],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        outs.append(proc.stdout.strip())
    assert outs[0] == outs[1]  # the same scheduled function in both processes
