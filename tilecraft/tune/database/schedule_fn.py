"""``ScheduleFnDatabase``: a "database" that schedules any function with a Python function.

Useful in an :class:`~.union.OrderedUnionDatabase` after a real database, so hand-written
schedules cover what tuning did not, and in tests. It stores nothing: commits are refused.
"""

from __future__ import annotations

from collections.abc import Callable

from ...errors import DatabaseError, ScheduleError
from ...ir import IRModule, PrimFunc
from ...schedule import Schedule
from ...target import Target
from .base import DEFAULT_REPLAY_TRIES, Database, Lookup
from .workload import ModuleEquality, TuningRecord, Workload, WorkloadKey, as_prim_func

ScheduleFn = Callable[[Schedule], bool]


class ScheduleFnDatabase(Database):
    """Schedule every queried function with ``schedule_fn(sch) -> bool``.

    Parameters
    ----------
    schedule_fn
        Applies primitives to ``sch`` (a fresh schedule of the queried function) and returns
        True when it scheduled it, False to decline. A ScheduleError counts as declining.
    module_equality
        Kept for combining with other databases in a union.
    """

    schedules_without_records = True

    def __init__(
        self,
        schedule_fn: ScheduleFn,
        module_equality: ModuleEquality | str = ModuleEquality.STRUCTURAL,
    ) -> None:
        if not callable(schedule_fn):
            raise DatabaseError(f"ScheduleFnDatabase: expected a callable, got {schedule_fn!r}")
        super().__init__(module_equality)
        self.schedule_fn = schedule_fn

    def _workload(self, key: WorkloadKey) -> Workload | None:
        return None

    def _store_workload(self, workload: Workload) -> Workload:
        raise DatabaseError("ScheduleFnDatabase stores nothing")

    def _store_record(self, record: TuningRecord) -> None:
        raise DatabaseError("ScheduleFnDatabase stores nothing")

    def commit_workload(
        self, mod: IRModule | PrimFunc, target: Target | str | None = None
    ) -> Workload:
        """Refused: nothing is stored."""
        raise DatabaseError("ScheduleFnDatabase stores nothing")

    def _records(self, key: WorkloadKey) -> list[TuningRecord]:
        return []

    def _workloads(self) -> list[Workload]:
        return []

    def get_all_tuning_records(self) -> list[TuningRecord]:
        """Always empty."""
        return []

    def has_workload(self, mod: IRModule | PrimFunc, target: Target | str | None = None) -> bool:
        """True: any function may be offered to the schedule function."""
        return True

    def lookup(
        self,
        mod: IRModule | PrimFunc,
        target: Target | str | None = None,
        workload_name: str = "main",
        tries: int = DEFAULT_REPLAY_TRIES,
    ) -> Lookup:
        """Run the schedule function on a fresh schedule of ``mod``'s function."""
        del target, tries
        sch = Schedule(as_prim_func(mod, workload_name))
        try:
            taken = self.schedule_fn(sch)
        except ScheduleError as e:
            return Lookup(None, None, f"the schedule function failed: {e.primitive}: {e.short}")
        if not taken:
            return Lookup(None, None, "the schedule function declined")
        return Lookup(sch, None, "scheduled by the schedule function")
