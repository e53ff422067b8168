"""Building one candidate (what a builder worker or a Ray build task runs).

A candidate goes through its target's backend (:func:`tilecraft.runtime.backend_of`) exactly
as ``tc.build`` takes it: the same lowering, the same C, the same compiler flags and the same
verified compile cache, so the library a candidate is measured with is the file ``tc.build``
loads for the same scheduled function. The one difference a builder may ask for is the
machine: ``march`` names the measuring host's architecture instead of ``-march=native``
(which describes whichever machine compiles); :func:`host_march` tells what ``native`` means
on a given host.
"""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path
from typing import Any

from ...errors import TuneError
from ...ir import IRModule, PrimFunc, from_json
from ...runtime.backend import Artifact, backend_of
from ...runtime.compiler import adopt_flag_probe
from ...runtime.compiler import host_march as host_march
from ...target import Target

_MARCH_RE = re.compile(r"^[A-Za-z0-9_.+-]+$")


def march_flags(march: str | None) -> tuple[str, ...] | None:
    """The machine flags of a build for ``march`` (None: this machine, ``-march=native``).

    Raises
    ------
    TuneError
        When ``march`` is not a plain architecture name.
    """
    if march is None:
        return None
    if not isinstance(march, str) or not _MARCH_RE.match(march) or march == "native":
        raise TuneError(f"march: expected an architecture name such as 'x86-64-v3', got {march!r}")
    return (f"-march={march}",)


def build_artifact(
    mod: IRModule, target: Target, march: str | None = None, embed_lib: bool = False
) -> Artifact:
    """Lower, emit and compile the single PrimFunc of ``mod`` through ``target``'s backend.

    ``embed_lib`` puts the compiled file's bytes in the artifact (for a runner elsewhere).

    Raises
    ------
    TilecraftError
        Whatever lowering, code generation or compilation raises (BuildError, LowerError...).
    """
    _single(mod)
    backend = backend_of(target)
    source = backend.emit(backend.lower(mod, target), target)
    art = backend.compile(source, target, arch_flags=march_flags(march))
    if embed_lib and art.lib_bytes is None and art.lib_path is not None:
        art = dataclasses.replace(art, lib_bytes=Path(art.lib_path).read_bytes())
    return art


def _single(mod: IRModule) -> tuple[str, PrimFunc]:
    funcs = mod.prim_funcs()
    if len(funcs) != 1:
        raise TuneError(f"a candidate module holds one PrimFunc, got {len(funcs)}")
    return funcs[0]


def _failure(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def handle_build(msg: dict[str, Any]) -> dict[str, Any]:
    """Worker side of a build request: ``{"mods", "target", "march", "embed_lib", "probe"}``.

    Each candidate is built on its own (one compiler run each, as ``tc.build`` would); one
    that fails fails alone. ``probe`` (optional) is the parent's
    :func:`~tilecraft.runtime.compiler.flag_probe`, adopted instead of probing again. Replies
    ``{"ok": True, "results": [{"artifact": ...} or {"error": ...}], "secs": ...}``.
    """
    start = time.perf_counter()
    adopt_flag_probe(msg.get("probe"))
    target = Target(msg["target"])
    march = msg.get("march")
    march_flags(march)  # a bad name fails the request, not each candidate
    embed = bool(msg.get("embed_lib"))
    items: list[dict[str, Any]] = []
    for text in msg["mods"]:
        try:  # the worker boundary: any failure here is this candidate's, not the group's
            mod = from_json(text)
            mod = IRModule({mod.name: mod}) if isinstance(mod, PrimFunc) else mod
            art = build_artifact(mod, target, march, embed)
            items.append({"artifact": art.as_message()})
        except Exception as e:  # noqa: BLE001
            items.append({"error": _failure(e)})
    return {"ok": True, "results": items, "secs": time.perf_counter() - start}
