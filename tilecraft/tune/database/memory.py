"""``MemoryDatabase``: an in-memory index of workloads and records (the file databases' core).

The persistent databases keep the same index and feed it from their storage: every line (or
row) they read passes through :meth:`MemoryDatabase._ingest_workload` /
:meth:`MemoryDatabase._ingest_record`, and their own commits are written first and then read
back, so the storage stays the single source of truth when several processes write.
"""

from __future__ import annotations

import threading
import warnings

from ...errors import DatabaseError
from . import _codec
from .base import Database
from .workload import ModuleEquality, TuningRecord, Workload, WorkloadKey


class MemoryDatabase(Database):
    """A database held in memory only (lost when the process ends).

    Parameters
    ----------
    module_equality
        How functions are matched to workloads (see :class:`Database`).
    """

    def __init__(self, module_equality: ModuleEquality | str = ModuleEquality.STRUCTURAL) -> None:
        super().__init__(module_equality)
        self._lock = threading.RLock()
        self._by_key: dict[WorkloadKey, Workload] = {}
        self._by_id: dict[str, Workload] = {}
        self._by_workload: dict[WorkloadKey, list[TuningRecord]] = {}
        self._all: list[TuningRecord] = []
        self._notes: list[str] = []
        self._own: set[object] = set()  # storage places of records this object wrote

    # -- storage hooks for persistent subclasses ------------------------------------------
    def _refresh(self) -> None:
        """Read what other writers added since the last call (nothing to do in memory)."""

    def _persist_workload(self, workload: Workload) -> bool:
        """Write ``workload`` to storage; False when there is none (memory only)."""
        del workload
        return False

    def _persist_record(self, record: TuningRecord) -> object | None:
        """Write ``record`` to storage and return a token naming where (None: memory only).

        The record is indexed right away; reading storage skips the places named by tokens,
        so a writer never decodes its own records again.
        """
        del record
        return None

    # -- index ------------------------------------------------------------------------------
    def _index_workload(self, stored_id: str, workload: Workload) -> Workload:
        with self._lock:
            kept = self._by_key.setdefault(workload.key, workload)
            self._by_id.setdefault(stored_id, kept)
            return kept

    def _index_record(self, record: TuningRecord) -> None:
        with self._lock:
            self._by_workload.setdefault(record.workload.key, []).append(record)
            self._all.append(record)

    def _note(self, message: str) -> None:
        """Warn once about something skipped while reading storage."""
        if message not in self._notes:
            self._notes.append(message)
            warnings.warn(message, stacklevel=3)

    def _skip(self, where: str, error: DatabaseError, torn_ok: bool) -> None:
        """Warn that the line (or row) at ``where`` was skipped, and why."""
        why = str(error).removeprefix(f"{where}: ")
        if isinstance(error, _codec.ForeignVersionError):
            self._note(f"{where}: skipped a line of another format version: {why}")
        elif isinstance(error, _codec.TornLineError) and torn_ok:
            self._note(f"{where}: skipped an unreadable line (torn write?): {why}")
        else:
            self._note(f"{where}: skipped a malformed line; the rest is usable: {why}")

    def _ingest_workload(self, text: bytes | str, where: str, torn_ok: bool) -> None:
        """Decode one stored workload line into the index (skipping bad lines with a warning:
        torn, of another format version, or malformed)."""
        try:
            data = _codec.parse_line(text, where)
            stored_id, wl, same_hash = _codec.decode_workload(data, where)
        except DatabaseError as e:
            self._skip(where, e, torn_ok)
            return
        if not same_hash:
            self._note(
                f"{where}: the stored structural hash differs from this tilecraft's; the "
                "workload is matched by the hash computed now"
            )
        self._index_workload(stored_id, wl)

    def _ingest_record(self, text: bytes | str, where: str, torn_ok: bool) -> None:
        """Decode one stored record line into the index (skipping bad lines with a warning:
        torn, of another format version, malformed, or of an unknown workload)."""
        try:
            data = _codec.parse_line(text, where)
            rec = _codec.decode_record(data, where, self._by_id.get)
        except DatabaseError as e:
            self._skip(where, e, torn_ok)
            return
        if rec is None:
            self._note(f"{where}: skipped records of a workload that is not in the database")
            return
        self._index_record(rec)

    # -- Database ---------------------------------------------------------------------------
    def _workload(self, key: WorkloadKey) -> Workload | None:
        self._refresh()
        with self._lock:
            return self._by_key.get(key)

    def _knows(self, key: WorkloadKey) -> bool:
        with self._lock:
            return key in self._by_key

    def _store_workload(self, workload: Workload) -> Workload:
        with self._lock:
            self._refresh()
            found = self._by_key.get(workload.key)
            if found is not None:
                return found
            if not self._persist_workload(workload):
                return self._index_workload(workload.key.id, workload)
            self._refresh()
            stored = self._by_key.get(workload.key)
            if stored is None:
                raise DatabaseError("a committed workload was not found when read back")
            return stored

    def _store_record(self, record: TuningRecord) -> None:
        with self._lock:
            token = self._persist_record(record)
            if token is not None:
                self._own.add(token)
            self._index_record(record)

    def _records(self, key: WorkloadKey) -> list[TuningRecord]:
        self._refresh()
        with self._lock:
            return list(self._by_workload.get(key, ()))

    def _workloads(self) -> list[Workload]:
        self._refresh()
        with self._lock:
            return list(self._by_key.values())

    def get_all_tuning_records(self) -> list[TuningRecord]:
        """Every record, failed ones included, in the order they were stored."""
        self._refresh()
        with self._lock:
            return list(self._all)

    @property
    def notes(self) -> list[str]:
        """Warnings raised while reading storage (torn lines, foreign versions...)."""
        return list(self._notes)
