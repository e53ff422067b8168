"""``SQLiteDatabase``: one SQLite file, for many concurrent writers.

Rows hold the same JSON lines as :class:`~.json_db.JSONDatabase` (validated the same way on
the way in). The file runs in WAL mode with a generous busy timeout, so writers in many
processes queue for the write lock instead of failing, and readers never block them. Each
commit is one transaction: a killed writer loses at most the row it was inserting.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ...errors import DatabaseError
from . import _codec
from .memory import MemoryDatabase
from .workload import ModuleEquality, TuningRecord, Workload

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS workloads ("
    "seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, line TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS records (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
    "line TEXT NOT NULL)",
)


class SQLiteDatabase(MemoryDatabase):
    """A database in the SQLite file ``path`` (created when missing).

    Parameters
    ----------
    path
        The database file.
    module_equality
        How functions are matched to workloads (see :class:`~.base.Database`).
    timeout_s
        How long a writer waits for the write lock before failing.

    Raises
    ------
    DatabaseError
        When the file is not an SQLite database or has another schema. A malformed row (bad
        JSON, a field of the wrong type or range, an unknown workload) is skipped with a
        warning naming the file, table and row id; the other rows stay usable.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        module_equality: ModuleEquality | str = ModuleEquality.STRUCTURAL,
        *,
        timeout_s: float = 60.0,
    ) -> None:
        super().__init__(module_equality)
        self.path = Path(path)
        self._seen = {"workloads": 0, "records": 0}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn: sqlite3.Connection | None = sqlite3.connect(
                str(self.path), timeout=timeout_s, isolation_level=None, check_same_thread=False
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            for stmt in _SCHEMA:
                self._conn.execute(stmt)
        except (sqlite3.Error, OSError) as e:
            raise DatabaseError(f"cannot open the SQLite database {self.path}: {e}") from None
        self._refresh()

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise DatabaseError(f"SQLiteDatabase {self.path} is closed")
        return self._conn

    def _refresh(self) -> None:
        with self._lock:
            if self._conn is None:
                return
            for table, ingest in (
                ("workloads", self._ingest_workload),
                ("records", self._ingest_record),
            ):
                try:
                    rows = (
                        self._db()
                        .execute(
                            f"SELECT seq, line FROM {table} WHERE seq > ? ORDER BY seq",
                            (self._seen[table],),
                        )
                        .fetchall()
                    )
                except sqlite3.Error as e:
                    raise DatabaseError(f"cannot read {self.path}: {e}") from None
                for seq, line in rows:
                    where = f"{self.path}: {table} row {seq!r}"
                    if not isinstance(seq, int):
                        raise DatabaseError(f"{where}: the row id is not an integer")
                    self._seen[table] = seq
                    if not isinstance(line, str | bytes):
                        self._note(f"{where}: skipped a row whose line is not text")
                    elif (table, seq) not in self._own:
                        ingest(line, where, False)

    def _execute(self, sql: str, params: tuple[str, ...]) -> int | None:
        try:
            return self._db().execute(sql, params).lastrowid
        except sqlite3.Error as e:
            raise DatabaseError(f"cannot write to {self.path}: {e}") from None

    def _persist_workload(self, workload: Workload) -> bool:
        line = _codec.encode_workload(workload)
        self._execute(
            "INSERT OR IGNORE INTO workloads (id, line) VALUES (?, ?)", (workload.key.id, line)
        )
        return True

    def _persist_record(self, record: TuningRecord) -> object | None:
        line = _codec.encode_record(record)
        return ("records", self._execute("INSERT INTO records (line) VALUES (?)", (line,)))

    def close(self) -> None:
        """Close the connection (what was read stays queryable)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __repr__(self) -> str:
        return f"SQLiteDatabase({str(self.path)!r}, {len(self._all)} records)"
