"""Write an executable to one deployable file, and load it back without a compiler.

See :mod:`tilecraft.runtime.export` for the file layout. Loading reads and checks everything
(format version, target, every member's sha256, the documents) before the shared library is
loaded; nothing else is executed, nothing is lowered, emitted or compiled.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ... import __version__
from ...codegen.graph_c import ContextLayout
from ...errors import LowerError
from ...ir import IRModule, scheduled_by, structural_hash
from ...ir.scheduled import RECORD_ATTR
from ...lower.graph_program import GraphProgram
from ...lower.graph_program_json import constant_specs, program_from_json, program_to_json
from ...target import Target, as_target
from ..backend import Artifact, load_artifact
from ..backend import program as lowered_program
from ..executor import Executable
from ..executor.executable import _attach
from ..executor.native import NativeBuild
from .manifest import (
    MANIFEST,
    VERSION,
    ExportError,
    check_files,
    check_target,
    check_version,
    sha256,
    target_entry,
)

_LIBRARY_FILE = {"c": "kernels/library.so", "cuda": "kernels/library.cubin"}
_MAX_MEMBERS = 100_000


def export_library(exe: Executable, path: str | os.PathLike[str]) -> Path:
    """Write ``exe`` to the single file ``path`` (see :mod:`tilecraft.runtime.export`).

    Raises
    ------
    ExportError
        For an executable whose kernels cannot be shipped (an emulated build), or a path
        that cannot be written.
    """
    target = as_target(exe.target)
    members: dict[str, bytes] = {}
    artifact = _artifact_of(exe)
    kernels: list[dict[str, Any]] = []
    lib_entry = None
    if artifact is not None:
        binary = _binary(artifact)
        lib_name = _LIBRARY_FILE[artifact.kind]
        members[lib_name] = binary
        message = artifact.as_message() | {"lib_bytes": None, "lib_path": None}
        members["kernels/artifact.json"] = json.dumps(message).encode()
        lib_entry = {"kind": artifact.kind, "file": lib_name, "artifact": "kernels/artifact.json"}
        kernels = _kernel_entries(artifact, lib_name, sha256(binary))
    functions = [_write_function(name, f, members) for name, f in exe.functions.items()]
    manifest = {
        "format": "tilecraft.library",
        "version": f"{VERSION[0]}.{VERSION[1]}",
        "tilecraft_version": __version__,
        "target": target_entry(target),
        "library": lib_entry,
        "kernels": kernels,
        "functions": functions,
        "params_bound": any(f["constants"] for f in functions),
        "files": {name: sha256(data) for name, data in members.items()},
    }
    out = Path(path)
    try:
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(MANIFEST, json.dumps(manifest, indent=1))
            for name, data in members.items():
                zf.writestr(name, data)
    except OSError as e:
        raise ExportError(f"export_library: cannot write {out}: {e}") from e
    return out


def _artifact_of(exe: Executable) -> Artifact | None:
    if exe.lib is None:
        return None
    artifact = getattr(exe.lib, "artifact", None)
    if not isinstance(artifact, Artifact) or artifact.kind not in _LIBRARY_FILE:
        kind = artifact.kind if isinstance(artifact, Artifact) else type(exe.lib).__name__
        raise ExportError(
            f"export_library: the kernels were built as {kind!r}, which cannot be shipped; "
            "export a build for a CPU or CUDA target (emulated builds are for checking only)"
        )
    return artifact


def _binary(artifact: Artifact) -> bytes:
    if artifact.lib_bytes is not None:
        return artifact.lib_bytes
    if artifact.lib_path is None:
        raise ExportError("export_library: the kernels' artifact has no compiled file")
    try:
        return Path(artifact.lib_path).read_bytes()
    except OSError as e:
        raise ExportError(f"export_library: cannot read the compiled kernels: {e}") from e


def _kernel_entries(artifact: Artifact, lib_name: str, digest: str) -> list[dict[str, Any]]:
    """Per kernel: its symbol, the binary holding it and its hash, and who scheduled it."""
    low = lowered_program.decode(artifact.program)
    return [
        {
            "name": name,
            "symbol": artifact.symbols[name],
            "binary": lib_name,
            "binary_sha256": digest,
            "lowered_hash": structural_hash(low.functions[name]),
            "structural_hash": structural_hash(func),
            "scheduled_by": scheduled_by(func),
            "record": func.attrs.get(RECORD_ATTR),
        }
        for name, func in low.originals.items()
    ]


def _write_function(name: str, f: Any, members: dict[str, bytes]) -> dict[str, Any]:
    program: GraphProgram = f.program
    doc = f"graph/{name}.json"
    members[doc] = program_to_json(program).encode()
    constants = []
    for i, arr in enumerate(program.constants):
        buf = io.BytesIO()
        np.save(buf, np.ascontiguousarray(arr), allow_pickle=False)
        member = f"params/{name}/{i}.npy"
        members[member] = buf.getvalue()
        constants.append(member)
    native = None
    if f.native is not None:
        lay = f.native.layout
        native = {"symbol": f.native.symbol,
                  "layout": [lay.num_vars, lay.num_consts, lay.num_steps]}  # fmt: skip
    return {"name": name, "program": doc, "constants": constants, "native": native}


def load_module(path: str | os.PathLike[str]) -> Executable:
    """Load a library written by :meth:`Executable.export_library` (no compiler needed).

    Parameters
    ----------
    path
        The exported file.

    Returns
    -------
    Executable
        Runs like the executable that was exported: ``exe["forward"](x)``.

    Raises
    ------
    ExportError
        Before any of the library's code is loaded: for a file that is not a tilecraft
        library (not a zip file, truncated), a format version this tilecraft cannot read, a
        target whose ISA features or GPU arch this machine lacks, or a member whose sha256 is
        not the one the manifest records; the message says what differs.
    """
    where = f"load_module({os.fspath(path)!r})"
    manifest, read = _read_members(Path(path), where)
    _, minor = check_version(manifest, where)
    target = check_target(manifest.get("target"), where)
    check_files(manifest.get("files"), read, where)
    try:
        return _build(manifest, read, target, where)
    except (KeyError, TypeError, ValueError, LowerError) as e:
        raise ExportError(f"{where}: malformed library (format 1.{minor}): {e}") from e


def _read_members(path: Path, where: str) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The manifest and every member's bytes; a file that is not a sound zip is refused."""
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            if len(infos) > _MAX_MEMBERS:
                raise ExportError(f"{where}: {len(infos)} members is more than a library holds")
            read = {info.filename: zf.read(info) for info in infos}
    except FileNotFoundError:
        raise ExportError(f"{where}: no such file") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as e:
        raise ExportError(
            f"{where}: not a tilecraft library, or a truncated or damaged one ({e})"
        ) from None
    raw = read.pop(MANIFEST, None)
    if raw is None:
        raise ExportError(f"{where}: not a tilecraft library (no {MANIFEST})")
    try:
        manifest = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise ExportError(f"{where}: the manifest is not JSON: {e}") from None
    if not isinstance(manifest, dict):
        raise ExportError(f"{where}: the manifest is not a JSON object")
    return manifest, read


def _build(
    manifest: Mapping[str, Any], read: Mapping[str, bytes], target: Target, where: str
) -> Executable:
    """The executable of a checked library: programs, constants, kernels, native entries."""
    programs = {
        f["name"]: program_from_json(
            read[f["program"]].decode(), _constants(read[f["program"]].decode(), f, read)
        )
        for f in manifest["functions"]
    }
    lib_entry = manifest["library"]
    if lib_entry is None:
        return Executable(IRModule({}), programs, None, target)
    artifact = Artifact.from_message(json.loads(read[lib_entry["artifact"]]) | {"lib_bytes": None})
    if artifact.target != str(target) or artifact.kind != lib_entry["kind"]:
        raise ExportError(
            f"{where}: the kernels were built for {artifact.target} ({artifact.kind}), the "
            f"manifest says {target} ({lib_entry['kind']})"
        )
    artifact = dataclasses.replace(artifact, lib_bytes=read[lib_entry["file"]])
    try:
        lib: Any = load_artifact(artifact)
    except OSError as e:
        raise ExportError(f"{where}: cannot place the kernels' library: {e}") from e
    originals = lowered_program.decode(artifact.program).originals
    exe = Executable(IRModule(originals), programs, lib, target)
    entries = {
        f["name"]: (f["native"]["symbol"], ContextLayout(*f["native"]["layout"]))
        for f in manifest["functions"]
        if f["native"] is not None
    }
    if entries:
        _attach(exe, NativeBuild(lib, entries))
    return exe


def _constants(text: str, entry: Mapping[str, Any], read: Mapping[str, bytes]) -> list[np.ndarray]:
    """The constants of one graph function, read as ``.npy`` (never with pickle)."""
    specs = constant_specs(text)
    names = entry["constants"]
    if len(names) != len(specs):
        raise ValueError(f"{entry['name']}: {len(names)} constant files for {len(specs)} constants")
    return [np.load(io.BytesIO(read[n]), allow_pickle=False) for n in names]
