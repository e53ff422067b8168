"""JSON form of workloads and tuning records: one object per line, validated on the way in.

Decoding never runs code from the data (``json`` plus the IR's and the trace's own JSON
readers). Every field's type and range is checked; a malformed value is a
:class:`DatabaseError` naming where it was found (file and line, or table and row);
:class:`TornLineError` marks text that is not JSON at all (a write cut short). The databases
skip such a line with a warning and keep the others: one bad record never makes a database
unusable.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from ...errors import DatabaseError, TilecraftError
from ...ir import IRModule, PrimFunc, from_json, to_json
from ...schedule import Trace
from ..arg_info import ArgInfo
from .workload import (
    FORMAT_VERSION,
    LIBRARY_EXTRA,
    LIBRARY_RECORD_VERSION,
    ModuleEquality,
    TuningRecord,
    Workload,
    WorkloadKey,
    target_conflict,
    workload_hash,
)

WORKLOAD_FORMAT = "tilecraft.workload"
RECORD_FORMAT = "tilecraft.record"


class TornLineError(DatabaseError):
    """A line that is not JSON: most likely a write that was cut short."""


class ForeignVersionError(DatabaseError):
    """A line written in another format version (by another tilecraft); it never matches."""


def _check_version(data: Mapping[str, Any], where: str, library_ok: bool = False) -> None:
    version = data.get("version")
    if library_ok and version == LIBRARY_RECORD_VERSION and not isinstance(version, bool):
        extra = data.get("extra")
        if not isinstance(extra, dict) or not isinstance(extra.get(LIBRARY_EXTRA), str):
            raise DatabaseError(f"{where}: a version {version} record must name its library")
        return
    if version != FORMAT_VERSION or isinstance(version, bool):
        raise ForeignVersionError(
            f"{where}: format version {version!r}; this tilecraft reads {FORMAT_VERSION}"
        )


def _reject_constant(name: str) -> Any:
    raise DatabaseError(f"bare {name} is not allowed in a database")


def parse_line(text: bytes | str, where: str) -> dict[str, Any]:
    """The JSON object on one line.

    Raises
    ------
    TornLineError
        When the text is not JSON (or not UTF-8).
    DatabaseError
        When it is JSON but not an object, or unreadable (absurd nesting, huge numbers).
    """
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TornLineError(f"{where}: not a complete JSON line ({e})") from None
    except (ValueError, RecursionError) as e:
        raise DatabaseError(f"{where}: unreadable JSON ({type(e).__name__}: {e})") from None
    if not isinstance(data, dict):
        raise DatabaseError(f"{where}: expected a JSON object, got {type(data).__name__}")
    return data


def _expect(data: Mapping[str, Any], fmt: str, keys: set[str], where: str) -> None:
    if data.get("format") != fmt:
        raise DatabaseError(f'{where}: expected "format": {fmt!r}, got {data.get("format")!r}')
    if set(data) != keys:
        raise DatabaseError(f"{where}: expected keys {sorted(keys)}, got {sorted(data)}")


def _str(data: Mapping[str, Any], key: str, where: str, optional: bool = False) -> Any:
    value = data[key]
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise DatabaseError(f"{where}: {key!r} must be a string, got {value!r}")
    return value


# -- workloads ------------------------------------------------------------------------------
_WORKLOAD_KEYS = {"format", "version", "id", "shash", "target", "equality", "mod"}


def encode_workload(wl: Workload) -> str:
    """One JSON line (without the newline) holding ``wl``."""
    data = {
        "format": WORKLOAD_FORMAT,
        "version": wl.key.version,
        "id": wl.key.id,
        "shash": wl.key.shash,
        "target": wl.key.target,
        "equality": wl.key.equality.value,
        "mod": json.loads(to_json(wl.mod)),
    }
    return json.dumps(data, separators=(",", ":"), allow_nan=False)


def decode_workload(data: Mapping[str, Any], where: str) -> tuple[str, Workload, bool]:
    """(stored id, workload, hash still matches) from a parsed workload line.

    A line of another format version raises :class:`ForeignVersionError` (callers skip it).

    The key is recomputed from the stored function; when it differs from the stored hash
    (a database written by a tilecraft whose hash differs) the recomputed key is used and
    the third value is False.

    Raises
    ------
    DatabaseError
        When the line is malformed or its function cannot be read.
    """
    _check_version(data, where)
    _expect(data, WORKLOAD_FORMAT, _WORKLOAD_KEYS, where)
    stored_id = _str(data, "id", where)
    shash, target = _str(data, "shash", where), _str(data, "target", where)
    try:
        equality = ModuleEquality.parse(_str(data, "equality", where))
    except TilecraftError as e:
        raise DatabaseError(f"{where}: {e}") from None
    mod = _decode_ir(data["mod"], where)
    funcs = mod.prim_funcs()
    if len(funcs) != 1 or funcs[0][0] != "main":
        raise DatabaseError(f"{where}: a workload module holds exactly one PrimFunc 'main'")
    func = funcs[0][1]
    now = workload_hash(func, equality)
    key = WorkloadKey(now, target, equality)
    return stored_id, Workload(key, mod), now == shash


def _decode_ir(value: Any, where: str) -> IRModule:
    try:
        mod = from_json(json.dumps(value))
    except (TilecraftError, RecursionError, ValueError) as e:
        raise DatabaseError(f"{where}: unreadable function: {e}") from None
    if isinstance(mod, PrimFunc):
        mod = IRModule({"main": mod.update(name="main")})
    if not isinstance(mod, IRModule):
        raise DatabaseError(f"{where}: 'mod' must hold an IRModule, got {type(mod).__name__}")
    return mod


# -- records --------------------------------------------------------------------------------
_RECORD_KEYS = {
    "format",
    "version",
    "workload",
    "trace",
    "run_secs",
    "error",
    "target",
    "args_info",
    "func_hash",
    "extra",
}


def encode_record(rec: TuningRecord) -> str:
    """One JSON line (without the newline) holding ``rec``."""
    data = {
        "format": RECORD_FORMAT,
        "version": FORMAT_VERSION if rec.library is None else LIBRARY_RECORD_VERSION,
        "workload": rec.workload.key.id,
        "trace": json.loads(rec.trace.as_json()),
        "run_secs": None if rec.run_secs is None else [float(s) for s in rec.run_secs],
        "error": rec.error,
        "target": rec.target,
        "args_info": [a.as_dict() for a in rec.args_info],
        "func_hash": rec.func_hash,
        "extra": dict(rec.extra),
    }
    try:
        return json.dumps(data, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise DatabaseError(f"cannot store tuning record: {e}") from None


def decode_record(
    data: Mapping[str, Any], where: str, workload_of: Callable[[str], Workload | None]
) -> TuningRecord | None:
    """The record on a parsed line; None when its workload is unknown (a torn workload line).

    Raises
    ------
    DatabaseError
        When the line is malformed (bad trace, run times, argument info...).
    """
    _check_version(data, where, library_ok=True)
    _expect(data, RECORD_FORMAT, _RECORD_KEYS, where)
    workload = workload_of(_str(data, "workload", where))
    if workload is None:
        return None
    try:
        trace = Trace.from_json(json.dumps(data["trace"]))
        args = tuple(ArgInfo.from_dict(a) for a in _list(data, "args_info", where))
    except (TilecraftError, RecursionError, ValueError) as e:
        raise DatabaseError(f"{where}: {e}") from None
    extra = data["extra"]
    if not isinstance(extra, dict):
        raise DatabaseError(f"{where}: 'extra' must be an object")
    run_secs = _run_secs(data["run_secs"], where)
    error = _str(data, "error", where, optional=True)
    if (run_secs is None) == (error is None):
        raise DatabaseError(f"{where}: a record has 'run_secs' or an 'error', exactly one")
    target = _str(data, "target", where)
    conflict = target_conflict(target, workload.key.target)
    if conflict is not None:
        raise DatabaseError(f"{where}: the record belongs to another target: {conflict}")
    return TuningRecord(
        workload=workload,
        trace=trace,
        run_secs=run_secs,
        target=target,
        args_info=args,
        error=error,
        func_hash=_str(data, "func_hash", where, optional=True),
        extra=extra,
    )


def _list(data: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = data[key]
    if not isinstance(value, list):
        raise DatabaseError(f"{where}: {key!r} must be a list")
    return value


def _run_secs(value: Any, where: str) -> tuple[float, ...] | None:
    if value is None:
        return None
    ok = isinstance(value, list) and all(
        isinstance(s, int | float) and not isinstance(s, bool) and math.isfinite(s) and s >= 0
        for s in value
    )
    if not ok:
        raise DatabaseError(f"{where}: 'run_secs' must be a list of non-negative seconds or null")
    return tuple(float(s) for s in value)
