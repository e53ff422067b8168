"""``tilecraft tune`` (resumable) and ``tilecraft db list|show|merge|prune|export``."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import tilecraft as tc
from tilecraft.cli import EXIT_ERROR
from tilecraft.tune import JSONDatabase, Workload


def test_tune_records_trials_and_resumes(invoke_json, model_file: Path, tuned) -> None:
    work_dir, report = tuned
    (task,) = report["tasks"]
    assert task["task"] == "fused_matmul_add_relu"
    assert task["trials"] == 4
    assert task["failed"] < 4
    assert task["best_s"] > 0
    assert len(JSONDatabase(work_dir).get_all_tuning_records()) == 4
    again = invoke_json("tune", model_file, "--trials", 4, "-w", work_dir, "-q")
    assert again["tasks"][0]["trials"] == 4  # resumed: the budget was already spent
    assert len(JSONDatabase(work_dir).get_all_tuning_records()) == 4


def test_tune_prints_the_tuners_progress(invoke, model_file: Path, tuned) -> None:
    work_dir, _ = tuned
    result = invoke("tune", model_file, "--trials", 4, "-w", work_dir)
    assert result.exit_code == 0, result.output
    assert "[3/3] tune 1 tasks, 4 trials" in result.stderr
    assert "task fused_matmul_add_relu: 4 trials already recorded" in result.stderr
    assert "fused_matmul_add_relu" in result.stdout


def test_compile_and_explain_with_the_tuned_database(
    invoke_json, model_file: Path, tuned, tmp_path: Path
) -> None:
    work_dir, _ = tuned
    report = invoke_json("compile", model_file, "-o", tmp_path / "t.tc", "--database", work_dir)
    (kernel,) = report["kernels"]
    assert kernel["scheduled_by"] == "database"
    ((workload,),) = (e["workloads"] for e in invoke_json("db", "list", work_dir))
    assert kernel["record"].split(":")[0] == workload["structural_hash"]
    info = invoke_json("inspect", tmp_path / "t.tc")
    assert info["kernels"][0]["record"] == kernel["record"]
    explained = invoke_json("explain", model_file, "--database", work_dir)
    assert explained["functions"]["fused_matmul_add_relu"]["status"] == "already scheduled"


def test_db_list_and_show(invoke_json, tuned) -> None:
    work_dir, report = tuned
    (entry,) = invoke_json("db", "list", work_dir)
    assert entry["database"] == str(work_dir)
    (workload,) = entry["workloads"]
    assert workload["records"] == 4
    assert workload["target"].startswith("cpu ")
    assert workload["best_s"] == report["tasks"][0]["best_s"]
    shown = invoke_json("db", "show", work_dir, workload["workload"][:8], "--top-k", 2, "--trace")
    (w,) = shown["workloads"]
    assert len(w["top"]) == 2
    assert w["top"][0]["mean_s"] == workload["best_s"]
    assert isinstance(w["top"][0]["trace"], list | dict)


def test_db_of_a_missing_database_exits_1(invoke, tmp_path: Path) -> None:
    result = invoke("db", "list", tmp_path / "nope")
    assert result.exit_code == EXIT_ERROR
    assert result.stderr.startswith("error: no tuning database at")


def _other_target_copy(src: Path, dst: Path) -> Path:
    """A database holding ``src``'s records re-keyed for the x86-64-v2 preset."""
    target = tc.Target("x86-64-v2")
    db = JSONDatabase(dst)
    for r in JSONDatabase(src).get_all_tuning_records():
        workload = Workload.create(r.workload.mod, target)
        db.commit_tuning_record(dataclasses.replace(r, workload=workload, target=str(target)))
    return dst


def test_db_merge_skips_duplicates_and_refuses_mixed_targets(
    invoke, invoke_json, tuned, tmp_path: Path
) -> None:
    work_dir, _ = tuned
    sqlite = tmp_path / "copy.db"
    exported = invoke_json("db", "export", work_dir, sqlite, "--top-k", 4)
    assert exported["records"] == 4
    merged = invoke_json("db", "merge", work_dir, sqlite, "-o", tmp_path / "merged")
    assert (merged["added"], merged["skipped"], merged["records"]) == (4, 4, 4)
    other = _other_target_copy(work_dir, tmp_path / "v2")
    refused = invoke("db", "merge", work_dir, other, "-o", tmp_path / "mixed")
    assert refused.exit_code == EXIT_ERROR
    assert "merge: the records are for 2 targets" in refused.stderr
    assert "--allow-mixed-targets" in refused.stderr
    refused = invoke("db", "merge", other, "-o", tmp_path / "merged")  # with what is there
    assert refused.exit_code == EXIT_ERROR
    mixed = invoke_json(
        "db", "merge", work_dir, other, "-o", tmp_path / "mixed", "--allow-mixed-targets"
    )
    assert mixed["records"] == 8


def test_db_prune_keeps_the_fastest(invoke_json, tuned, tmp_path: Path) -> None:
    work_dir, _ = tuned
    copy = tmp_path / "copy"
    invoke_json("db", "merge", work_dir, "-o", copy)
    (before,) = invoke_json("db", "list", copy)
    pruned = invoke_json("db", "prune", copy, "--top-k", 1)
    assert pruned["before"] == 4
    assert pruned["kept"] == 1
    (after,) = invoke_json("db", "list", copy)
    assert after["workloads"][0]["records"] == 1
    assert after["workloads"][0]["best_s"] == before["workloads"][0]["best_s"]
    sqlite_copy = tmp_path / "small.db"
    invoke_json("db", "prune", work_dir, "--top-k", 2, "-o", sqlite_copy)
    (listed,) = invoke_json("db", "list", sqlite_copy)
    assert listed["workloads"][0]["records"] == 2
    assert len(JSONDatabase(work_dir).get_all_tuning_records()) == 4  # -o leaves the source
