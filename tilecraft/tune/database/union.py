"""Read-only views over several databases: ``UnionDatabase`` and ``OrderedUnionDatabase``.

``UnionDatabase(a, b)`` answers with the fastest record any of them holds;
``OrderedUnionDatabase(mine, team)`` answers from the first database that has a successful
record for the function (a local database first, a shared one as fallback). Both refuse
commits: write to one of the parts instead. A part that schedules without records
(:class:`~.schedule_fn.ScheduleFnDatabase`) is asked in its turn: by ``OrderedUnionDatabase``
in order, by ``UnionDatabase`` when no record of any part replays.
"""

from __future__ import annotations

from ...errors import DatabaseError
from ...ir import IRModule, PrimFunc
from ...target import Target
from .base import DEFAULT_REPLAY_TRIES, Database, Lookup
from .workload import TuningRecord, Workload, WorkloadKey


class _Union(Database):
    def __init__(self, *databases: Database) -> None:
        if not databases or not all(isinstance(d, Database) for d in databases):
            raise DatabaseError(f"{type(self).__name__}: expected one or more databases")
        modes = {d.module_equality for d in databases}
        if len(modes) != 1:
            raise DatabaseError(
                f"{type(self).__name__}: the databases use different module equalities "
                f"{sorted(m.value for m in modes)}"
            )
        super().__init__(modes.pop())
        self.databases = tuple(databases)

    def _workload(self, key: WorkloadKey) -> Workload | None:
        for db in self.databases:
            found = db._workload(key)
            if found is not None:
                return found
        return None

    def _store_workload(self, workload: Workload) -> Workload:
        raise DatabaseError(f"{type(self).__name__} is read-only; commit to one of its parts")

    def _store_record(self, record: TuningRecord) -> None:
        raise DatabaseError(f"{type(self).__name__} is read-only; commit to one of its parts")

    def commit_workload(
        self, mod: IRModule | PrimFunc, target: Target | str | None = None
    ) -> Workload:
        """Refused: a union is read-only."""
        raise DatabaseError(f"{type(self).__name__} is read-only; commit to one of its parts")

    def _workloads(self) -> list[Workload]:
        return [wl for db in self.databases for wl in db._workloads()]

    def get_all_tuning_records(self) -> list[TuningRecord]:
        """The records of every part, part by part."""
        return [r for db in self.databases for r in db.get_all_tuning_records()]

    def _other_targets(self, key: WorkloadKey) -> list[str]:
        return sorted({t for db in self.databases for t in db._other_targets(key)})


class UnionDatabase(_Union):
    """All ``databases`` at once: queries return the fastest record among them.

    Parameters
    ----------
    *databases
        The parts (same module equality).
    """

    def __init__(self, *databases: Database) -> None:
        super().__init__(*databases)
        self.schedules_without_records = any(d.schedules_without_records for d in databases)

    def _records(self, key: WorkloadKey) -> list[TuningRecord]:
        return [r for db in self.databases for r in db._records(key)]

    def lookup(
        self,
        mod: IRModule | PrimFunc,
        target: Target | str | None = None,
        workload_name: str = "main",
        tries: int = DEFAULT_REPLAY_TRIES,
    ) -> Lookup:
        """Replay the fastest records of all parts, then ask parts that need no records."""
        found = super().lookup(mod, target, workload_name, tries)
        if found.schedule is not None:
            return found
        reasons = [found.reason]
        for db in self.databases:
            if db.schedules_without_records:
                other = db.lookup(mod, target, workload_name, tries)
                if other.schedule is not None:
                    return other
                reasons.append(other.reason)
        return Lookup(None, None, "; ".join(dict.fromkeys(reasons)))


class OrderedUnionDatabase(_Union):
    """``databases`` in order: queries answer from the first with a successful record.

    Parameters
    ----------
    *databases
        The parts, most preferred first (same module equality).
    """

    def __init__(self, *databases: Database) -> None:
        super().__init__(*databases)
        self.schedules_without_records = any(d.schedules_without_records for d in databases)

    def _records(self, key: WorkloadKey) -> list[TuningRecord]:
        for db in self.databases:
            records = db._records(key)
            if any(r.ok for r in records):
                return records
        return []

    def lookup(
        self,
        mod: IRModule | PrimFunc,
        target: Target | str | None = None,
        workload_name: str = "main",
        tries: int = DEFAULT_REPLAY_TRIES,
    ) -> Lookup:
        """The first part whose lookup succeeds; otherwise every part's reason."""
        reasons: list[str] = []
        for i, db in enumerate(self.databases):
            found = db.lookup(mod, target, workload_name, tries)
            if found.schedule is not None:
                return found
            reasons.append(f"part {i}: {found.reason}")
        return Lookup(None, None, "; ".join(reasons))
