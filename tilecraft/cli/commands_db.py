"""``tilecraft db list|show|merge|prune|export``: tuning databases from the command line.

A database argument is a JSON database folder (``JSONDatabase``) or an SQLite file (``.db``,
``.sqlite``, ``.sqlite3``). Records are grouped by workload (structural hash + target key).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import click

from ..errors import DatabaseError
from ..tune import Database, JSONDatabase, TuningRecord
from ..tune.database import WorkloadKey
from .app import cli
from .output import emit_json, print_table, seconds_text
from .pipeline import open_database

DB = click.Path(path_type=Path)
JSON = click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")


@cli.group("db")
def db_group() -> None:
    """List, show, merge, prune and export tuning databases.

    A database is a JSON folder (tilecraft tune --work-dir) or an SQLite file
    (.db, .sqlite, .sqlite3).
    """


def _grouped(records: Iterable[TuningRecord]) -> dict[WorkloadKey, list[TuningRecord]]:
    groups: dict[WorkloadKey, list[TuningRecord]] = {}
    for r in records:
        groups.setdefault(r.workload.key, []).append(r)
    return groups


def _workload_row(key: WorkloadKey, records: Sequence[TuningRecord]) -> dict[str, Any]:
    ok = [r.mean_secs for r in records if r.ok]
    return {
        "workload": key.id,
        "structural_hash": key.shash,
        "target": key.target,
        "records": len(records),
        "failed": len(records) - len(ok),
        "best_s": min(ok) if ok else None,
    }


@db_group.command("list")
@click.argument("databases", type=DB, nargs=-1, required=True)
@JSON
def list_command(databases: tuple[Path, ...], as_json: bool) -> None:
    """The workloads of each database: target, records, failures, best time."""
    out: list[dict[str, Any]] = []
    for path in databases:
        db = open_database(path, create=False)
        groups = _grouped(db.get_all_tuning_records())
        out.append(
            {"database": str(path), "workloads": [_workload_row(k, rs) for k, rs in groups.items()]}
        )
    if as_json:
        emit_json(out)
        return
    for entry in out:
        rows = [
            (
                w["workload"][:12],
                w["structural_hash"][:12],
                w["target"],
                w["records"],
                w["failed"],
                seconds_text(w["best_s"]),
            )
            for w in entry["workloads"]
        ]
        print_table(
            ("workload", "hash", "target", "records", "failed", "best"),
            rows,
            title=entry["database"],
        )


def _record_row(r: TuningRecord, with_trace: bool) -> dict[str, Any]:
    row: dict[str, Any] = {
        "mean_s": r.mean_secs if r.ok else None,
        "run_secs": None if r.run_secs is None else list(r.run_secs),
        "error": r.error,
        "target": r.target,
        "instructions": len(r.trace),
    }
    if with_trace:
        row["trace"] = json.loads(r.trace.as_json())
    return row


@db_group.command("show")
@click.argument("database", type=DB)
@click.argument("workload", required=False)
@click.option(
    "--top-k",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Records shown per workload, fastest first (failed ones last).",
)
@click.option("--trace", "with_trace", is_flag=True, help="Show the best record's trace.")
@JSON
def show_command(
    database: Path, workload: str | None, top_k: int, with_trace: bool, as_json: bool
) -> None:
    """The records of each workload of DATABASE (or of WORKLOAD, an id or hash prefix)."""
    db = open_database(database, create=False)
    groups = _grouped(db.get_all_tuning_records())
    if workload is not None:
        groups = {
            k: v
            for k, v in groups.items()
            if k.id.startswith(workload) or k.shash.startswith(workload)
        }
        if not groups:
            raise DatabaseError(
                f"{database}: no workload whose id or hash starts with {workload!r}"
            )
    out = []
    for key, records in groups.items():
        ranked = sorted(records, key=lambda r: r.mean_secs)[:top_k]
        out.append(
            _workload_row(key, records) | {"top": [_record_row(r, with_trace) for r in ranked]}
        )
    if as_json:
        emit_json({"database": str(database), "workloads": out})
        return
    for w, key in zip(out, groups, strict=True):
        rows = [
            (seconds_text(r["mean_s"]), r["instructions"], r["target"], r["error"] or "")
            for r in w["top"]
        ]
        print_table(
            ("mean", "instructions", "measured on", "error"),
            rows,
            title=f"workload {w['workload']} ({w['target']})",
        )
        best = [r for r in groups[key] if r.ok]
        if with_trace and best:
            click.echo(min(best, key=lambda r: r.mean_secs).trace.as_python())


def _signature(r: TuningRecord) -> tuple[Any, ...]:
    return (r.workload.key.id, r.trace.as_json(), r.run_secs, r.error, r.target)


def _copy(records: Iterable[TuningRecord], dest: Database) -> tuple[int, int]:
    """Commit ``records`` into ``dest`` unless already there: (added, skipped)."""
    seen = {_signature(r) for r in dest.get_all_tuning_records()}
    added = skipped = 0
    for r in records:
        sig = _signature(r)
        if sig in seen:
            skipped += 1
            continue
        dest.commit_tuning_record(r)
        seen.add(sig)
        added += 1
    return added, skipped


def _check_targets(sources: dict[str, list[TuningRecord]]) -> None:
    """Refuse records of several targets (their keys' targets differ)."""
    where: dict[str, list[str]] = {}
    for name, records in sources.items():
        for t in sorted({r.workload.key.target for r in records}):
            where.setdefault(t, []).append(name)
    if len(where) > 1:
        listed = "; ".join(f"{t!r} in {', '.join(names)}" for t, names in where.items())
        raise DatabaseError(
            f"merge: the records are for {len(where)} targets ({listed}); pass "
            "--allow-mixed-targets to merge them anyway"
        )


@db_group.command("merge")
@click.argument("sources", type=DB, nargs=-1, required=True)
@click.option(
    "-o",
    "--output",
    type=DB,
    required=True,
    help="The database to merge into (created when missing).",
)
@click.option(
    "--allow-mixed-targets",
    is_flag=True,
    help="Merge records of different targets into one database.",
)
@JSON
def merge_command(
    sources: tuple[Path, ...], output: Path, allow_mixed_targets: bool, as_json: bool
) -> None:
    """Merge the records of SOURCES into OUTPUT (records already there are skipped).

    Refuses records of different targets (with those already in OUTPUT)
    unless --allow-mixed-targets.
    """
    read = {str(p): open_database(p, create=False).get_all_tuning_records() for p in sources}
    dest = open_database(output, create=True)
    if not allow_mixed_targets:
        _check_targets(read | {str(output): dest.get_all_tuning_records()})
    added, skipped = _copy((r for rs in read.values() for r in rs), dest)
    result = {
        "output": str(output),
        "added": added,
        "skipped": skipped,
        "records": len(dest.get_all_tuning_records()),
    }
    dest.close()
    if as_json:
        emit_json(result)
    else:
        click.echo(
            f"{output}: added {added} records, skipped {skipped} already present "
            f"({result['records']} records)"
        )


def _kept(db: Database, top_k: int, keep_failed: bool) -> list[TuningRecord]:
    """The ``top_k`` fastest records of each workload (and the failed ones if asked)."""
    kept = []
    for records in _grouped(db.get_all_tuning_records()).values():
        ok = sorted((r for r in records if r.ok), key=lambda r: r.mean_secs)
        kept += ok[:top_k] + ([r for r in records if not r.ok] if keep_failed else [])
    return kept


def _replace_json(path: Path, records: list[TuningRecord]) -> None:
    """Rewrite the JSON database at ``path`` to hold only ``records``."""
    tmp = Path(tempfile.mkdtemp(prefix=".prune-", dir=path.parent))
    try:
        fresh = JSONDatabase(tmp, fsync=True)
        _copy(records, fresh)
        for name in (fresh.path_workload.name, fresh.path_tuning_record.name):
            os.replace(tmp / name, path / name)
    except OSError as e:
        raise DatabaseError(f"prune: cannot rewrite {path}: {e}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@db_group.command("prune")
@click.argument("database", type=DB)
@click.option(
    "--top-k",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Records kept per workload, fastest first.",
)
@click.option("--keep-failed", is_flag=True, help="Keep the failed records too.")
@click.option(
    "-o",
    "--output",
    type=DB,
    default=None,
    help="Write the kept records here instead of rewriting DATABASE (JSON only).",
)
@JSON
def prune_command(
    database: Path, top_k: int, keep_failed: bool, output: Path | None, as_json: bool
) -> None:
    """Keep only the --top-k fastest records of each workload of DATABASE.

    A pruned database no longer counts the dropped trials: tuning into it
    again measures new candidates.
    """
    db = open_database(database, create=False)
    before = len(db.get_all_tuning_records())
    kept = _kept(db, top_k, keep_failed)
    if output is not None:
        _copy(kept, open_database(output, create=True))
    elif isinstance(db, JSONDatabase):
        _replace_json(database, kept)
    else:
        raise DatabaseError(
            f"prune: rewriting {database} in place is for JSON databases; give -o for a pruned copy"
        )
    result = {"database": str(output or database), "before": before, "kept": len(kept)}
    if as_json:
        emit_json(result)
    else:
        click.echo(f"{result['database']}: kept {len(kept)} of {before} records")


@db_group.command("export")
@click.argument("database", type=DB)
@click.argument("destination", type=DB)
@click.option(
    "--top-k",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Records exported per workload, fastest first.",
)
@JSON
def export_command(database: Path, destination: Path, top_k: int, as_json: bool) -> None:
    """Write the best records of DATABASE to a new DESTINATION database (a JSON folder or
    an SQLite file: this also converts between the two)."""
    if destination.exists():
        raise DatabaseError(f"export: {destination} exists; export writes a new database")
    kept = _kept(open_database(database, create=False), top_k, keep_failed=False)
    dest = open_database(destination, create=True)
    added, _ = _copy(kept, dest)
    dest.close()
    if as_json:
        emit_json({"database": str(destination), "records": added})
    else:
        click.echo(f"{destination}: wrote {added} records")
