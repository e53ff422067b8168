"""``ApplyDatabase``: replace each function that has a record by its best replayed schedule.

Builds never tune (K1): this pass only reads a database. Each PrimFunc of the module is
looked up by its workload key for the target (see :meth:`Database.lookup`); the best record
whose trace replays on the function replaces it, marked ``tc.scheduled = "database"`` (see
:mod:`tilecraft.ir.scheduled`; ``tc.tuned`` is still set for older readers), and every other
function is left as it was. A function already scheduled (it carries the mark, whoever set
it: a rule, a library dispatch, a person) is left alone: records never override another
scheduler, so ``ApplyDatabase`` and ``ApplyDefaultSchedule`` compose in either order and the
first to schedule a function keeps it. :attr:`ApplyDatabase.report` says how many matched
and why each of the others did not (already scheduled, no workload, records only for other
targets, every record failed, no record replays); the summary is also logged at INFO level
on ``tilecraft.tune``.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass, field

from ..errors import TuneError
from ..ir import BY_DATABASE, IRModule, is_scheduled, mark_scheduled
from ..ir.scheduled import LEGACY_TUNED_ATTR, RECORD_ATTR
from ..target import Target, as_target
from ._pass import TunePass
from .database.base import Database
from .database.json_db import JSONDatabase

logger = logging.getLogger("tilecraft.tune")


@dataclass
class ApplyReport:
    """What :class:`ApplyDatabase` did: matched functions and the reasons of the others."""

    matched: dict[str, str] = field(default_factory=dict)
    missed: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        total = len(self.matched) + len(self.missed)
        lines = [f"ApplyDatabase: {len(self.matched)} of {total} functions scheduled from records"]
        lines += [f"  {name}: {why}" for name, why in self.matched.items()]
        lines += [f"  {name}: not applied: {why}" for name, why in self.missed.items()]
        return "\n".join(lines)


class ApplyDatabase(TunePass):
    """Schedule the functions of a module from a tuning database.

    Parameters
    ----------
    work_dir
        A :class:`JSONDatabase` folder; None: the current database (``with db:``).
    database
        A database to use instead (not with ``work_dir``).
    target
        Default: the current target (``with target:``), else the CPU.
    """

    def __init__(
        self,
        work_dir: str | os.PathLike[str] | None = None,
        *,
        database: Database | None = None,
        target: Target | str | None = None,
    ) -> None:
        if work_dir is not None and database is not None:
            raise TuneError("ApplyDatabase: pass work_dir= or database=, not both")
        self.work_dir = work_dir
        self.database = database
        self.target = target
        self.report = ApplyReport()

    def _db(self) -> Database:
        if self.database is not None:
            return self.database
        if self.work_dir is not None:
            return JSONDatabase(self.work_dir, create=False)
        current = Database.current()
        if current is None:
            raise TuneError("ApplyDatabase: no database; pass work_dir= or use `with db:`")
        return current

    def transform_module(self, mod: IRModule) -> IRModule:
        """A new module with every function that has an applicable record scheduled."""
        db = self._db()
        tgt = as_target(self.target)
        report = ApplyReport()
        for name, func in mod.prim_funcs():
            if is_scheduled(func):
                report.missed[name] = "already scheduled"
                continue
            found = db.lookup(func, tgt)
            if found.schedule is None:
                report.missed[name] = found.reason
                continue
            scheduled = found.schedule.func.update(name=name).with_attr(LEGACY_TUNED_ATTR, True)
            scheduled = mark_scheduled(scheduled, BY_DATABASE)
            if found.record is not None:
                trace = hashlib.sha256(found.record.trace.as_json().encode()).hexdigest()
                record = f"{found.record.workload.key.shash}:{trace}"
                scheduled = scheduled.with_attr(RECORD_ATTR, record)
            mod = mod.with_function(name, scheduled)
            report.matched[name] = found.reason
        self.report = report
        logger.info("%s", report)
        return mod
