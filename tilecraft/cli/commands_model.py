"""``tilecraft compile``, ``explain`` and ``tune``: commands that read a model file."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from ..errors import TilecraftError
from ..frontend import nn
from ..target import Target
from ..tune import Database, tune_tasks
from ..tune.progress import should_show
from ..tune.task import ExtractedTask
from .app import cli
from .models import load_model, parse_input_spec
from .output import Progress, emit_json, print_table, seconds_text
from .pipeline import (
    compile_model,
    explain_model,
    kernel_rows,
    model_tasks,
    open_database,
    read_library,
)


def parse_inputs(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> list[tuple[str, nn.spec.Tensor]]:
    """Click callback: ``--input name:shape:dtype`` options (a malformed one: exit code 2)."""
    try:
        return [parse_input_spec(v) for v in values]
    except ValueError as e:
        raise click.BadParameter(str(e), ctx, param) from None


def parse_target(ctx: click.Context, param: click.Parameter, value: str) -> Target:
    """Click callback: a target string (``cpu``, a preset such as ``avx2``)."""
    try:
        return Target(value)
    except TilecraftError as e:
        raise click.BadParameter(str(e), ctx, param) from None


MODEL = click.argument("model", type=click.Path(dir_okay=False, path_type=Path))
INPUTS = click.option(
    "-i",
    "--input",
    "inputs",
    multiple=True,
    callback=parse_inputs,
    metavar="NAME:SHAPE:DTYPE",
    help="An input of forward (Python model files), e.g. x:1,768:float32; repeat per input.",
)
TARGET = click.option(
    "--target",
    default="cpu",
    show_default=True,
    callback=parse_target,
    help="Target string or preset (cpu, x86-64-v2, avx2, avx512, ...).",
)
JSON = click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
QUIET = click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")


def _database(path: Path | None, create: bool = False) -> Database | None:
    return None if path is None else open_database(path, create=create)


def _short_record(record: object) -> str:
    if not isinstance(record, str):
        return "-"
    shash, _, trace = record.partition(":")
    return f"{shash[:12]}:{trace[:8]}" if trace else shash[:20]


@cli.command("compile")
@MODEL
@INPUTS
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The exported library to write (e.g. model.tc).",
)
@TARGET
@click.option(
    "--database",
    type=click.Path(path_type=Path),
    help="Tuning database (JSON folder or .db file) applied before the rules.",
)
@JSON
@QUIET
def compile_command(
    model: Path,
    inputs: list[tuple[str, nn.spec.Tensor]],
    output: Path,
    target: Target,
    database: Path | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Compile MODEL (.py, .pt2 or .onnx) to one exported library.

    Prints which rule or database record scheduled each kernel.
    """
    progress = Progress(3, quiet)
    with progress.step(f"read {model}"):
        loaded = load_model(model, inputs)
        db = _database(database)
    with progress.step(f"compile for {target.kind}"):
        exe = compile_model(loaded, target, db)
    with progress.step(f"export {output}"):
        exe.export_library(output)
    lib = read_library(output)
    rows = kernel_rows(lib.manifest)
    if as_json:
        emit_json({"output": str(output), "target": lib.manifest["target"], "kernels": rows})
        return
    table = [(r["kernel"], r["scheduled_by"] or "-", _short_record(r["record"])) for r in rows]
    print_table(("kernel", "scheduled by", "record"), table, title=f"{output}: {target}")


@cli.command("explain")
@MODEL
@INPUTS
@TARGET
@click.option(
    "--database",
    type=click.Path(path_type=Path),
    help="Tuning database applied first (its functions show as scheduled).",
)
@click.option("--profile", is_flag=True, help="Also build and time each kernel.")
@JSON
def explain_command(
    model: Path,
    inputs: list[tuple[str, nn.spec.Tensor]],
    target: Target,
    database: Path | None,
    profile: bool,
    as_json: bool,
) -> None:
    """Per kernel of MODEL: the rule that takes it and why each earlier rule declined."""
    loaded = load_model(model, inputs)
    report = explain_model(loaded, target, _database(database), profile)
    if as_json:
        emit_json(report.to_dict())
    else:
        click.echo(report.table())


@contextmanager
def _tune_progress(quiet: bool) -> Iterator[None]:
    """The tuner's progress lines (logger ``tilecraft.tune``, INFO) on stderr."""
    log = logging.getLogger("tilecraft.tune")
    if quiet:
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("  %(message)s"))
    saved = (log.level, log.propagate)
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(saved[0])
        log.propagate = saved[1]


@contextmanager
def _workers(
    ray_address: str | None, target: Target, march: str | None
) -> Iterator[dict[str, Any]]:
    """The builder and runner: local by default, on the Ray cluster at ``ray_address``."""
    if ray_address is None:
        yield {}
        return
    from .ray_cluster import ray_workers  # imports the tuner's Ray plumbing on first use

    with ray_workers(ray_address, target, march) as workers:
        yield workers


def _check_march(target: Target, ray_address: str | None, march: str | None) -> None:
    """``--march`` only with ``--ray`` and the host target (a preset fixes its own flags)."""
    if march is None:
        return
    if ray_address is None:
        raise click.UsageError("--march applies only with --ray")
    if target.is_gpu or target.mcpu != "native":
        raise click.UsageError(
            f"--march applies only to the host target (cpu); {target} fixes its machine flags"
        )


def _task_rows(tasks: list[ExtractedTask], db: Database, target: Target) -> list[dict[str, Any]]:
    """Per task: trials, failures, the best time of all candidates and the library's time."""
    rows = []
    for t in tasks:
        records = db.records_of(db.key_of(t.mod, target))
        ok = [r.mean_secs for r in records if r.ok]
        library = [r for r in records if r.ok and r.library is not None]
        fastest = min(library, key=lambda r: r.mean_secs) if library else None
        rows.append(
            {
                "task": t.task_name,
                "weight": t.weight,
                "trials": len(records),
                "failed": len(records) - len(ok),
                "best_s": min(ok) if ok else None,
                "library": None if fastest is None else fastest.library,
                "library_s": None if fastest is None else fastest.mean_secs,
            }
        )
    return rows


def show_tuning_table(as_json: bool, quiet: bool) -> bool:
    """Whether ``tune`` draws the tuner's live table: not with ``--json`` or ``--quiet``,
    else when standard output is a terminal outside CI (:func:`tilecraft.tune.progress.
    should_show`); without it the tuner's progress is one line per round on stderr."""
    return False if as_json or quiet else should_show(None)


@cli.command("tune")
@MODEL
@INPUTS
@TARGET
@click.option(
    "--trials",
    type=click.IntRange(min=0),
    default=64,
    show_default=True,
    help="Trials of all tasks together, counting those already in the database.",
)
@click.option(
    "--trials-per-task",
    type=click.IntRange(min=1),
    default=None,
    help="At most this many trials per task.",
)
@click.option(
    "--per-iter",
    type=click.IntRange(min=1),
    default=None,
    help="Candidates measured per turn of a task (default: min(trials, 64)).",
)
@click.option(
    "-w",
    "--work-dir",
    type=click.Path(file_okay=True, path_type=Path),
    required=True,
    help="The database: JSON folder (or .db file); reruns resume it.",
)
@click.option(
    "--task",
    "task_names",
    multiple=True,
    help="Tune only tasks whose name contains this; repeatable.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the search.")
@click.option(
    "--ray",
    "ray_address",
    default=None,
    metavar="ADDRESS",
    help="Build and measure on the Ray cluster at ADDRESS (tilecraft[distributed]).",
)
@click.option(
    "--march",
    default=None,
    help="With --ray and the host target: -march of the measuring hosts (default: what a "
    "measuring node reports).",
)
@click.option(
    "--library/--no-library",
    default=True,
    show_default=True,
    help="Measure BLAS as one more candidate of each GEMM task (tilecraft[blas]).",
)
@JSON
@QUIET
def tune_command(
    model: Path,
    inputs: list[tuple[str, nn.spec.Tensor]],
    target: Target,
    trials: int,
    trials_per_task: int | None,
    per_iter: int | None,
    work_dir: Path,
    task_names: tuple[str, ...],
    seed: int,
    ray_address: str | None,
    march: str | None,
    library: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """Tune the kernels of MODEL, recording into WORK_DIR's database.

    Rerunning with the same --work-dir resumes: trials already recorded count
    towards --trials, and tasks at their budget are skipped. On a terminal the
    tuner's live table shows the tasks as they go.
    """
    _check_march(target, ray_address, march)
    table = show_tuning_table(as_json, quiet)
    progress = Progress(3, quiet)
    with progress.step(f"read {model}"):
        loaded = load_model(model, inputs)
        db = open_database(work_dir, create=True)
    with progress.step("extract tasks"):
        tasks = model_tasks(loaded, target, task_names)
    step = progress.step(f"tune {len(tasks)} tasks, {trials} trials", live=True)
    with step, _tune_progress(quiet or table), _workers(ray_address, target, march) as workers:
        tune_tasks(
            tasks,
            target,
            max_trials_global=trials,
            max_trials_per_task=trials_per_task,
            num_trials_per_iter=per_iter or max(1, min(trials, 64)),
            database=db,
            seed=seed,
            progress=table,
            libraries=None if library else [],
            **workers,
        )
    rows = _task_rows(tasks, db, target)
    if as_json:
        emit_json({"work_dir": str(work_dir), "target": str(target), "tasks": rows})
        return
    cells = [
        (
            r["task"], r["weight"], r["trials"], r["failed"], seconds_text(r["best_s"]),
            seconds_text(r["library_s"]),
        )
        for r in rows
    ]  # fmt: skip
    headers = ("task", "weight", "trials", "failed", "best", "library")
    print_table(headers, cells, title=str(work_dir))
