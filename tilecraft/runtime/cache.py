"""The content-addressed compile cache: verified entries, atomic writes, a private fallback.

An entry of kind ``cpu`` (shared libraries) or ``cuda`` (cubins) lives in
``<cache_dir>/<kind>/`` (:func:`tilecraft.config.cache_dir`, ``TILECRAFT_CACHE_DIR``) as the
artifact ``<key><suffix>`` and a sidecar ``<key>.json`` recording the key, the artifact's size
and its sha256. Both are written to temporary files and moved into place with ``os.replace``
(artifact first), so concurrent writers of one key all end with a complete entry.

Nothing is trusted that the sidecar does not vouch for: before an entry is used, its sidecar
must name the key and the artifact must have the recorded size and hash. A truncated, empty,
garbage or foreign artifact (another kernel's library copied under the key), or a missing or
malformed sidecar, makes the entry a miss: it is removed (where possible), logged, and rebuilt.
A truncated shared library must never reach ``dlopen`` — mapping it kills the process (SIGBUS).

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
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from .. import config

ENTRY_FORMAT = 1
"""Version of the sidecar layout; entries of another version are rebuilt."""

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
        fd, probe = tempfile.mkstemp(prefix=".probe-", dir=folder)
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


def _remove(*paths: Path) -> None:
    for p in paths:
        with contextlib.suppress(OSError):
            p.unlink()


def lookup(kind: str, key: str, suffix: str) -> Path | None:
    """The verified artifact of ``key``, or None (a corrupt entry is removed and logged)."""
    folders = [primary_folder(kind)]
    if kind in _fallback:
        folders.append(_fallback[kind])
    for folder in folders:
        artifact, sidecar = folder / f"{key}{suffix}", folder / f"{key}.json"
        try:
            present = artifact.exists() or sidecar.exists()
        except OSError:
            continue
        if not present:
            continue
        problem = _check_entry(artifact, sidecar, key)
        if problem is None:
            return artifact
        # an artifact without a sidecar may come from an older tilecraft: not worth a warning
        log = _log.info if problem == "no sidecar" else _log.warning
        log("compile cache entry %s is corrupt (%s); rebuilding it", artifact, problem)
        _remove(artifact, sidecar)
    return None


def commit(folder: Path, key: str, suffix: str, tmp_artifact: str | Path) -> Path:
    """Move the finished ``tmp_artifact`` (in ``folder``) into place as the entry of ``key``."""
    artifact = folder / f"{key}{suffix}"
    meta = {
        "format": ENTRY_FORMAT,
        "key": key,
        "size": os.stat(tmp_artifact).st_size,
        "sha256": _sha256(Path(tmp_artifact)),
    }
    fd, tmp_meta = tempfile.mkstemp(prefix=f".{key[:16]}-", suffix=".json", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(meta, f)
        os.replace(tmp_artifact, artifact)
        os.replace(tmp_meta, folder / f"{key}.json")
    finally:
        _remove(Path(tmp_meta))
    return artifact


def store_bytes(kind: str, key: str, suffix: str, data: bytes) -> Path:
    """Write ``data`` as the entry of ``key`` (for artifacts made in memory, like cubins)."""
    folder = writable_folder(kind)
    fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}-", suffix=suffix, dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return commit(folder, key, suffix, tmp)
    finally:
        _remove(Path(tmp))


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
        _log.warning("could not store a compile cache entry: %s", e)
    return data
