"""The database interface: commit workloads and records, query the best replayable schedule.

Every database matches a function by its :class:`~.workload.WorkloadKey` (structural hash
under the database's module equality, target, format version). ``with db:`` makes a database
current for :class:`~tilecraft.tune.ApplyDatabase` and the tuning entry points.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from types import TracebackType

from ...errors import DatabaseError, ScheduleError, TilecraftError
from ...ir import IRModule, PrimFunc
from ...schedule import Schedule
from ...target import Target
from .workload import (
    ModuleEquality,
    TuningRecord,
    Workload,
    WorkloadKey,
    as_prim_func,
    target_conflict,
)

_CURRENT = threading.local()

DEFAULT_REPLAY_TRIES = 5
"""How many of a workload's best records :meth:`Database.lookup` tries to replay."""


@dataclass(frozen=True)
class Lookup:
    """The answer of :meth:`Database.lookup`.

    Attributes
    ----------
    schedule
        The best record replayed on the queried function, or None.
    record
        The record that gave it (None for a miss or a :class:`ScheduleFnDatabase` hit).
    reason
        What was found, or why nothing was (shown by ``ApplyDatabase``'s report).
    """

    schedule: Schedule | None
    record: TuningRecord | None
    reason: str


class Database(ABC):
    """Base of the tuning databases.

    Parameters
    ----------
    module_equality
        ``"structural"`` (default), ``"ignore-ndarray"`` or ``"anchor-block"``: how functions
        are matched to workloads (see :mod:`tilecraft.tune.database.workload`).
    """

    schedules_without_records = False
    """True for databases that schedule a function without stored records."""

    def __init__(self, module_equality: ModuleEquality | str = ModuleEquality.STRUCTURAL) -> None:
        self.module_equality = ModuleEquality.parse(module_equality)

    # -- storage, provided by subclasses ---------------------------------------------------
    @abstractmethod
    def _workload(self, key: WorkloadKey) -> Workload | None:
        """The stored workload with ``key``."""

    @abstractmethod
    def _store_workload(self, workload: Workload) -> Workload:
        """Store ``workload`` unless its key is present; return the stored one."""

    @abstractmethod
    def _store_record(self, record: TuningRecord) -> None:
        """Store ``record`` (its workload is stored)."""

    @abstractmethod
    def _records(self, key: WorkloadKey) -> list[TuningRecord]:
        """Every record of the workload ``key``, in commit order."""

    @abstractmethod
    def _workloads(self) -> list[Workload]:
        """Every stored workload."""

    @abstractmethod
    def get_all_tuning_records(self) -> list[TuningRecord]:
        """Every record, failed ones included, in commit order."""

    # -- keys and workloads ----------------------------------------------------------------
    def key_of(
        self,
        mod: IRModule | PrimFunc,
        target: Target | str | None = None,
        workload_name: str = "main",
    ) -> WorkloadKey:
        """The key this database matches ``mod``'s function on."""
        return WorkloadKey.of(mod, target, self.module_equality, workload_name)

    def has_workload(self, mod: IRModule | PrimFunc, target: Target | str | None = None) -> bool:
        """True when ``mod``'s function was committed for ``target``."""
        return self._workload(self.key_of(mod, target)) is not None

    def commit_workload(
        self, mod: IRModule | PrimFunc, target: Target | str | None = None
    ) -> Workload:
        """Store ``mod``'s function as a workload for ``target`` (once) and return it."""
        wl = Workload.create(mod, target, self.module_equality)
        return self._workload(wl.key) or self._store_workload(wl)

    def commit_tuning_record(self, record: TuningRecord) -> None:
        """Store ``record`` (committing its workload first when needed).

        Raises
        ------
        DatabaseError
            When the record is inconsistent (run times and error both set or both missing)
            or cannot be stored.
        """
        if not isinstance(record, TuningRecord):
            raise DatabaseError(f"expected a TuningRecord, got {type(record).__name__}")
        if (record.run_secs is None) == (record.error is None):
            raise DatabaseError("a tuning record has run times or an error, exactly one")
        conflict = target_conflict(record.target, record.workload.key.target)
        if conflict is not None:
            raise DatabaseError(f"a tuning record belongs to another target: {conflict}")
        if not self._knows(record.workload.key):
            self._store_workload(record.workload)
        self._store_record(record)

    def _knows(self, key: WorkloadKey) -> bool:
        """Whether workload ``key`` is stored (storage-backed databases may answer from what
        they already read, so a commit does not wait on reading other writers' records)."""
        return self._workload(key) is not None

    # -- queries ---------------------------------------------------------------------------
    def records_of(self, workload: Workload | WorkloadKey) -> list[TuningRecord]:
        """Every record of ``workload`` (failed ones too), in commit order."""
        key = workload.key if isinstance(workload, Workload) else workload
        return list(self._records(key))

    def get_top_k(self, workload: Workload | WorkloadKey, top_k: int) -> list[TuningRecord]:
        """The ``top_k`` fastest successful records of ``workload``, fastest first, one per
        scheduled function (see :meth:`_ranked`)."""
        if top_k < 0:
            raise DatabaseError(f"get_top_k: top_k must be >= 0, got {top_k}")
        key = workload.key if isinstance(workload, Workload) else workload
        return self._ranked(key)[:top_k]

    def _ranked(self, key: WorkloadKey) -> list[TuningRecord]:
        """Successful records of ``key`` measured for its target, fastest first (stable in
        commit order), library records left out. Storage refuses other targets' records on
        load and on commit; checking again here keeps any storage from handing one out.

        A function measured more than once (records with the same ``func_hash``: the tuner
        measures its fastest candidates again, see ``tune_tasks(confirm_top=...)``) counts
        once, by its median record: on a loaded machine one measurement may come out lucky,
        and the fastest of many lucky draws is likely a slower function than it looks."""
        ok = (r for r in self._records(key) if r.ok and r.library is None)
        usable = [r for r in ok if target_conflict(r.target, key.target) is None]
        groups: dict[object, list[TuningRecord]] = {}
        for i, rec in enumerate(usable):
            groups.setdefault(rec.func_hash or i, []).append(rec)
        return sorted((_median(g) for g in groups.values()), key=lambda r: r.mean_secs)

    def query_tuning_record(
        self,
        mod: IRModule | PrimFunc,
        target: Target | str | None = None,
        workload_name: str = "main",
    ) -> TuningRecord | None:
        """The fastest successful record of ``mod``'s function for ``target``, if any."""
        ranked = self._ranked(self.key_of(mod, target, workload_name))
        return ranked[0] if ranked else None

    def query_library_record(
        self,
        mod: IRModule | PrimFunc,
        library: str,
        target: Target | str | None = None,
        workload_name: str = "main",
    ) -> TuningRecord | None:
        """The fastest successful library record of ``library`` (``"blas"``) for ``mod``'s
        function and ``target``, if any (see :attr:`TuningRecord.library`)."""
        key = self.key_of(mod, target, workload_name)
        found = [
            r
            for r in self._records(key)
            if r.ok and r.library == library and target_conflict(r.target, key.target) is None
        ]
        return min(found, key=lambda r: r.mean_secs) if found else None

    def query_schedule(
        self,
        mod: IRModule | PrimFunc,
        target: Target | str | None = None,
        workload_name: str = "main",
    ) -> Schedule | None:
        """The best record replayed on ``mod``'s function, or None (see :meth:`lookup`)."""
        return self.lookup(mod, target, workload_name).schedule

    def query_ir_module(
        self,
        mod: IRModule | PrimFunc,
        target: Target | str | None = None,
        workload_name: str = "main",
    ) -> IRModule | None:
        """The scheduled module of :meth:`query_schedule`, or None."""
        sch = self.query_schedule(mod, target, workload_name)
        return None if sch is None else sch.mod

    def lookup(
        self,
        mod: IRModule | PrimFunc,
        target: Target | str | None = None,
        workload_name: str = "main",
        tries: int = DEFAULT_REPLAY_TRIES,
    ) -> Lookup:
        """Replay the best records of ``mod``'s function until one applies.

        A record is only used for the target it was tuned for; the reason of a miss says
        when records exist for other targets only, when every record failed, or why the
        best records did not replay.
        """
        func = as_prim_func(mod, workload_name)
        key = self.key_of(func, target)
        ranked = self._ranked(key)
        if not ranked:
            return Lookup(None, None, self._explain_miss(key))
        errors: list[str] = []
        for rec in ranked[:tries]:
            sch = replay(func, rec)
            if isinstance(sch, Schedule):
                ms = rec.mean_secs * 1e3
                return Lookup(sch, rec, f"replayed the best of {len(ranked)} records ({ms:.4g} ms)")
            errors.append(sch)
        shown = "; ".join(errors[:3])
        return Lookup(None, None, f"none of the best {len(errors)} records replays: {shown}")

    def _explain_miss(self, key: WorkloadKey) -> str:
        others = self._other_targets(key)
        elsewhere = f"; records exist only for other targets: {others}" if others else ""
        if self._workload(key) is None:
            return f"no workload with this key (hash {key.shash[:12]}, {key.target}){elsewhere}"
        records = self._records(key)
        if not records:
            return f"the workload has no tuning records{elsewhere}"
        first = next((r.error for r in records if r.error), "no run times")
        return f"all {len(records)} records of the workload failed (first: {first}){elsewhere}"

    def _other_targets(self, key: WorkloadKey) -> list[str]:
        """Targets with successful records for the same function under the same equality."""
        found = {
            wl.key.target
            for wl in self._workloads()
            if wl.key.shash == key.shash
            and wl.key.equality is key.equality
            and wl.key.target != key.target
            and any(r.ok for r in self._records(wl.key))
        }
        return sorted(found)

    def __len__(self) -> int:
        return len(self.get_all_tuning_records())

    def close(self) -> None:
        """Release files or connections (the database stays usable for queries in memory)."""
        return None  # nothing to release by default

    # -- current database ------------------------------------------------------------------
    def __enter__(self) -> Database:
        stack = getattr(_CURRENT, "stack", None)
        if stack is None:
            stack = _CURRENT.stack = []
        stack.append(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        _CURRENT.stack.pop()

    @staticmethod
    def current() -> Database | None:
        """The database of the innermost ``with db:`` block, or None."""
        stack = getattr(_CURRENT, "stack", None)
        return stack[-1] if stack else None


def _median(records: list[TuningRecord]) -> TuningRecord:
    """The median record by mean time (of an even count, the slower middle one)."""
    return sorted(records, key=lambda r: r.mean_secs)[len(records) // 2]


_MALFORMED = (TypeError, ValueError, IndexError, KeyError, AttributeError, RecursionError)
"""What replaying a trace with ill-typed arguments raises today: ``Trace.from_json`` checks the
shape of a trace, not the types of each instruction's arguments, and the primitives assume
well-typed ones. A database is input, so such a record is reported, never raised."""


def replay(func: PrimFunc, record: TuningRecord) -> Schedule | str:
    """``record``'s trace replayed on a fresh schedule of ``func``, or why it failed."""
    sch = Schedule(func)
    try:
        record.trace.apply_to_schedule(sch)
    except ScheduleError as e:
        return f"{e.primitive}: {e.short}"
    except TilecraftError as e:
        return str(e).splitlines()[0]
    except _MALFORMED as e:
        return f"malformed trace ({type(e).__name__}: {e})"
    return sch
