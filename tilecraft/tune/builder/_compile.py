"""Building one candidate (what a builder worker or a Ray build task runs), and its C flags.

The C flags are the runtime's (:func:`tilecraft.runtime.compile_flags`) with one exception:
``march`` replaces ``-march=native``. A build for another machine (Ray) must name that
machine's architecture, since ``-march=native`` describes the machine that compiles;
:func:`host_march` tells what ``native`` means on a given host.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from ... import config
from ...errors import BuildError, TuneError
from ...ir import IRModule, PrimFunc, from_json, to_json
from ...runtime import cache_key, compile_flags, find_compiler
from ...runtime.compiler import link_flags, run_compiler
from ...target import Target
from .base import ArtifactKind, BuildArtifact

_MARCH_RE = re.compile(r"^[A-Za-z0-9_.+-]+$")


def build_flags(march: str | None) -> tuple[str, ...]:
    """The C flags of a build: the runtime's, with ``-march=<march>`` for ``-march=native``.

    Raises
    ------
    TuneError
        When ``march`` is not a plain architecture name.
    """
    flags = compile_flags(find_compiler())
    if march is None:
        return flags
    if not _MARCH_RE.match(march) or march == "native":
        raise TuneError(f"march: expected an architecture name such as 'x86-64-v3', got {march!r}")
    kept = [f for f in flags if not f.startswith("-march=")]
    return (*kept, f"-march={march}")


def host_march() -> str:
    """What ``-march=native`` resolves to on this machine (ask it on the measuring host).

    Raises
    ------
    TuneError
        When the compiler does not say.
    """
    compiler = find_compiler()
    cmd = [compiler, "-march=native", "-Q", "--help=target"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise TuneError(f"host_march: cannot run {compiler}: {e}") from None
    for line in out.stdout.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "-march=":
            return words[1]
    raise TuneError(f"host_march: {compiler} did not report its -march=native value")


def compile_with_flags(source: str, flags: tuple[str, ...]) -> Path:
    """Compile ``source`` with ``flags`` into the compile cache (by content) and return it.

    Raises
    ------
    BuildError
        When the compiler fails (command and stderr attached).
    """
    compiler = find_compiler()
    key = cache_key(source, compiler, flags)  # the runtime's key: the caches are shared
    folder = config.cache_dir() / "cpu"
    lib = folder / f"{key}.so"
    if lib.exists():
        return lib
    folder.mkdir(parents=True, exist_ok=True)
    fd, src = tempfile.mkstemp(prefix=f".{key[:16]}-", suffix=".c", dir=folder)
    with os.fdopen(fd, "w") as f:
        f.write(source)
    fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}-", suffix=".so", dir=folder)
    os.close(fd)
    command = [compiler, *flags, src, "-o", tmp, *link_flags(flags)]
    try:
        proc = run_compiler(command)
        if proc.returncode != 0:
            raise BuildError(
                f"C compilation failed (exit status {proc.returncode})", command, proc.stderr
            )
        os.replace(tmp, lib)
    finally:
        for leftover in (src, tmp):
            if os.path.exists(leftover):
                os.unlink(leftover)
    return lib


def build_artifact(
    mod: IRModule,
    target: Target,
    march: str | None = None,
    embed_lib: bool = False,
    flags: tuple[str, ...] | None = None,
) -> BuildArtifact:
    """Lower, generate code and compile the single PrimFunc of ``mod`` for ``target``.

    ``flags`` (default: :func:`build_flags` of ``march``) lets a builder probe the compiler
    once instead of in every worker.

    Raises
    ------
    TilecraftError
        Whatever lowering, code generation or compilation raises (BuildError, LowerError...).
    """
    name, func = _single(mod)
    if target.is_gpu:
        return _build_cuda(mod, name, target)
    from ...codegen import build_c_source

    csrc = build_c_source(mod, target)
    path = compile_with_flags(csrc.text, flags if flags is not None else build_flags(march))
    return BuildArtifact(
        kind=ArtifactKind.C,
        target=str(target),
        name=name,
        source=csrc.text,
        functions_json=to_json((func, csrc.functions[name])),
        symbol=csrc.symbols[name],
        lib_path=str(path),
        lib_bytes=path.read_bytes() if embed_lib else None,
    )


def _build_cuda(mod: IRModule, name: str, target: Target) -> BuildArtifact:
    from ...runtime import build_cuda

    lib = build_cuda(mod, target)
    return BuildArtifact(
        kind=ArtifactKind.CUDA,
        target=str(target),
        name=name,
        source=lib.source,
        functions_json=to_json(mod),
        lib_bytes=lib.cubin,
    )


def _single(mod: IRModule) -> tuple[str, PrimFunc]:
    funcs = mod.prim_funcs()
    if len(funcs) != 1:
        raise TuneError(f"a candidate module holds one PrimFunc, got {len(funcs)}")
    return funcs[0]


def _failure(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def build_group(
    mods: list[IRModule], target: Target, flags: tuple[str, ...], embed_lib: bool = False
) -> list[BuildArtifact | str]:
    """Build CPU candidates into one shared library (one compiler run), each with its symbol.

    Starting the compiler costs more than compiling a small kernel, so candidates share a
    translation unit. A candidate that fails to lower fails alone; when the shared unit does
    not compile, every candidate is built on its own to find the one at fault. Returns an
    artifact, or the error text, per candidate.
    """
    from ...codegen import build_c_source
    from ...lower import lower

    results: list[BuildArtifact | str] = ["not built"] * len(mods)
    lowered: dict[int, tuple[str, PrimFunc, PrimFunc]] = {}
    for i, mod in enumerate(mods):
        try:  # the worker boundary: any failure here is this candidate's, not the group's
            name, func = _single(mod)
            lowered[i] = (name, func, lower(func, target).update(name=f"cand{i}"))
        except Exception as e:  # noqa: BLE001
            results[i] = _failure(e)
    if len(lowered) > 1:
        try:
            unit = IRModule({f"cand{i}": low for i, (_, _, low) in lowered.items()})
            csrc = build_c_source(unit, target)
            path = compile_with_flags(csrc.text, flags)
        except Exception:  # noqa: BLE001  some candidate breaks the unit: build each alone
            pass
        else:
            blob = path.read_bytes() if embed_lib else None
            for i, (name, func, low) in lowered.items():
                results[i] = BuildArtifact(
                    ArtifactKind.C,
                    str(target),
                    name,
                    csrc.text,
                    to_json((func, low)),
                    csrc.symbols[f"cand{i}"],
                    str(path),
                    blob,
                )
            return results
    for i in lowered:
        try:
            results[i] = build_artifact(mods[i], target, embed_lib=embed_lib, flags=flags)
        except Exception as e:  # noqa: BLE001
            results[i] = _failure(e)
    return results


def handle_build(msg: dict[str, Any]) -> dict[str, Any]:
    """Worker side of a build request: ``{"mods", "target", "march", "embed_lib", "flags"}``.

    Replies ``{"ok": True, "results": [{"artifact": ...} or {"error": ...}], "secs": ...}``.
    """
    start = time.perf_counter()
    mods = []
    for text in msg["mods"]:
        mod = from_json(text)
        mods.append(IRModule({mod.name: mod}) if isinstance(mod, PrimFunc) else mod)
    target = Target(msg["target"])
    embed = bool(msg.get("embed_lib"))
    flags = msg.get("flags")
    cflags = build_flags(msg.get("march")) if flags is None else tuple(str(f) for f in flags)
    if target.is_gpu:
        built: list[BuildArtifact | str] = []
        for mod in mods:
            try:
                built.append(build_artifact(mod, target, embed_lib=embed))
            except Exception as e:  # noqa: BLE001  the worker boundary, per candidate
                built.append(_failure(e))
    else:
        built = build_group(mods, target, cflags, embed)
    items = [{"error": b} if isinstance(b, str) else {"artifact": b.as_message()} for b in built]
    return {"ok": True, "results": items, "secs": time.perf_counter() - start}
