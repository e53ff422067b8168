"""What a user watches: the live table's contents, quiet mode, per-task logs, the curve plot."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pytest
from fake_workers import HashBuilder, TableRunner
from rich.console import Console
from tune_workloads import add_2d, matmul

import tilecraft as tc
from tilecraft import tune as ms
from tilecraft.tune._loop import TaskState
from tilecraft.tune.flops import flop_count
from tilecraft.tune.progress import COLUMNS, TuneProgress, render, should_show, task_row

CPU = tc.Target("cpu -mcpu=x86-64-v3")


def _state(func: tc.PrimFunc, weight: int, history: list[float], budget: int) -> TaskState:
    (task,) = ms.extract_tasks(func, CPU)
    task = ms.ExtractedTask(task.task_name, task.mod, weight, task.dispatched, CPU)
    workload = ms.MemoryDatabase().commit_workload(task.mod, CPU)
    state = TaskState(task, workload, ms.args_info(func), ms.ReplayTrace(), budget, len(history))
    state.flops = flop_count(func)
    state.history = history
    state.best_secs = history[-1] if history else math.inf
    return state


def test_flops_count_float_arithmetic_times_trip_counts() -> None:
    assert flop_count(matmul(16, 8, 4)) == 2 * 16 * 8 * 4  # one multiply, one add per step
    assert flop_count(add_2d(8, 16)) == 8 * 16


def test_the_table_shows_every_column_of_every_task() -> None:
    mm = _state(matmul(64, 64, 64), 2, [4e-3, 2e-3, 2e-3, 1e-3], 8)
    add = _state(add_2d(8, 8), 1, [math.inf, 5e-6], 2)
    add.failed, add.done = 1, True
    watch = TuneProgress([mm, add], budget=10, show=False, console=Console(file=io.StringIO()))
    assert task_row(0, mm) == (
        "0", "main", "524.3K", "2", "0.5243", "1000", "2000", "4/8", "4", "tuning",
    )  # fmt: skip
    assert task_row(1, add) == ("1", "main", "64", "1", "0.0128", "5", "5", "2/2 (1 failed)",
                                "2", "done")  # fmt: skip
    text = render(watch.table())
    for name in COLUMNS:
        assert name.split()[0] in text
    assert "total weighted latency 2005 us; trials 6/10" in text
    assert "ETA -" in text  # nothing measured in this run yet


def test_should_show_a_terminal_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdout", Tty())
    monkeypatch.delenv("CI", raising=False)
    assert should_show(None)
    monkeypatch.setenv("CI", "true")
    assert not should_show(None)
    assert should_show(True)
    monkeypatch.setattr("sys.stdout", io.StringIO())  # a pipe
    monkeypatch.delenv("CI")
    assert not should_show(None)
    assert not should_show(False)


def _tune(tmp_path: Path, **kw: object) -> ms.Database:
    return ms.tune_tir(matmul(16, 16, 16), CPU, work_dir=tmp_path, max_trials_global=3,
                       builder=HashBuilder(), runner=TableRunner(default=1e-3), **kw)  # fmt: skip


def test_quiet_in_a_pipe_and_shown_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _tune(tmp_path / "quiet")
    assert capsys.readouterr().out == ""  # captured stdout is not a terminal
    _tune(tmp_path / "shown", progress=True)
    out = capsys.readouterr().out
    assert "Tuning summary" in out
    assert "main" in out


def test_logs_per_task_and_the_summary_in_work_dir(tmp_path: Path) -> None:
    _tune(tmp_path, progress=False)
    log = (tmp_path / "logs" / "000_main.log").read_text()
    assert log.splitlines()[:3] == [f"trial {n}: 1000 us" for n in (1, 2, 3)]
    assert "best after 3 trials: 1000 us" in log
    summary = (tmp_path / "logs" / "summary.txt").read_text()
    assert "Tuning summary" in summary
    assert "3/3" in summary


def test_the_tuning_curve_is_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "curve.png"
    _tune(tmp_path, progress=False, plot=path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    empty = ms.progress.plot_tuning_curves({"none": [math.inf]}, tmp_path / "empty.png")
    assert empty.stat().st_size > 0
