"""One task's tuning state and one measurement round: propose, build, run, record.

A task's first candidate is the default rules' schedule (see :mod:`._defaults`), unless an
earlier run measured it already; the search strategy proposes the others. Every proposed
candidate becomes exactly one tuning record, measured or failed: a build
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
from ._confirm import is_confirmation
from .arg_info import ArgInfo, args_info
from .builder.base import Builder, BuilderInput
from .database.base import Database
from .database.workload import TuningRecord, Workload
from .flops import flop_count
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
    flops: int = 0
    history: list[float] = field(default_factory=list)
    """The best seconds after each trial (inf before the first success), records included."""
    first: list[Schedule] = field(default_factory=list)
    """Candidates measured before the strategy's: the rules' schedule when not yet measured."""
    from_space: int = 0
    """Candidates of the design space, earlier records included (the rules' one is not)."""
    rules_key: str | None = None
    """Structural hash of the rules' schedule (None: no rule takes the task)."""
    resumed: int = 0
    """Trials recorded before this run."""

    @property
    def func(self) -> PrimFunc:
        """The unscheduled function."""
        return self.task.func

    @property
    def weight(self) -> int:
        """The task's weight (call sites it stands for)."""
        return self.task.weight

    @property
    def remaining(self) -> int:
        """Trials left in the task's budget."""
        return max(0, self.budget - self.trials)

    @property
    def best_trial(self) -> int | None:
        """The 1-based trial that gave the best time; None before a success."""
        if not self.history or math.isinf(self.history[-1]):
            return None
        return self.history.index(self.history[-1]) + 1


def start_task(
    task: ExtractedTask,
    db: Database,
    target: Target,
    space: SpaceGenerator,
    strategy: SearchStrategy,
    budget: int,
    seed: int,
    first: Schedule | None = None,
) -> TaskState:
    """Commit the task's workload, count its earlier trials and seed the strategy with them.

    ``first`` (the rules' schedule) is measured before the strategy's candidates unless a
    record of the task already holds the same function.
    """
    workload = db.commit_workload(task.mod, target)
    records = [r for r in db.records_of(workload) if not is_confirmation(r)]
    state = TaskState(task, workload, args_info(task.func), strategy, budget, 0)
    state.flops = flop_count(task.func)
    for rec in records:
        _account(state, rec, quiet=True)
    state.resumed = state.trials
    if state.remaining == 0:
        state.done = True
        logger.info("task %s: %d trials already recorded; skipped", task.task_name, len(records))
        return state
    schedules = [r for r in records if r.library is None]  # library records replay nothing
    strategy.initialize(task.func, target, space, seed, schedules)
    key = structural_hash(first.func) if first is not None else None
    state.rules_key = key
    state.from_space = sum(1 for r in schedules if r.func_hash != key)
    if first is not None and key is not None and key not in strategy.measured:
        strategy.measured.add(key)  # the strategy must not propose it again
        state.first.append(first)
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
) -> list[TuningRecord]:
    """Measure up to ``count`` new candidates of the task; returns their records."""
    candidates = state.first[:count]
    del state.first[: len(candidates)]
    if len(candidates) < count:
        _propose(state, count - len(candidates), candidates)
    if not candidates:
        return []
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
        _account(state, rec, quiet=False)
    state.strategy.notify(candidates, records)
    if state.remaining == 0:
        state.done = True
    return records


def _propose(state: TaskState, count: int, candidates: list[Schedule]) -> None:
    """Append up to ``count`` of the strategy's candidates; mark the task done when dry."""
    found = state.strategy.generate(count)
    state.from_space += len(found)
    candidates.extend(found)
    if not state.strategy.exhausted:
        return
    state.done = True
    if found:
        return
    why = state.strategy.last_error or "every draw repeated a measured candidate"
    message = f"task {state.task.task_name}: the design space gives no new candidate ({why})"
    if state.from_space == 0:  # it never gave one: most likely a space that fails
        warnings.warn(message, stacklevel=5)
    logger.info("%s", message)


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


def _account(state: TaskState, rec: TuningRecord, quiet: bool) -> None:
    """Count one record (``quiet``: an earlier run's, not logged again)."""
    state.trials += 1
    if rec.ok:
        state.best_secs = min(state.best_secs, rec.mean_secs)
    else:
        state.failed += 1
        first_line = (rec.error or "").splitlines()[0] if rec.error else ""
        if not quiet:
            logger.info("task %s: candidate failed: %s", state.task.task_name, first_line)
    state.history.append(state.best_secs)
