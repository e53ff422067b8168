"""``JSONDatabase``: two append-only JSON-lines files in a work directory.

``database_workload.json`` holds one workload per line, ``database_tuning_record.json`` one
tuning record per line (records name their workload by key id, not by line number, so
writers never need to agree on positions).

Safety:

* every line is appended with one ``write`` on a descriptor opened with ``O_APPEND``, under an
  exclusive ``flock``; readers take a shared lock, so they never see half of a live write;
* a line cut short by a crash (no trailing newline) is skipped with a warning, and the next
  writer ends it with a newline before appending, so it never glues onto a good record;
* a complete line that is malformed (a field of the wrong type or out of range, edited by
  hand or written by a buggy tool) is skipped with a warning naming the file and line; the
  other lines load;
* ``kill -9`` of a writer therefore loses at most the line being written; everything before
  it loads. ``fsync=True`` also survives power loss, at the cost of a disk flush per line;
* the index is refreshed from the files before each query, so records committed by other
  processes are seen.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from ...errors import DatabaseError
from . import _codec
from .memory import MemoryDatabase
from .workload import ModuleEquality, TuningRecord, Workload

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: appends stay atomic, reads unlocked
    fcntl = None  # type: ignore[assignment]

_Ingest = Callable[[bytes, str, bool], None]

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"


@contextlib.contextmanager
def _locked(fd: int, exclusive: bool) -> Iterator[None]:
    if fcntl is None:
        yield
        return
    fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def append_line(path: Path, line: str, fsync: bool = False) -> int:
    """Append ``line`` and a newline to ``path`` atomically with respect to other writers.

    Returns the offset where the line starts.

    Raises
    ------
    DatabaseError
        When the file cannot be opened or written.
    """
    data = line.encode("utf-8") + b"\n"
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as e:
        raise DatabaseError(f"cannot open {path} for appending: {e}") from None
    try:
        with _locked(fd, exclusive=True):
            size = os.fstat(fd).st_size
            start = size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data  # end a line torn by a crashed writer
                start += 1
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if fsync:
                os.fsync(fd)
    except OSError as e:
        raise DatabaseError(f"cannot append to {path}: {e}") from None
    finally:
        os.close(fd)
    return start


class _Tail:
    """Reads the lines appended to one file since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.line_no = 0
        self.partial = False  # the last read ended inside a line (a torn write)

    def new_lines(self) -> list[tuple[int, int, bytes, bool]]:
        """(line number, offset, text, complete) of each new line.

        A last line without newline is returned once as incomplete; whatever later ends it
        (a writer's repairing newline) is not returned again.
        """
        data = self._read_new()
        pos = self.offset
        self.offset += len(data)
        chunks = data.split(b"\n")
        out: list[tuple[int, int, bytes, bool]] = []
        for i, chunk in enumerate(chunks):
            last = i == len(chunks) - 1
            start, pos = pos, pos + len(chunk) + 1
            if i == 0 and self.partial:
                self.partial = last  # the torn line goes on (or ends here); never re-read
                continue
            if last and not chunk:
                break
            self.line_no += 1
            out.append((self.line_no, start, chunk, not last))
            self.partial = last
        return out

    def _read_new(self) -> bytes:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return b""
        except OSError as e:
            raise DatabaseError(f"cannot read {self.path}: {e}") from None
        try:
            with _locked(fd, exclusive=False):
                size = os.fstat(fd).st_size
                if size < self.offset:
                    raise DatabaseError(f"{self.path} shrank while open; it is append-only")
                return os.pread(fd, size - self.offset, self.offset) if size > self.offset else b""
        except OSError as e:
            raise DatabaseError(f"cannot read {self.path}: {e}") from None
        finally:
            os.close(fd)


class JSONDatabase(MemoryDatabase):
    """A database of two JSON-lines files in ``work_dir`` (created when missing).

    Parameters
    ----------
    work_dir
        Folder of ``database_workload.json`` and ``database_tuning_record.json``.
    module_equality
        How functions are matched to workloads (see :class:`~.base.Database`).
    fsync
        Flush every appended line to disk (survives power loss; slower).
    create
        Create ``work_dir`` when missing (False: a missing folder is an error, which catches
        a mistyped path when only reading).

    Raises
    ------
    DatabaseError
        When the folder is missing (``create=False``) or cannot be created. A line cut short
        by a crash, or a malformed one (a field of the wrong type or range, an unknown
        workload), is skipped with a warning naming the file and line; the other lines stay
        usable.
    """

    def __init__(
        self,
        work_dir: str | os.PathLike[str],
        module_equality: ModuleEquality | str = ModuleEquality.STRUCTURAL,
        *,
        fsync: bool = False,
        create: bool = True,
    ) -> None:
        super().__init__(module_equality)
        self.work_dir = Path(work_dir)
        if not create and not self.work_dir.is_dir():
            raise DatabaseError(f"no tuning database at {self.work_dir}: the folder is missing")
        try:
            self.work_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise DatabaseError(f"cannot create the database folder {self.work_dir}: {e}") from None
        self.fsync = fsync
        self.path_workload = self.work_dir / WORKLOAD_FILE
        self.path_tuning_record = self.work_dir / RECORD_FILE
        self._tails = (_Tail(self.path_workload), _Tail(self.path_tuning_record))
        self._refresh()

    def _refresh(self) -> None:
        with self._lock:
            wl_tail, rec_tail = self._tails
            for line_no, _, text, complete in wl_tail.new_lines():
                self._read(self._ingest_workload, wl_tail.path, line_no, text, complete)
            for line_no, offset, text, complete in rec_tail.new_lines():
                if ("record", offset) in self._own:
                    continue  # written (and indexed) by this object
                self._read(self._ingest_record, rec_tail.path, line_no, text, complete)

    def _read(self, ingest: _Ingest, path: Path, line_no: int, text: bytes, complete: bool) -> None:
        if not text.strip():
            return
        where = f"{path}:{line_no}"
        if not complete:
            self._note(f"{where}: skipped a last line without newline (torn write?)")
            return
        ingest(text, where, True)

    def _persist_workload(self, workload: Workload) -> bool:
        append_line(self.path_workload, _codec.encode_workload(workload), self.fsync)
        return True

    def _persist_record(self, record: TuningRecord) -> object | None:
        line = _codec.encode_record(record)
        return ("record", append_line(self.path_tuning_record, line, self.fsync))

    def __repr__(self) -> str:
        return f"JSONDatabase({str(self.work_dir)!r}, {len(self._all)} records)"
