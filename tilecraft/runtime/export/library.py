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
from ...codegen import graph_c_abi as abi
from ...codegen import graph_c_extern
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
from ..executor.dynamic import bind_refusal
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
_HEADER_FILE = "tilecraft_model.h"
C_HEADER = f"include/{_HEADER_FILE}"
_MAX_MEMBERS = 100_000


def export_library(
    exe: Executable, path: str | os.PathLike[str], *, require_c_entry: bool = False
) -> Path:
    """Write ``exe`` to the single file ``path`` (see :mod:`tilecraft.runtime.export`).

    Parameters
    ----------
    exe
        A compiled executable.
    path
        The file to write.
    require_c_entry
        Refuse to export unless every graph function has a plain C entry (the manifest
        otherwise records, per function, why it has none).

    Raises
    ------
    ExportError
        For an executable whose kernels cannot be shipped (an emulated build), a graph
        function without a plain C entry under ``require_c_entry`` (the message says why), or
        a path that cannot be written.
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
    functions = [
        _write_function(name, f, exe.plain_only.get(name), members)
        for name, f in exe.functions.items()
    ]
    header = _write_c_header(exe, target, artifact, functions, members)
    refused = [f"{f['name']}: {f['c_refused']}" for f in functions if f["c_entry"] is None]
    if require_c_entry and refused:
        raise ExportError(
            "export_library: no plain C entry for graph function " + "; ".join(refused)
        )
    manifest = {
        "format": "tilecraft.library",
        "version": f"{VERSION[0]}.{VERSION[1]}",
        "tilecraft_version": __version__,
        "target": target_entry(target),
        "library": lib_entry,
        "kernels": kernels,
        "functions": functions,
        "params_bound": any(f["constants"] for f in functions),
        "c_header": header,
        "c_externs": _c_externs(exe, functions) if header is not None else None,
        "files": {name: sha256(data) for name, data in members.items()},
    }
    out = Path(path)
    try:
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(MANIFEST, json.dumps(manifest, indent=1))
            for name, data in members.items():
                # weights are stored: float data barely compresses, and deflating a 1B-model
                # layer's 176 MB took 40 s of a 50 s export
                stored = name.startswith("params/")
                zf.writestr(name, data, zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED)
    except OSError as e:
        raise ExportError(f"export_library: cannot write {out}: {e}") from e
    return out


def _c_externs(exe: Executable, functions: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The manifest's ``c_externs``: the BLAS routines the plain C entries call and how
    ``tc_load_blas`` finds them (None: they call none)."""
    programs = [exe.functions[f["name"]].program for f in functions if f["c_entry"] is not None]
    return graph_c_extern.manifest_entry(graph_c_extern.used_routines(programs))


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


def _write_function(
    name: str, f: Any, plain_only: str | None, members: dict[str, bytes]
) -> dict[str, Any]:
    program: GraphProgram = f.program
    doc = f"graph/{name}.json"
    members[doc] = program_to_json(program).encode()
    constants = []
    for i, arr in enumerate(program.constants):
        buf = io.BytesIO()
        # ascontiguousarray makes a 0-d array 1-d: keep the constant's own shape
        np.save(buf, np.ascontiguousarray(arr).reshape(arr.shape), allow_pickle=False)
        member = abi.PARAM_MEMBER.format(function=name, index=i)
        members[member] = buf.getvalue()
        constants.append(member)
    native = None
    if f.native is not None:
        lay = f.native.layout
        layout = [lay.num_vars, lay.num_consts, lay.num_steps, lay.num_results]
        native = {"symbol": f.native.symbol, "layout": layout}
    c_entry, c_refused = _c_entry(f, plain_only)
    return {"name": name, "program": doc, "constants": constants, "native": native,
            "c_entry": c_entry, "c_refused": c_refused}  # fmt: skip


def _c_entry(f: Any, plain_only: str | None) -> tuple[dict[str, str] | None, str | None]:
    """The plain C entry of graph function ``f`` (its names), or why it has none.

    ``plain_only`` is the entry symbol of a function with a plain C entry but no native one
    (one calling external library routines).
    """
    program: GraphProgram = f.program
    symbol = f.native.symbol if f.native is not None else plain_only
    if symbol is None and program.has_extern_steps:
        routines = sorted({s.func for s in program.steps if s.is_extern})
        return None, (
            f"it calls the external library routines {routines} (DispatchLibrary) and was "
            "built without a plain C entry for them (a race-checked, bounds-checked or "
            "non-CPU build, or a routine with no C form)"
        )
    if symbol is None:
        why = bind_refusal(program)
        return None, why or "it has no native entry (the Python executor runs it: see the build)"
    entry, ws_size, out_shape, *_ = abi.c_names(symbol)
    return {"symbol": entry, "workspace_size": ws_size, "output_shape": out_shape}, None


def _write_c_header(
    exe: Executable,
    target: Target,
    artifact: Artifact | None,
    functions: list[dict[str, Any]],
    members: dict[str, bytes],
) -> str | None:
    """Write the plain C header member (None: no graph function has a plain C entry)."""
    if artifact is None or artifact.kind != "c":
        why = "the kernels are not a host C library (CPU targets only)"
        for f in functions:
            f["c_entry"], f["c_refused"] = None, f["c_refused"] or why
        return None
    source = exe.lib.source if exe.lib is not None else ""
    for f in functions:
        if f["c_entry"] is not None and f"TC_EXPORT int {f['c_entry']['symbol']}(" not in source:
            f["c_entry"], f["c_refused"] = None, "the library was built without plain C entries"
    have = [(exe.functions[f["name"]].program, abi.ENTRY_PREFIX + f["c_entry"]["symbol"][3:])
            for f in functions if f["c_entry"] is not None]  # fmt: skip
    if not have:
        return None
    refused = [(f["name"], f["c_refused"]) for f in functions if f["c_entry"] is None]
    text = abi.c_header(have, refused, file=_HEADER_FILE, version=__version__, target=str(target))
    members[C_HEADER] = text.encode()
    return C_HEADER


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


def write_c_header(path: str | os.PathLike[str], out: str | os.PathLike[str]) -> Path:
    """Write the plain C header of the exported library ``path`` to the file ``out``.

    Raises
    ------
    ExportError
        For a file :func:`load_module` would refuse as unreadable or damaged, or a library
        with no plain C entry (the message says why, per graph function).
    """
    header, _ = _c_members(path, "write_c_header")
    return _write(Path(out), header[1])


def extract_c(path: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> Path:
    """Unpack what a C program needs from the exported library ``path`` into ``out_dir``.

    Writes ``include/tilecraft_model.h``, ``kernels/library.so`` and the weights
    ``params/<function>/<i>.npy`` (``tc_load_weights(out_dir)`` reads them); the same as
    unzipping the file. Returns ``out_dir``.

    Raises
    ------
    ExportError
        As :func:`write_c_header`.
    """
    header, read = _c_members(path, "extract_c")
    root = Path(out_dir)
    for name, data in [header, *read.items()]:
        if name.startswith(("include/", "kernels/", "params/")) and ".." not in Path(name).parts:
            _write(root / name, data)
    return root


def _c_members(
    path: str | os.PathLike[str], what: str
) -> tuple[tuple[str, bytes], dict[str, bytes]]:
    """The checked header member and the other members of a library with plain C entries."""
    where = f"{what}({os.fspath(path)!r})"
    manifest, read = _read_members(Path(path), where)
    check_version(manifest, where)
    check_files(manifest.get("files"), read, where)
    name = manifest.get("c_header")
    if not isinstance(name, str) or name not in read:
        why = [f"{f.get('name')}: {f.get('c_refused') or 'written before plain C entries'}"
               for f in manifest.get("functions", ())]  # fmt: skip
        raise ExportError(f"{where}: the library has no plain C entry ({'; '.join(why)})")
    return (name, read.pop(name)), read


def _write(out: Path, data: bytes) -> Path:
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
    except OSError as e:
        raise ExportError(f"cannot write {out}: {e}") from e
    return out


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
    plain_only = {  # a plain C entry and no native one: re-exports keep it
        f["name"]: abi.ENTRY_PREFIX + f["c_entry"]["symbol"][3:]
        for f in manifest["functions"]
        if f["native"] is None and f.get("c_entry")
    }
    if entries or plain_only:
        _attach(exe, NativeBuild(lib, entries, plain_only))
    return exe


def _constants(text: str, entry: Mapping[str, Any], read: Mapping[str, bytes]) -> list[np.ndarray]:
    """The constants of one graph function, read as ``.npy`` (never with pickle)."""
    specs = constant_specs(text)
    names = entry["constants"]
    if len(names) != len(specs):
        raise ValueError(f"{entry['name']}: {len(names)} constant files for {len(specs)} constants")
    return [np.load(io.BytesIO(read[n]), allow_pickle=False) for n in names]
