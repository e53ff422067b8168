"""Measuring a task's fastest functions again, side by side with the rules' schedule.

On a loaded machine one measurement can come out lucky (a quiet moment), and the fastest of
dozens of candidates measured once each is then likely one whose measurement was lucky
rather than the fastest function: on two shared cores, a softmax 128x1024 candidate measured
1.14x faster than the rules' schedule ran at 0.73x its speed afterwards. :func:`confirm`
measures the task's ``top`` fastest functions and the rules' schedule ``rounds`` more times
each, in turn (A B C R A B C R), and commits every measurement as a record marked
``extra["confirm"]``. The database ranks a function by its median record (see
:meth:`~tilecraft.tune.Database.get_top_k`), so the winner is decided by measurements taken
side by side. Confirmation records are not trials: budgets and the search leave them out.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from ..ir import IRModule
from ..schedule import Schedule
from .builder.base import Builder, BuilderInput
from .database.base import Database, replay
from .database.workload import TuningRecord
from .runner.base import Runner, RunnerInput

if TYPE_CHECKING:
    from ._loop import TaskState

logger = logging.getLogger("tilecraft.tune")

CONFIRM_EXTRA = "confirm"
"""The ``extra`` key of a confirmation record."""


def is_confirmation(record: TuningRecord) -> bool:
    """Whether ``record`` measured again a function measured before (not a trial)."""
    return bool(record.extra.get(CONFIRM_EXTRA))


def _contenders(state: TaskState, db: Database, top: int) -> list[TuningRecord]:
    """The task's ``top`` fastest functions' records, and the rules' schedule's."""
    ranked = db.get_top_k(state.workload, len(db.records_of(state.workload)))
    picked = ranked[:top]
    if state.rules_key is not None and all(r.func_hash != state.rules_key for r in picked):
        picked += [r for r in ranked if r.func_hash == state.rules_key][:1]
    return [r for r in picked if r.func_hash is not None]


def confirm(
    state: TaskState, db: Database, builder: Builder, runner: Runner, top: int, rounds: int = 2
) -> list[TuningRecord]:
    """Measure the task's fastest functions again (module docstring); the new records.

    A function that does not replay, build or run again is left as it was measured.
    """
    contenders = _contenders(state, db, top)
    if len(contenders) < 2:
        return []  # one function: nothing to decide
    pairs = [(r, s) for r in contenders if isinstance(s := replay(state.func, r), Schedule)]
    target = state.task.target
    built = builder.build([BuilderInput(IRModule({"main": s.func}), target) for _, s in pairs])
    runnable = [(rec, b.artifact) for (rec, _), b in zip(pairs, built, strict=True) if b.artifact]
    order = runnable * rounds
    ran = runner.run([RunnerInput(art, state.args, None) for _, art in order])
    records = []
    for (rec, _), result in zip(order, ran, strict=True):
        if result.error is not None or not result.run_secs:
            name = state.task.task_name
            logger.info("task %s: a confirmation run failed: %s", name, result.error)
            continue
        again = TuningRecord(
            workload=state.workload,
            trace=rec.trace,
            run_secs=tuple(result.run_secs),
            target=rec.target,
            args_info=state.args,
            func_hash=rec.func_hash,
            extra={CONFIRM_EXTRA: True, "time": round(time.time(), 3)},
        )
        db.commit_tuning_record(again)
        records.append(again)
    best = db.get_top_k(state.workload, 1)
    if best:
        state.best_secs = best[0].mean_secs
    return records
