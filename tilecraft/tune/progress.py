"""What a user watches while tuning: a live table, a summary, per-task logs, a tuning curve.

The live table (drawn with ``rich``) has one row per task: its FLOPs, weight, speed
(GFLOP/s at the best time), best latency (microseconds), weighted latency (weight x
latency), trials (recorded / budget), the trial that gave the best ("best at"), and its
state; the caption gives the total weighted latency, the trials spent of the global
budget, the elapsed time and an estimate of the time left. It is shown by default when
standard output is a terminal and ``CI`` is not set (:func:`tilecraft.config.in_ci`);
``progress=True`` or ``False`` forces it either way. At the end the live table gives way
to the same table, printed once as the summary (a task the global budget stopped before
its own is marked "stopped").

With a ``work_dir``, every task logs its trials to ``work_dir/logs/<nnn>_<task>.log`` and
the summary goes to ``work_dir/logs/summary.txt``, shown or not. :func:`plot_tuning_curves`
draws the best latency against trials, one line per task, into a PNG (``tilecraft[plot]``,
matplotlib).
"""

from __future__ import annotations

import io
import logging
import math
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from rich import box
from rich.console import Console
from rich.live import Live
from rich.table import Table

from ..config import in_ci
from ..errors import TuneError
from ._loop import TaskState
from .database.workload import TuningRecord

logger = logging.getLogger("tilecraft.tune")

COLUMNS = (
    "ID",
    "Task",
    "FLOP",
    "Weight",
    "GFLOP/s",
    "Latency us",
    "Weighted us",
    "Trials",
    "Best at",
    "State",
)
"""The columns: speed at the best time, best latency, weight x latency, trials recorded of the
task's budget, the trial that gave the best."""


def should_show(progress: bool | None) -> bool:
    """Whether to draw the live table: ``progress`` when given, else a terminal outside CI."""
    if progress is not None:
        return progress
    return not in_ci() and sys.stdout.isatty()


def _us(secs: float) -> str:
    return "-" if math.isinf(secs) else f"{secs * 1e6:.4g}"


def _flops(n: int) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.4g}{unit}"
    return str(n)


def _state(s: TaskState, final: bool) -> str:
    if not s.done:
        return "stopped" if final else "tuning"  # final: the global budget ran out first
    return "done" if s.remaining == 0 else "space dry"


def task_row(index: int, s: TaskState, final: bool = False) -> tuple[str, ...]:
    """One row of the table, as text in the order of :data:`COLUMNS` (``final``: at the end)."""
    best = s.best_secs
    speed = "-" if math.isinf(best) or best <= 0 else f"{s.flops / best / 1e9:.4g}"
    trials = f"{s.trials}/{s.budget}" + (f" ({s.failed} failed)" if s.failed else "")
    at = s.best_trial
    return (
        str(index),
        s.task.task_name,
        _flops(s.flops),
        str(s.weight),
        speed,
        _us(best),
        _us(best * s.weight),
        trials,
        "-" if at is None else str(at),
        _state(s, final),
    )


def _duration(secs: float) -> str:
    if secs < 60:
        return f"{secs:.1f} s"
    return f"{int(secs // 60)} min {int(secs % 60)} s"


def _console() -> Console:
    """A console on standard output, 120 columns wide when it is not a terminal (a log)."""
    console = Console()
    if not console.is_terminal:
        console.width = max(console.width, 120)
    return console


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:100] or "task"


class TuneProgress:
    """The live table, the summary and the per-task logs of one tuning run.

    Parameters
    ----------
    states
        The tasks' states (read at every refresh, never changed).
    budget
        The global trial budget.
    show
        Draw the live table and print the summary (see :func:`should_show`).
    work_dir
        Where the logs go (``logs/`` inside); None: no log files.
    console
        Where to draw (default: a console on standard output).
    """

    def __init__(
        self,
        states: Sequence[TaskState],
        budget: int,
        *,
        show: bool,
        work_dir: str | os.PathLike[str] | None = None,
        console: Console | None = None,
    ) -> None:
        self.states = list(states)
        self.budget = budget
        self.show = show
        self.console = console or _console()
        self.log_dir = Path(work_dir) / "logs" if work_dir is not None else None
        self.started = time.monotonic()
        self.spent_at_start = self.spent
        self._live: Live | None = None
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)

    @property
    def spent(self) -> int:
        """Trials recorded over all tasks, earlier runs included."""
        return sum(s.trials for s in self.states)

    def eta_secs(self) -> float | None:
        """Seconds left at this run's pace; None before its first trial."""
        done_now = self.spent - self.spent_at_start
        if done_now <= 0:
            return None
        left = sum(s.remaining for s in self.states if not s.done)
        left = min(left, max(0, self.budget - self.spent))
        return (time.monotonic() - self.started) / done_now * left

    def table(self, final: bool = False) -> Table:
        """The table of every task as it stands now (``final``: the summary at the end)."""
        title = "Tuning summary" if final else "Tuning"
        table = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False)
        for name in COLUMNS:
            table.add_column(name, justify="left" if name == "Task" else "right")
        for i, s in enumerate(self.states):
            table.add_row(*task_row(i, s, final))
        total = sum(s.best_secs * s.weight for s in self.states)
        eta = self.eta_secs()
        table.caption = (
            f"total weighted latency {_us(total)} us; trials {self.spent}/{self.budget}; "
            f"elapsed {_duration(time.monotonic() - self.started)}; "
            f"ETA {'-' if eta is None else _duration(eta)}"
        )
        return table

    def __enter__(self) -> TuneProgress:
        if self.show:
            self._live = Live(
                self.table(), console=self.console, refresh_per_second=4, transient=True
            )
            self._live.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._live is not None:
            self._live.__exit__(exc_type, exc, tb)
            self._live = None
        self.finish()

    def update(self, state: TaskState, records: Sequence[TuningRecord]) -> None:
        """Record a round of ``state``'s task: log it, and redraw the table when shown."""
        best = "-" if math.isinf(state.best_secs) else f"{state.best_secs * 1e3:.4g} ms"
        logger.info(
            "task %s: %d/%d trials, %d failed, best %s (all tasks: %d/%d)",
            state.task.task_name,
            state.trials,
            state.budget,
            state.failed,
            best,
            self.spent,
            self.budget,
        )
        self._log(state, records)
        if self._live is not None:
            self._live.update(self.table())

    def _log(self, state: TaskState, records: Sequence[TuningRecord]) -> None:
        if self.log_dir is None:
            return
        first = state.trials - len(records) + 1
        lines = []
        for n, rec in enumerate(records, start=first):
            if rec.ok:
                lines.append(f"trial {n}: {rec.mean_secs * 1e6:.6g} us")
            else:
                lines.append(f"trial {n}: failed: {(rec.error or '').splitlines()[0]}")
        lines.append(f"best after {state.trials} trials: {_us(state.best_secs)} us")
        index = self.states.index(state)
        path = self.log_dir / f"{index:03d}_{_safe_name(state.task.task_name)}.log"
        with path.open("a", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")

    def finish(self) -> None:
        """Print the summary (when shown), write it to the logs and log it."""
        summary = self.table(final=True)
        if self.show:
            self.console.print(summary)
        text = render(summary)
        logger.info("tuning summary\n%s", text)
        if self.log_dir is not None:
            (self.log_dir / "summary.txt").write_text(text, encoding="utf-8")

    def curves(self) -> dict[str, list[float]]:
        """Best seconds after each trial, per task (inf before the first success)."""
        return {s.task.task_name: list(s.history) for s in self.states}


def render(table: Table, width: int = 160) -> str:
    """``table`` as plain text."""
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(table)
    return console.export_text()


def plot_tuning_curves(curves: Mapping[str, Sequence[float]], path: str | os.PathLike[str]) -> Path:
    """Draw the best latency against trials, one line per task, into a PNG file.

    Parameters
    ----------
    curves
        Task name -> best seconds after each trial (inf before the first success), as
        :meth:`TuneProgress.curves` gives.
    path
        The PNG file to write.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    TuneError
        When matplotlib is missing (install ``tilecraft[plot]``).
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:
        raise TuneError("plot_tuning_curves needs matplotlib: pip install 'tilecraft[plot]'") from e
    fig = Figure(figsize=(7, 4.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for name, best in curves.items():
        points = [(n, b * 1e3) for n, b in enumerate(best, start=1) if math.isfinite(b)]
        if points:
            ax.step(*zip(*points, strict=True), where="post", label=name)
    ax.set_xlabel("trials")
    ax.set_ylabel("best latency (ms)")
    ax.set_yscale("log")
    ax.set_title("Tuning curves")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, format="png")
    return out
