"""One task's tuning state and one measurement round: propose, build, run, record.

Every proposed candidate becomes exactly one tuning record, measured or failed: a build
error, a crash, a hang, an ``exit`` or a wrong result is recorded with its reason, and the
round goes on. Records are committed one by one as soon as they are known, so a tuner killed
mid-round keeps everything measured before.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from dataclasses import dataclass, field

from ..errors import TuneError
from ..ir import IRModule, PrimFunc, structural_hash
from ..schedule import Schedule
from ..target import Target
from .arg_info import ArgInfo, args_info
from .builder.base import Builder, BuilderInput
from .database.base import Database
from .database.workload import TuningRecord, Workload
from .runner.base import Runner, RunnerInput
from .search.base import SearchStrategy
from .space.base import SpaceGenerator
from .task import ExtractedTask

logger = logging.getLogger("tilecraft.tune")


@dataclass
class TaskState:
    """Where one task stands."""

    task: ExtractedTask
    workload: Workload
    args: tuple[ArgInfo, ...]
    strategy: SearchStrategy
    budget: int
    trials: int
    failed: int = 0
    best_secs: float = math.inf
    done: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def func(self) -> PrimFunc:
        """The unscheduled function."""
        return self.task.func

    @property
    def remaining(self) -> int:
        """Trials left in the task's budget."""
        return max(0, self.budget - self.trials)


def start_task(
    task: ExtractedTask,
    db: Database,
    target: Target,
    space: SpaceGenerator,
    strategy: SearchStrategy,
    budget: int,
    seed: int,
) -> TaskState:
    """Commit the task's workload, count its earlier trials and seed the strategy with them."""
    workload = db.commit_workload(task.mod, target)
    records = db.records_of(workload)
    ok = [r.mean_secs for r in records if r.ok]
    state = TaskState(task, workload, args_info(task.func), strategy, budget, len(records))
    state.failed = len(records) - len(ok)
    state.best_secs = min(ok, default=math.inf)
    if state.remaining == 0:
        state.done = True
        logger.info("task %s: %d trials already recorded; skipped", task.task_name, len(records))
        return state
    strategy.initialize(task.func, target, space, seed, records)
    if records:
        logger.info("task %s: resuming from %d recorded trials", task.task_name, len(records))
    return state


def run_round(
    state: TaskState,
    count: int,
    db: Database,
    builder: Builder,
    runner: Runner,
    check_correctness: bool,
) -> int:
    """Measure up to ``count`` new candidates of the task; returns how many were recorded."""
    candidates = state.strategy.generate(count)
    if state.strategy.exhausted:
        state.done = True
        if not candidates:
            why = state.strategy.last_error or "every draw repeated a measured candidate"
            message = (
                f"task {state.task.task_name}: the design space gives no new candidate ({why})"
            )
            if state.trials == 0:  # nothing was ever measured: most likely a space that fails
                warnings.warn(message, stacklevel=4)
            logger.info("%s", message)
    if not candidates:
        return 0
    target = state.task.target
    built = builder.build([BuilderInput(IRModule({"main": s.func}), target) for s in candidates])
    _check_count("builder", len(built), len(candidates))
    to_run = [(i, b.artifact) for i, b in enumerate(built) if b.artifact is not None]
    reference = state.func if check_correctness else None
    ran = runner.run([RunnerInput(art, state.args, reference) for _, art in to_run])
    _check_count("runner", len(ran), len(to_run))
    run_of = {i: r for (i, _), r in zip(to_run, ran, strict=True)}
    records: list[TuningRecord] = []
    for i, sch in enumerate(candidates):
        result = run_of.get(i)
        error = built[i].error if result is None else result.error
        secs = None if result is None or error is not None else result.run_secs
        rec = _record(state, sch, target, secs, error, built[i].build_secs)
        db.commit_tuning_record(rec)
        records.append(rec)
        _account(state, rec)
    state.strategy.notify(candidates, records)
    if state.remaining == 0:
        state.done = True
    return len(records)


def _check_count(what: str, got: int, want: int) -> None:
    if got != want:
        raise TuneError(f"the {what} returned {got} results for {want} candidates")


def _record(
    state: TaskState,
    sch: Schedule,
    target: Target,
    secs: tuple[float, ...] | None,
    error: str | None,
    build_secs: float,
) -> TuningRecord:
    if secs is None and error is None:
        error = "no run times"
    return TuningRecord(
        workload=state.workload,
        trace=sch.trace,
        run_secs=secs,
        target=str(target),
        args_info=state.args,
        error=error,
        func_hash=structural_hash(sch.func),
        extra={"build_secs": round(build_secs, 6), "time": round(time.time(), 3)},
    )


def _account(state: TaskState, rec: TuningRecord) -> None:
    state.trials += 1
    if rec.ok:
        state.best_secs = min(state.best_secs, rec.mean_secs)
    else:
        state.failed += 1
        first_line = (rec.error or "").splitlines()[0] if rec.error else ""
        logger.info("task %s: candidate failed: %s", state.task.task_name, first_line)
