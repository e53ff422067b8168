"""The content-addressed compile cache: verified entries, atomic commits, a private fallback.

An entry of kind ``cpu`` (shared libraries) or ``cuda`` (cubins) is one directory
``<cache_dir>/<kind>/<key>/`` (:func:`tilecraft.config.cache_dir`, ``TILECRAFT_CACHE_DIR``)
holding the artifact ``<key><suffix>``, its record ``<key>.json`` (the key, the artifact's
size and sha256) and, for libraries, the C source ``<key>.c``. A writer fills a temporary
directory ``.tmp-<host>-<pidns>-<pid>-...`` in the same folder and commits it with one ``rename`` of
that directory, so another process sees either no entry or a complete one, never an artifact
without its record. When two writers commit one key, the first rename wins and the second
writer drops its copy (the contents are the same).

Nothing is trusted that the record does not vouch for: before an entry is used, its record
must name the key and the artifact must have the recorded size and hash. A truncated, empty,
garbage or foreign artifact (another kernel's library copied under the key), or a missing or
malformed record, makes the entry a miss: it is removed (where possible), logged, and rebuilt.
A truncated shared library must never reach ``dlopen`` — mapping it kills the process (SIGBUS).

Temporaries left by a writer that died (``kill -9`` during a compile) are removed by the next
writer of the folder: those of a process of this host and PID namespace that no longer runs,
and any older than :data:`STALE_AFTER_S`. A pid is only meaningful in its own PID namespace:
processes in a container, or under ``unshare --pid``, sharing the cache folder and the host
name with others would otherwise see a live writer's pid as gone and delete its temporary.

When the cache folder cannot be written (a read-only location, a path that is a file, no
permission), the process falls back to a private temporary folder, removed at exit, and logs
one warning naming the location and the reason.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import logging
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from .. import config

ENTRY_FORMAT = 2
"""Version of the entry layout; entries of another version are rebuilt."""
TMP_PREFIX = ".tmp-"
"""Names of temporaries in a cache folder (``.tmp-<host>-<pid>-<random>``)."""
STALE_AFTER_S = 3600.0
"""Age after which any temporary in a cache folder is taken as abandoned (a compile times
out after 300 s)."""

_log = logging.getLogger("tilecraft.runtime.cache")
_lock = threading.Lock()
_fallback: dict[str, Path] = {}  # kind -> private folder of this process
_unusable: set[str] = set()  # cache folders found unwritable in this process


def primary_folder(kind: str) -> Path:
    """``<cache_dir>/<kind>``: where entries of ``kind`` are looked up first."""
    return config.cache_dir() / kind


def _private_folder(kind: str, location: Path, reason: str) -> Path:
    with _lock:
        folder = _fallback.get(kind)
        if folder is None:
            root = Path(tempfile.mkdtemp(prefix="tilecraft-cache-"))
            atexit.register(shutil.rmtree, root, True)
            folder = _fallback[kind] = root / kind
            folder.mkdir()
            _log.warning(
                "the compile cache at %s is not usable (%s); compiled kernels go to the "
                "private folder %s for this process (set TILECRAFT_CACHE_DIR to a writable "
                "directory to keep them)",
                location, reason, folder,
            )  # fmt: skip
    return folder


def writable_folder(kind: str) -> Path:
    """The folder new entries of ``kind`` are written to (created on demand).

    The primary folder when it can be written, else this process's private fallback (with a
    warning the first time).
    """
    folder = primary_folder(kind)
    key = str(folder)
    if key in _unusable:
        return _private_folder(kind, folder, "not writable")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=_tmp_prefix(), dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        _unusable.add(key)
        return _private_folder(kind, folder, f"{type(e).__name__}: {e.strerror or e}")
    return folder


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _check_entry(artifact: Path, sidecar: Path, key: str) -> str | None:
    """None when the entry is sound, else why not."""
    try:
        meta = json.loads(sidecar.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return "no sidecar"
    except (OSError, ValueError) as e:
        return f"unreadable sidecar ({e})"
    if not isinstance(meta, dict) or meta.get("format") != ENTRY_FORMAT:
        return "sidecar of another format"
    if meta.get("key") != key:
        return f"sidecar names another key ({str(meta.get('key'))[:16]}...)"
    size, digest = meta.get("size"), meta.get("sha256")
    try:
        actual = artifact.stat().st_size
        if actual != size:
            return f"size {actual} bytes, recorded {size}"
        if _sha256(artifact) != digest:
            return "content differs from the recorded hash"
    except OSError as e:
        return f"unreadable artifact ({e.strerror or e})"
    return None


def _discard(entry: Path) -> None:
    """Remove the entry directory ``entry``: renamed away first, so the removal is atomic."""
    try:
        trash = Path(tempfile.mkdtemp(prefix=_tmp_prefix(), dir=entry.parent))
        os.rename(entry, trash / "entry")
    except OSError:  # gone already, or not ours to remove
        return
    shutil.rmtree(trash, ignore_errors=True)


def _entry_files(folder: Path, key: str, suffix: str) -> tuple[Path, Path]:
    entry = folder / key
    return entry / f"{key}{suffix}", entry / f"{key}.json"


def lookup(kind: str, key: str, suffix: str) -> Path | None:
    """The verified artifact of ``key``, or None (a corrupt entry is removed and logged)."""
    folders = [primary_folder(kind)]
    if kind in _fallback:
        folders.append(_fallback[kind])
    for folder in folders:
        artifact, sidecar = _entry_files(folder, key, suffix)
        try:
            present = artifact.parent.is_dir()
        except OSError:
            continue
        if not present:
            continue
        problem = _check_entry(artifact, sidecar, key)
        if problem is None:
            return artifact
        _log.warning("compile cache entry %s is corrupt (%s); rebuilding it", artifact, problem)
        _discard(artifact.parent)
    return None


def _host() -> str:
    return "".join(c if c.isalnum() else "_" for c in socket.gethostname())[:32]


def _pid_namespace() -> str:
    """This process's PID namespace (the inode of ``/proc/self/ns/pid``), or ``0`` unknown."""
    try:
        link = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    except OSError:
        return "0"
    digits = "".join(c for c in link if c.isdigit())
    return digits or "0"


def _tmp_prefix() -> str:
    return f"{TMP_PREFIX}{_host()}-{_pid_namespace()}-{os.getpid()}-"


def _abandoned(path: Path, now: float) -> bool:
    """True for a temporary whose writer is gone: long silent, or a pid of this host and PID
    namespace that no longer runs (a pid from another namespace says nothing here)."""
    try:
        age = now - path.lstat().st_mtime
    except OSError:
        return False
    if age > STALE_AFTER_S:
        return True
    parts = path.name[len(TMP_PREFIX) :].split("-")
    if len(parts) != 4 or parts[0] != _host() or parts[1] != _pid_namespace():
        return False  # another host or namespace (or an older name form): by age only
    if parts[1] == "0" or not parts[2].isdigit():
        return False
    try:
        os.kill(int(parts[2]), 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive under another user
        return False
    return False


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Remove the temporaries in ``folder`` that writers which died left behind."""
    now = time.time()
    removed: list[Path] = []
    try:
        names = [e.name for e in os.scandir(folder) if e.name.startswith(TMP_PREFIX)]
    except OSError:
        return removed
    for name in names:
        path = folder / name
        if not _abandoned(path, now):
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
        removed.append(path)
    if removed:
        _log.info("removed %d abandoned temporaries from %s", len(removed), folder)
    return removed


def new_entry(folder: Path) -> Path:
    """A fresh temporary directory in ``folder`` to build an entry in (see :func:`commit`).

    Temporaries abandoned by writers that died are removed first.
    """
    remove_stale_temporaries(folder)
    return Path(tempfile.mkdtemp(prefix=_tmp_prefix(), dir=folder))


def commit(folder: Path, key: str, suffix: str, staging: Path) -> Path:
    """Record the artifact ``staging/<key><suffix>`` and move ``staging`` into place.

    ``staging`` comes from :func:`new_entry`; it may hold other files of the entry (the
    source). One ``rename`` publishes the whole entry. When another writer committed ``key``
    first, its entry is kept (verified) and ``staging`` is removed.
    """
    tmp_artifact = staging / f"{key}{suffix}"
    meta = {
        "format": ENTRY_FORMAT,
        "key": key,
        "size": os.stat(tmp_artifact).st_size,
        "sha256": _sha256(tmp_artifact),
    }
    (staging / f"{key}.json").write_text(json.dumps(meta), encoding="utf-8")
    entry = folder / key
    try:
        os.rename(staging, entry)
    except OSError as e:
        if not entry.is_dir():
            shutil.rmtree(staging, ignore_errors=True)
            raise
        shutil.rmtree(staging, ignore_errors=True)  # another writer was first
        artifact, sidecar = _entry_files(folder, key, suffix)
        problem = _check_entry(artifact, sidecar, key)
        if problem is not None:
            raise OSError(f"compile cache entry {entry} is unusable ({problem})") from e
    return entry / f"{key}{suffix}"


def store_bytes(kind: str, key: str, suffix: str, data: bytes) -> Path:
    """Write ``data`` as the entry of ``key`` (for artifacts made in memory, like cubins)."""
    folder = writable_folder(kind)
    staging = new_entry(folder)
    try:
        (staging / f"{key}{suffix}").write_bytes(data)
        return commit(folder, key, suffix, staging)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def log_store_failure(e: OSError) -> None:
    """Log that an entry could not be stored (the build goes on without caching it)."""
    _log.warning("could not store a compile cache entry: %s", e)


def cached_bytes(kind: str, key: str, suffix: str, make: Callable[[], bytes]) -> bytes:
    """The verified cached bytes of ``key``, else ``make()`` stored under it.

    A cache that cannot be written (even in the private fallback) does not fail the build.
    """
    hit = lookup(kind, key, suffix)
    if hit is not None:
        with contextlib.suppress(OSError):
            return hit.read_bytes()
    data = make()
    try:
        store_bytes(kind, key, suffix, data)
    except OSError as e:
        log_store_failure(e)
    return data
