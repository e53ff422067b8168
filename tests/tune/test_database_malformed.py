"""A malformed record or workload is skipped with a warning naming where it is; the rest of the
database stays usable (lookup, ApplyDatabase, resuming a tuning run)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from tune_workloads import add_2d, matmul, tile_2d, tile_matmul

import tilecraft as tc
from tilecraft import tune as ms
from tilecraft.tune.database.json_db import RECORD_FILE, WORKLOAD_FILE

CPU = tc.Target("cpu")


def _record(db: ms.Database, func: tc.PrimFunc, fn: object, secs: float, seed: int = 0) -> None:
    wl = db.commit_workload(func, CPU)
    sch = tc.Schedule(func, seed=seed)
    fn(sch)  # type: ignore[operator]
    db.commit_tuning_record(
        ms.TuningRecord(wl, sch.trace, (secs, secs), str(CPU), ms.args_info(func))
    )


def _good_line(tmp_path: Path, secs: float) -> str:
    """The first record line of the database in ``tmp_path`` with run times ``secs``."""
    line = json.loads((tmp_path / RECORD_FILE).read_text().splitlines()[0])
    return json.dumps({**line, "run_secs": [secs]})


def _with_bad_record_line(tmp_path: Path, bad: str) -> None:
    """Line 1: a record (1 ms); line 2: ``bad``; line 3: another record (0.5 ms)."""
    _record(ms.JSONDatabase(tmp_path), add_2d(), tile_2d, 1e-3)
    with (tmp_path / RECORD_FILE).open("a") as f:
        f.write(bad + "\n" + _good_line(tmp_path, 5e-4) + "\n")


def _check_usable(db: ms.Database) -> None:
    """Both good records load; the best one replays."""
    assert len(db) == 2
    found = db.lookup(add_2d(), CPU)
    assert found.schedule is not None, found.reason
    assert found.record is not None
    assert found.record.mean_secs == 5e-4


def _record_with(tmp_path: Path, **fields: object) -> str:
    line = json.loads((tmp_path / RECORD_FILE).read_text().splitlines()[0])
    return json.dumps({**line, **fields})


BAD_LINES = {
    "no-fields": '{"format": "tilecraft.record", "version": 1}',
    "not-an-object": "[1, 2, 3]",
    "pickle": '{"format": "pickle", "version": 1, "data": "cos\\nsystem\\n(S\'echo hi\'\\ntR."}',
    "deep": "[" * 100000 + "]" * 100000,
    "not-json": "this is not JSON",
    "nan": '{"format":"tilecraft.record","version":1,"workload":"x","trace":{},"run_secs":[NaN],'
    '"error":null,"target":"cpu","args_info":[],"func_hash":null,"extra":{}}',
}


@pytest.mark.parametrize("bad", BAD_LINES.values(), ids=BAD_LINES.keys())
def test_a_malformed_record_line_is_skipped_with_a_warning(tmp_path: Path, bad: str) -> None:
    _with_bad_record_line(tmp_path, bad)
    with pytest.warns(UserWarning, match=rf"{RECORD_FILE}:2: skipped"):
        db = ms.JSONDatabase(tmp_path)
    _check_usable(db)
    assert any(str(tmp_path / RECORD_FILE) in n for n in db.notes)  # the whole path


FIELDS = [
    ("run_secs", "fast", "'run_secs' must be a list"),
    ("run_secs", [-1.0], "'run_secs' must be a list"),
    ("run_secs", [1e-3, True], "'run_secs' must be a list"),
    ("error", "boom", "exactly one"),  # run times and an error
    ("run_secs", None, "exactly one"),  # neither
    ("trace", {"format": "x"}, "trace"),
    ("trace", "split", "trace"),
    ("target", 3, "'target' must be a string"),
    ("args_info", [{"name": "A"}], "argument info"),
    ("args_info", {"A": 1}, "'args_info' must be a list"),
    ("func_hash", 5, "'func_hash' must be a string"),
    ("extra", [], "'extra' must be an object"),
    ("workload", 7, "'workload' must be a string"),
]


@pytest.mark.parametrize(("key", "value", "why"), FIELDS, ids=[f"{k}-{v}" for k, v, _ in FIELDS])
def test_a_record_field_of_the_wrong_type_or_range_is_skipped(
    tmp_path: Path, key: str, value: object, why: str
) -> None:
    _record(ms.JSONDatabase(tmp_path / "seed"), add_2d(), tile_2d, 1e-3)
    _with_bad_record_line(tmp_path, _record_with(tmp_path / "seed", **{key: value}))
    with pytest.warns(UserWarning, match=rf"{RECORD_FILE}:2: skipped a malformed line.*{why}"):
        db = ms.JSONDatabase(tmp_path)
    _check_usable(db)


def test_ill_typed_trace_arguments_are_skipped_naming_line_and_argument(tmp_path: Path) -> None:
    # Trace.from_json checks every argument with its primitive's own check
    _record(ms.JSONDatabase(tmp_path / "seed"), add_2d(), tile_2d, 1e-3)
    line = json.loads((tmp_path / "seed" / RECORD_FILE).read_text())
    split = next(i for i in line["trace"]["insts"] if i["kind"] == "split")
    split["inputs"][1] = 7
    _with_bad_record_line(tmp_path, json.dumps(line))
    with pytest.warns(UserWarning, match=r"json:2: skipped.*split.*argument 'factors'"):
        db = ms.JSONDatabase(tmp_path)
    _check_usable(db)


def test_a_malformed_workload_line_skips_the_workload_and_keeps_the_others(
    tmp_path: Path,
) -> None:
    db = ms.JSONDatabase(tmp_path)
    _record(db, add_2d(), tile_2d, 1e-3)
    _record(db, matmul(), tile_matmul, 1e-3)
    lines = (tmp_path / WORKLOAD_FILE).read_text().splitlines()
    first = json.loads(lines[0])
    lines[0] = json.dumps({**first, "mod": {"format": "x"}})
    (tmp_path / WORKLOAD_FILE).write_text("\n".join(lines) + "\n")
    with pytest.warns(UserWarning, match="skipped") as caught:
        again = ms.JSONDatabase(tmp_path)
    messages = [str(w.message) for w in caught]
    assert any(f"{WORKLOAD_FILE}:1: skipped" in m and "unreadable function" in m for m in messages)
    assert any(f"{RECORD_FILE}:1: skipped records of a workload" in m for m in messages)
    assert again.lookup(matmul(), CPU).schedule is not None
    assert again.lookup(add_2d(), CPU).schedule is None


def test_apply_database_and_resumed_tuning_skip_a_bad_line(tmp_path: Path) -> None:
    _with_bad_record_line(tmp_path, '{"format": "tilecraft.record", "version": 1, "x": 1}')
    mod = tc.IRModule({"add": add_2d()})
    with pytest.warns(UserWarning, match="skipped"), CPU:
        out = ms.ApplyDatabase(tmp_path)(mod)
    assert out["add"].attrs["tc.tuned"]
    builder = ms.LocalBuilder(max_workers=1, recycle_after=None)
    runner = ms.LocalRunner(timeout_s=20.0, num_threads=1, number=1, repeat=1)
    try:
        with pytest.warns(UserWarning, match="skipped"):
            db = ms.tune_tir(
                add_2d(),
                CPU,
                work_dir=tmp_path,
                max_trials_global=3,
                num_trials_per_iter=1,
                space=tile_2d,
                seed=0,
                builder=builder,
                runner=runner,
            )
    finally:
        builder.close()
        runner.close()
    assert len(db) == 3  # the two good records count toward the budget; one more measured


def test_a_malformed_sqlite_row_is_skipped_naming_its_row_id(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    db = ms.SQLiteDatabase(path)
    _record(db, add_2d(), tile_2d, 1e-3)
    line = db._db().execute("SELECT line FROM records").fetchone()[0]
    db.close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO records (line) VALUES (?)", (line.replace("[0.001", '["x"'),))
        conn.execute("INSERT INTO records (line) VALUES (?)", ("not JSON",))
        conn.execute("INSERT INTO records (line) VALUES (?)", (17,))
        good = json.dumps({**json.loads(line), "run_secs": [5e-4]})
        conn.execute("INSERT INTO records (line) VALUES (?)", (good,))
    with pytest.warns(UserWarning, match="skipped") as caught:
        again = ms.SQLiteDatabase(path)
    messages = [str(w.message) for w in caught]
    for row in (2, 3, 4):
        assert any(f"{path}: records row {row}: skipped" in m for m in messages), messages
    _check_usable(again)
    again.close()


def test_a_record_with_an_unroll_budget_above_the_cap_is_skipped(tmp_path: Path) -> None:
    # such a record made ApplyDatabase + build run without bound; now its trace does not load

    def tile_and_unroll(sch: tc.Schedule) -> None:
        tile_2d(sch)
        sch.annotate(sch.get_loops(sch.get_block("C"))[0], "pragma_auto_unroll_max_step", 16)
        sch.annotate(sch.get_loops(sch.get_block("C"))[0], "pragma_unroll_explicit", 1)

    _record(ms.JSONDatabase(tmp_path / "seed"), add_2d(), tile_and_unroll, 1e-3)
    line = json.loads((tmp_path / "seed" / RECORD_FILE).read_text())
    unroll = next(i for i in line["trace"]["insts"] if i["kind"] == "annotate")
    unroll["inputs"][1] = 1 << 30
    _with_bad_record_line(tmp_path, json.dumps(line))
    with pytest.warns(UserWarning, match=r"json:2: skipped.*pragma_auto_unroll_max_step"):
        db = ms.JSONDatabase(tmp_path)
    _check_usable(db)
