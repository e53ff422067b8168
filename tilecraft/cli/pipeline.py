"""The steps behind the commands, over the public APIs: prepare, compile, explain, tune,
open databases and exported libraries.

``tilecraft compile`` and ``tilecraft tune`` prepare a model the same way (the ``"default"``
graph pipeline with the weights bound, under the target), so the tasks ``tune`` records are
the functions ``compile --database`` looks up.
"""

from __future__ import annotations

import json
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..driver import compile as tc_compile
from ..driver import default_rules, specialize_shapes
from ..errors import DatabaseError, LowerError
from ..graph import get_pipeline
from ..ir import IRModule
from ..lower.graph_program import GraphProgram
from ..lower.graph_program_json import constant_specs, program_from_json
from ..rules import explain
from ..rules.explain import ExplainReport
from ..runtime.executor import Executable
from ..runtime.export import ExportError, load_module
from ..runtime.export.manifest import MANIFEST, check_target, check_version
from ..target import Target
from ..tune import ApplyDatabase, Database, JSONDatabase, SQLiteDatabase
from ..tune.task import ExtractedTask, extract_tasks
from .app import OtherMachineError
from .models import Model

SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def open_database(path: Path, *, create: bool) -> Database:
    """The database at ``path``: an SQLite file (``.db``, ``.sqlite``, ``.sqlite3``) or a
    JSON database folder (anything else). ``create=False`` refuses a missing one."""
    if path.suffix.lower() in SQLITE_SUFFIXES:
        if not create and not path.is_file():
            raise DatabaseError(f"no tuning database at {path}: the file is missing")
        return SQLiteDatabase(path)
    if path.is_file():
        raise DatabaseError(
            f"{path} is a file, not a JSON database folder (SQLite files end in "
            f"{', '.join(SQLITE_SUFFIXES)})"
        )
    return JSONDatabase(path, create=create)


def prepare(model: Model, target: Target) -> IRModule:
    """The model after the ``"default"`` graph pipeline with its weights bound."""
    with target:
        return get_pipeline("default", params=model.params)(model.mod)


def compile_model(model: Model, target: Target, database: Database | None) -> Executable:
    """Compile the model with ``tc.compile`` (weights bound; with a database, the tuner's
    choice per function: the library where it measured faster, else the best record, then
    the default rules for the rest)."""
    exe = tc_compile(model.mod, target, params=model.params, database=database)
    if not isinstance(exe, Executable):
        raise ExportError("compile: the model has no graph function to export")
    return exe


def explain_model(
    model: Model, target: Target, database: Database | None, profile: bool
) -> ExplainReport:
    """Per function: the rule that takes it (or the record that scheduled it), and why
    every earlier rule declined."""
    mod = prepare(model, target)
    with target:
        if database is not None:
            mod = ApplyDatabase(database=database)(mod)
        mod = specialize_shapes(mod, target)
        return explain(mod, default_rules(target), target, profile=profile)


def model_tasks(model: Model, target: Target, names: tuple[str, ...]) -> list[ExtractedTask]:
    """The tuning tasks of the prepared model (those whose name contains one of ``names``)."""
    tasks = extract_tasks(prepare(model, target), target)
    if names:
        tasks = [t for t in tasks if any(n in t.task_name for n in names)]
    return tasks


# -- exported libraries ------------------------------------------------------------------


@dataclass
class LibraryFile:
    """What an exported library holds, read without loading any of its code."""

    path: Path
    manifest: dict[str, Any]
    programs: dict[str, GraphProgram]


def read_library(path: Path) -> LibraryFile:
    """The manifest and graph programs of the exported library ``path`` (nothing loaded)."""
    where = str(path)
    try:
        with zipfile.ZipFile(path) as zf:
            manifest = json.loads(zf.read(MANIFEST))
            if not isinstance(manifest, dict):
                raise ExportError(f"{where}: the manifest is not a JSON object")
            check_version(manifest, where)
            docs = {f["name"]: zf.read(f["program"]).decode() for f in manifest["functions"]}
    except FileNotFoundError:
        raise ExportError(f"{where}: no such file") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as e:
        raise ExportError(f"{where}: not a tilecraft library, or a damaged one ({e})") from None
    except (KeyError, TypeError, ValueError, RecursionError) as e:
        raise ExportError(f"{where}: not a tilecraft library, or a malformed one ({e})") from None
    try:
        programs = {name: _program(text) for name, text in docs.items()}
    except (LowerError, TypeError, ValueError) as e:
        raise ExportError(f"{where}: a graph program is malformed: {e}") from None
    return LibraryFile(path, manifest, programs)


def _program(text: str) -> GraphProgram:
    """A graph program with placeholder constants (for its signature only)."""
    consts = [np.zeros(shape, dtype) for shape, dtype in constant_specs(text)]
    return program_from_json(text, consts)


def runs_here(lib: LibraryFile) -> str | None:
    """None when this machine can run ``lib``'s code, else why not."""
    try:
        check_target(lib.manifest.get("target"), str(lib.path))
    except ExportError as e:
        return str(e)
    return None


def open_library(path: Path) -> tuple[LibraryFile, Executable]:
    """Read and load an exported library; built for another machine: exit code 3."""
    info = read_library(path)
    why = runs_here(info)
    if why is not None:
        raise OtherMachineError(why)
    return info, load_module(path)


def kernel_rows(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Per kernel of a manifest: its name, who scheduled it and the record, if any."""
    return [
        {
            "kernel": k.get("name"),
            "scheduled_by": k.get("scheduled_by"),
            "record": k.get("record"),
            "structural_hash": k.get("structural_hash"),
        }
        for k in manifest.get("kernels") or []
    ]


def function_rows(lib: LibraryFile) -> list[dict[str, Any]]:
    """Per graph function: its parameters (name, shape, dtype), result and kernel calls."""
    rows = []
    for name, prog in lib.programs.items():
        params = [
            {"name": n, "shape": t.describe()}
            for n, t in zip(prog.param_names, prog.param_types, strict=True)
        ]
        rows.append(
            {
                "function": name,
                "inputs": params,
                "result": prog.describe_result(),
                "steps": [s.func for s in prog.steps],
                "constants": len(prog.constants),
            }
        )
    return rows
