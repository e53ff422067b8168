"""ApplyDatabase names the record a function was replayed from, so exported libraries can
say which record produced each kernel."""

from __future__ import annotations

import hashlib
from pathlib import Path

from test_apply_mark import CPU, _module, _tuned_database
from tune_workloads import add_2d

from tilecraft import tune as ms
from tilecraft.ir.scheduled import RECORD_ATTR
from tilecraft.tune.database.workload import WorkloadKey


def test_database_scheduled_function_names_its_record(tmp_path: Path) -> None:
    db = _tuned_database(tmp_path)
    with CPU:
        tuned = ms.ApplyDatabase(work_dir=tmp_path)(_module())
    key = WorkloadKey.of(add_2d(), CPU)
    (record,) = db.get_top_k(key, 1)
    trace = hashlib.sha256(record.trace.as_json().encode()).hexdigest()
    assert tuned["add"].attrs[RECORD_ATTR] == f"{key.shash}:{trace}"
    assert RECORD_ATTR not in tuned["mm"].attrs  # not scheduled from a record
    # provenance only: the workload key ignores it
    assert WorkloadKey.of(add_2d().with_attr(RECORD_ATTR, "x"), CPU) == key
