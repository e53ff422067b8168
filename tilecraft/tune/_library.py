"""The library as one more candidate of each GEMM task (K2 meets K1).

In a tuning run, every task whose function a vendor library computes
(:class:`tilecraft.dispatch.measure.LibraryCandidate`: a GEMM with or without an epilogue)
gets the library path measured once, on this machine, with the runner's timing settings and
threads, after the search (one trial of the task is kept for it), when the tuner's workers
are idle. The result is a *library record* of the task's workload
(:attr:`~tilecraft.tune.database.workload.TuningRecord.library`, written as a format-version-2
line that older readers skip): it counts as one trial of the task, enters the task's best
time and the live table, and is never replayed. ``DispatchLibrary(database=db)`` then sends a
function to the library only when its library record beats its best tuned record, so the
path ``tc.compile(..., database=db)`` takes is the fastest measured per function.

By default (``libraries=None``) BLAS is measured when it is installed, the target is a CPU
and the tuner makes its own runner (a :class:`LocalRunner` measuring on this machine, whose
timing settings and threads the library gets too). A runner passed in may measure elsewhere
(Ray) or its own way: then the library is measured only when asked, ``libraries=["blas"]``.
A task that already has a library record (a resumed run) is not measured again.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from ..dispatch.measure import LibraryCandidate, candidate
from ..errors import TilecraftError
from ..schedule import Trace
from ..target import Target
from ._loop import TaskState, _account
from .database.base import Database
from .database.workload import LIBRARY_EXTRA, TuningRecord
from .runner.base import Runner
from .runner.local import LocalRunner

logger = logging.getLogger("tilecraft.tune")

LibrariesLike = Sequence[str | LibraryCandidate] | None


def library_candidates(
    libraries: LibrariesLike, runner: Runner | None, target: Target
) -> list[LibraryCandidate]:
    """The candidates to measure: ``libraries`` resolved, or the default (module docstring)."""
    auto = libraries is None
    if auto:
        libraries = ["blas"] if runner is None and target.kind == "cpu" else []
    assert libraries is not None  # for mypy: set just above when it was None
    found = []
    for lib in libraries:
        cand = candidate(lib) if isinstance(lib, str) else lib
        why = cand.unavailable(target)
        if why is None:
            found.append(cand)
        elif auto:
            logger.info("library %s is not measured: %s", cand.name, why)
        else:
            warnings.warn(f"library {cand.name} is not measured: {why}", stacklevel=4)
    return found


def library_plan(
    states: Sequence[TaskState],
    candidates: Sequence[LibraryCandidate],
    db: Database,
    budget_left: int,
) -> list[tuple[TaskState, LibraryCandidate]]:
    """The (task, library) pairs to measure: each library on each task it computes that has
    no library record yet and trials left, within ``budget_left`` trials."""
    plan: list[tuple[TaskState, LibraryCandidate]] = []
    for state in states:
        left = state.remaining
        for cand in candidates:
            if len(plan) >= budget_left or left <= 0 or state.done:
                break
            if cand.declines(state.func) is None and not _measured(state, cand, db):
                plan.append((state, cand))
                left -= 1
    return plan


@contextmanager
def reserved(plan: Sequence[tuple[TaskState, LibraryCandidate]]) -> Iterator[None]:
    """Keep one trial of each planned task for its library while the search runs."""
    for state, _ in plan:
        state.budget -= 1
    try:
        yield
    finally:
        for state, _ in plan:
            state.budget += 1


def measure_libraries(
    plan: Sequence[tuple[TaskState, LibraryCandidate]], db: Database, runner: Runner | None
) -> list[tuple[TaskState, TuningRecord]]:
    """Measure each planned (task, library) pair once; the records are committed and counted.

    Run after the search, when the tuner's own build and measurement workers are idle: the
    library is timed in this process and must not share the cores with them."""
    done: list[tuple[TaskState, TuningRecord]] = []
    for state, cand in plan:
        rec = _measure(state, cand, runner)
        db.commit_tuning_record(rec)
        _account(state, rec, quiet=False)
        done.append((state, rec))
    return done


def _measured(state: TaskState, cand: LibraryCandidate, db: Database) -> bool:
    return any(r.library == cand.name for r in db.records_of(state.workload))


def _measure(state: TaskState, cand: LibraryCandidate, runner: Runner | None) -> TuningRecord:
    target = state.task.target
    number, repeat, warmup, threads = 3, 3, 1, target.num_cores
    if isinstance(runner, LocalRunner):
        ev = runner.evaluator
        number, repeat, warmup, threads = ev.number, ev.repeat, ev.warmup, runner.num_threads
    secs: tuple[float, ...] | None = None
    error = None
    try:
        secs = cand.measure(
            state.func, target, number=number, repeat=repeat, warmup=warmup, num_threads=threads
        )
    except TilecraftError as e:  # a failed candidate is a record, never fatal
        error = f"{cand.name}: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
    logger.info(
        "task %s: library %s %s",
        state.task.task_name,
        cand.name,
        error or f"{sum(secs or ()) / max(1, len(secs or ())) * 1e3:.4g} ms",
    )
    return TuningRecord(
        workload=state.workload,
        trace=Trace(),
        run_secs=secs,
        target=str(target),
        args_info=state.args,
        error=error,
        extra={LIBRARY_EXTRA: cand.name, "num_threads": threads, "time": round(time.time(), 3)},
    )
