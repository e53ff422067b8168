"""The manifest of a deployable library: what it holds and what it needs, checked on load.

Every check here runs before any of the library's code is loaded; each failure is an
:class:`ExportError` that says what differs (format version, CPU architecture and features, GPU
arch, a member's hash).
"""

from __future__ import annotations

import ctypes
import hashlib
import re
from collections.abc import Mapping
from typing import Any

from ...errors import BuildError
from ...target import Target, TargetError
from ..cuda_driver import CUDAError, get_driver

FORMAT = "tilecraft.library"
VERSION = (1, 5)
"""(major, minor) of the layout this tilecraft writes. A reader reads every minor up to its own
of its major: a minor adds optional manifest fields only. 1.1 added each kernel's provenance
(``structural_hash``, ``scheduled_by``, ``record``); 1.2 the plain C interface (``c_header``
and the header member, each function's ``c_entry`` or ``c_refused``); 1.3 graph functions
returning a tuple (the program's ``ret_slots``, a fourth native ``layout`` number: the count
of results, one C output per result); 1.4 graph programs that read extents from tensors
(``bind_symbol`` steps, their bounds a third part of the program's ``ir``); 1.5 the BLAS
routines the plain C entries call and how their ``tc_load_blas`` finds a library
(``c_externs``)."""
MANIFEST = "manifest.json"

_CU_DEVICE_ATTRIBUTE_CC_MAJOR = 75
_CU_DEVICE_ATTRIBUTE_CC_MINOR = 76


class ExportError(BuildError):
    """A deployable library cannot be written, or cannot be loaded here (the message says why)."""


def sha256(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def target_entry(target: Target) -> dict[str, Any]:
    """The manifest's ``target``: its string, kind, and ISA features or GPU arch."""
    if target.is_gpu:
        return {"string": str(target), "kind": "cuda", "arch": target.arch, "features": []}
    return {
        "string": str(target),
        "kind": "cpu",
        "arch": target.arch,
        "features": list(target.features),
    }


def check_version(manifest: Mapping[str, Any], where: str) -> tuple[int, int]:
    """The manifest's (major, minor), refused unless this reader can read it."""
    if manifest.get("format") != FORMAT:
        raise ExportError(f"{where}: not a tilecraft library (format {manifest.get('format')!r})")
    text = manifest.get("version")
    match = re.fullmatch(r"(\d+)\.(\d+)", text) if isinstance(text, str) else None
    if match is None:
        raise ExportError(f"{where}: malformed format version {text!r} (expected 'major.minor')")
    major, minor = int(match[1]), int(match[2])
    if major != VERSION[0] or minor > VERSION[1]:
        raise ExportError(
            f"{where}: format version {major}.{minor} was written by tilecraft "
            f"{manifest.get('tilecraft_version')!r}; this tilecraft reads versions "
            f"{VERSION[0]}.0 to {VERSION[0]}.{VERSION[1]}"
        )
    return major, minor


def check_target(entry: object, where: str) -> Target:
    """The manifest's target, refused when this machine cannot run its code."""
    if not isinstance(entry, dict) or not isinstance(entry.get("string"), str):
        raise ExportError(f"{where}: the manifest names no target")
    if entry.get("kind") == "cuda":
        target = _parse_target(entry["string"], where)
        check_gpu_arch(str(entry.get("arch")), device_arch(), where)
        return target
    host = Target("cpu")
    arch, features = entry.get("arch"), entry.get("features")
    if arch != host.arch:
        raise ExportError(
            f"{where}: built for {entry['string']} ({arch}); this machine is {host.arch}, so "
            "its code cannot run here (export a build for this machine's target)"
        )
    target = _parse_target(entry["string"], where)
    if not isinstance(features, list) or sorted(features) != sorted(target.features):
        raise ExportError(
            f"{where}: the manifest's CPU features {features} are not those of its target "
            f"{entry['string']} ({list(target.features)})"
        )
    missing = target.missing_host_features()
    if missing:
        raise ExportError(
            f"{where}: built for {entry['string']}, which needs {', '.join(missing)}; this "
            f"machine lacks them (it has {', '.join(host.features) or 'none of the known'}), "
            "so its code cannot run here"
        )
    return target


def _parse_target(text: str, where: str) -> Target:
    try:
        return Target(text)
    except TargetError as e:
        raise ExportError(f"{where}: the manifest's target {text!r} is not valid here: {e}") from e


def device_arch() -> str | None:
    """``sm_XY`` of CUDA device 0, or None when no device can be opened."""
    try:
        driver = get_driver()
    except CUDAError:
        return None
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    for value, attr in (
        (major, _CU_DEVICE_ATTRIBUTE_CC_MAJOR),
        (minor, _CU_DEVICE_ATTRIBUTE_CC_MINOR),
    ):
        driver.check(
            driver.lib.cuDeviceGetAttribute(ctypes.byref(value), attr, driver.device),
            "cuDeviceGetAttribute",
        )
    return f"sm_{major.value}{minor.value}"


def _sm(arch: str) -> tuple[int, int, bool] | None:
    match = re.fullmatch(r"sm_(\d+)(\d)(a?)", arch)
    return None if match is None else (int(match[1]), int(match[2]), bool(match[3]))


def check_gpu_arch(built: str, device: str | None, where: str) -> None:
    """Refuse a cubin for ``built`` on a ``device`` (``sm_XY``; None: no GPU) it cannot run on.

    A cubin runs on GPUs of its major version whose minor is at least its own; an
    arch-specific one (``sm_90a``) only on its own arch.
    """
    want = _sm(built)
    if want is None:
        raise ExportError(f"{where}: the manifest's GPU arch {built!r} is not an sm_XY arch")
    if device is None:
        raise ExportError(
            f"{where}: built for {built} GPUs; this machine has no CUDA device that can be opened"
        )
    have = _sm(device)
    exact = want[2] and have is not None and have[:2] == want[:2]
    compatible = have is not None and have[0] == want[0] and have[1] >= want[1] and not want[2]
    if not (exact or compatible):
        raise ExportError(
            f"{where}: built for {built} GPUs; this machine's GPU is {device}, which cannot run "
            f"{built} code (export a build for tc.Target('cuda -arch={device}'))"
        )


def check_files(listed: object, read: Mapping[str, bytes], where: str) -> None:
    """Every member the manifest lists is present with its recorded sha256."""
    if not isinstance(listed, dict):
        raise ExportError(f"{where}: the manifest lists no files")
    for name, digest in listed.items():
        data = read.get(name)
        if data is None:
            raise ExportError(f"{where}: member {name!r} listed in the manifest is missing")
        actual = sha256(data)
        if actual != digest:
            raise ExportError(
                f"{where}: member {name!r} is corrupted: its sha256 is {actual[:16]}..., the "
                f"manifest records {str(digest)[:16]}..."
            )
