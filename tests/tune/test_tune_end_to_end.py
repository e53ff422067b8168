"""Tuning end to end: a model tuned and applied, resuming after kill -9, reruns, passes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from tune_workloads import add_2d, matmul, tile_2d, tile_matmul

import tilecraft as tc
from tilecraft import tune as ms
from tilecraft.errors import DatabaseError, TuneError
from tilecraft.frontend import nn
from tilecraft.tune.database.json_db import RECORD_FILE

CPU = tc.Target("cpu")
HERE = Path(__file__).parent


class DLightTutorialModel(nn.Module):
    """The DLight tutorial's model: Linear 768->768, ReLU, LayerNorm, Linear 768->256."""

    def __init__(self) -> None:
        self.fc1 = nn.Linear(768, 768)
        self.relu = nn.ReLU()
        self.norm = nn.LayerNorm(768)
        self.fc2 = nn.Linear(768, 256)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.fc2(self.norm(self.relu(self.fc1(x))))


def _reference(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    h = np.maximum(x.astype(np.float64) @ p["fc1.weight"].T + p["fc1.bias"], 0)
    mu = h.mean(-1, keepdims=True)
    var = ((h - mu) ** 2).mean(-1, keepdims=True)
    h = (h - mu) / np.sqrt(var + 1e-5) * p["norm.weight"] + p["norm.bias"]
    return h @ p["fc2.weight"].T + p["fc2.bias"]


def test_tune_tir_and_apply_database_on_the_tutorial_model(
    tmp_path: Path, workers: tuple[ms.LocalBuilder, ms.LocalRunner]
) -> None:
    builder, runner = workers
    mod, params = DLightTutorialModel().export(
        {"forward": {"x": nn.spec.Tensor((1, 768), "float32")}}
    )
    with CPU:
        mod = tc.graph.get_pipeline("zero")(mod)
    tasks = ms.extract_tasks(mod, CPU)
    assert len(tasks) == 5
    db = ms.tune_tir(
        mod,
        CPU,
        work_dir=tmp_path,
        max_trials_global=10,
        num_trials_per_iter=2,
        seed=0,
        builder=builder,
        runner=runner,
    )
    records = db.get_all_tuning_records()
    assert len(records) == 10
    assert all(r.ok for r in records), [r.error for r in records]
    with CPU:
        tuned = ms.ApplyDatabase(work_dir=tmp_path)
        out_mod = tuned(mod)
    assert sorted(tuned.report.matched) == sorted(t.task_name for t in tasks)
    assert not tuned.report.missed
    assert "5 of 5 functions" in str(tuned.report)
    for name, _ in out_mod.prim_funcs():
        assert out_mod[name].attrs["tc.tuned"] is True
        assert not tc.ir.structural_equal(out_mod[name], mod[name])  # really rescheduled
    x = np.random.default_rng(0).standard_normal((1, 768)).astype("float32")
    out = tc.build(out_mod, target="cpu")["forward"](x, *params.values())
    np.testing.assert_allclose(out, _reference(x, params), rtol=1e-3, atol=1e-3)


def test_apply_database_reports_why_functions_were_not_applied(tmp_path: Path) -> None:
    db = ms.MemoryDatabase()
    wl = db.commit_workload(add_2d(), CPU)
    sch = tc.Schedule(add_2d(), seed=0)
    tile_2d(sch)
    db.commit_tuning_record(ms.TuningRecord(wl, sch.trace, (1e-3,), "cpu", ms.args_info(add_2d())))
    mod = tc.IRModule({"add": add_2d(), "mm": matmul(), "done": matmul(8, 8, 8)})
    mod = mod.with_function("done", mod["done"].with_attr("tc.tuned", True))
    with db, CPU:
        applied = ms.ApplyDatabase()
        out = applied(mod)
    assert list(applied.report.matched) == ["add"]
    assert applied.report.missed["done"] == "already scheduled"
    assert applied.report.missed["mm"].startswith("no workload with this key")
    assert out["mm"] is mod["mm"]
    with tc.Target("cuda -arch=sm_80"):
        on_gpu = ms.ApplyDatabase(database=db)
        on_gpu(mod)
    assert "records exist only for other targets" in on_gpu.report.missed["add"]
    with pytest.raises(TuneError, match="no database"):
        ms.ApplyDatabase()(mod)
    with pytest.raises(DatabaseError, match="the folder is missing"):
        ms.ApplyDatabase(tmp_path / "mistyped")(mod)
    assert not (tmp_path / "mistyped").exists()


def test_rerun_skips_tasks_at_budget_and_resumes_others(
    tmp_path: Path, workers: tuple[ms.LocalBuilder, ms.LocalRunner]
) -> None:
    builder, runner = workers
    kw = {"work_dir": tmp_path, "space": tile_2d, "seed": 0, "builder": builder, "runner": runner}
    db = ms.tune_tir(add_2d(), CPU, max_trials_global=6, num_trials_per_iter=3, **kw)
    first = [r.func_hash for r in db.get_all_tuning_records()]
    assert len(first) == 6
    again = ms.tune_tir(add_2d(), CPU, max_trials_global=6, num_trials_per_iter=3, **kw)
    assert len(again) == 6  # the budget was reached: nothing new measured
    more = ms.tune_tir(add_2d(), CPU, max_trials_global=9, num_trials_per_iter=3, **kw)
    hashes = [r.func_hash for r in more.get_all_tuning_records()]
    assert len(hashes) == 9
    assert hashes[:6] == first
    assert len(set(hashes)) == 9  # resumed without re-measuring a candidate


def test_tune_passes_and_op_names(
    tmp_path: Path, workers: tuple[ms.LocalBuilder, ms.LocalRunner]
) -> None:
    builder, runner = workers
    mod = tc.IRModule({"add": add_2d(), "matmul_small": matmul(16, 16, 16)})
    tune_mm = ms.TuneIRMod(
        tmp_path,
        max_trials_global=2,
        op_names=["matmul"],
        target=CPU,
        space=tile_matmul,
        builder=builder,
        runner=runner,
    )
    assert tune_mm(mod) is mod  # tuning leaves the module alone
    assert tune_mm.database is not None
    records = tune_mm.database.get_all_tuning_records()
    assert len(records) == 2
    assert all(r.workload.key == ms.Workload.create(matmul(16, 16, 16), CPU).key for r in records)
    tune_all = ms.TuneTIR(
        tmp_path / "all",
        max_trials_global=4,
        target=CPU,
        space=ms.space.cpu_default_space,
        builder=builder,
        runner=runner,
    )
    tune_all(mod)
    assert tune_all.database is not None
    assert len(tune_all.database) == 4
    sch = ms.compile_tir(tune_all.database, add_2d(), CPU)
    assert sch is not None
    tc.testing.check_numeric(sch.func, lambda a, b: a + b)


def test_untunable_tasks_are_skipped_with_a_warning(
    workers: tuple[ms.LocalBuilder, ms.LocalRunner],
) -> None:
    builder, runner = workers
    n = tc.ir.Var("n", "int32")
    A = tc.te.placeholder((n,), "float32", name="A")
    dynamic = tc.te.create_prim_func([A, tc.te.compute((n,), lambda i: A[i] * 2.0, name="B")])
    mod = tc.IRModule({"dyn": dynamic, "add": add_2d()})
    with pytest.warns(UserWarning, match="task dyn is not tuned: .*symbolic shape"):
        db = ms.tune_tir(
            mod, CPU, max_trials_global=2, space=tile_2d, builder=builder, runner=runner
        )
    assert len(db) == 2
    assert {r.workload.key for r in db.get_all_tuning_records()} == {
        ms.Workload.create(add_2d(), CPU).key
    }


def _workers_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"tilecraft.tune._worker" in cmd and str(pid).encode() in cmd:
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and SIGKILL")
def test_kill_9_mid_run_keeps_every_record_and_resumes(tmp_path: Path) -> None:
    work_dir = tmp_path / "db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parents[1]), str(HERE)])}
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "tune_workloads.py"), "tune", str(work_dir), "12", "2"], env=env
    )
    records = work_dir / RECORD_FILE
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if records.exists() and len(records.read_bytes().splitlines()) >= 4:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the tuning process ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    for _ in range(200):  # its workers die with it (PR_SET_PDEATHSIG)
        if not _workers_of(proc.pid):
            break
        time.sleep(0.05)
    assert _workers_of(proc.pid) == []
    lines = records.read_bytes().splitlines()
    assert all(json.loads(line)["format"] == "tilecraft.record" for line in lines)
    db = ms.JSONDatabase(work_dir)
    assert 4 <= len(db) == len(lines) < 12
    done = {r.func_hash for r in db.get_all_tuning_records()}
    resumed = ms.tune_tir(
        add_2d(),
        CPU,
        work_dir=work_dir,
        max_trials_global=12,
        num_trials_per_iter=2,
        space=tile_2d,
        seed=0,
        builder=ms.LocalBuilder(max_workers=2),
        runner=ms.LocalRunner(num_threads=1, number=1, repeat=1),
    )
    after = resumed.get_all_tuning_records()
    assert len(after) == 12
    assert done <= {r.func_hash for r in after}
    assert len({r.func_hash for r in after}) == 12  # nothing measured twice


@pytest.mark.slow
def test_long_tuning_run_finds_a_fast_matmul(tmp_path: Path) -> None:
    func = matmul(256, 256, 256)
    db = ms.tune_tir(
        func,
        CPU,
        work_dir=tmp_path,
        max_trials_global=128,
        seed=0,
        space=ms.space.cpu_default_space,
    )
    records = db.get_all_tuning_records()
    assert len(records) == 128
    ok = sorted(r.mean_secs for r in records if r.ok)
    assert len(ok) >= 120
    assert ok[0] < ok[len(ok) // 2]
    sch = ms.compile_tir(db, func, CPU)
    assert sch is not None
    tc.testing.check_numeric(sch.func, lambda a, b: a @ b, rtol=1e-3, atol=1e-3)
