"""Compile CUDA source to a cubin: NVRTC (through ``cuda-python``) or ``nvcc``; read ptxas stats.

Nothing here needs a GPU. :func:`compile_cuda` prefers NVRTC when the optional ``cuda-python``
package (``pip install tilecraft[cuda]``) is importable and falls back to ``nvcc -cubin``.
Compiled cubins are cached by content (source, architecture, compiler) under
:func:`tilecraft.config.cache_dir` (``cuda/`` subfolder). :func:`ptxas_info` compiles with
``-Xptxas -v`` and parses each kernel's registers, spills and shared memory.
"""

from __future__ import annotations

import hashlib
import importlib
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from .. import config
from ..errors import BuildError
from . import cache

NVCC_FLAGS = ("-O3", "--use_fast_math")


def find_nvcc() -> str | None:
    """The nvcc executable (``TILECRAFT_NVCC`` via :mod:`tilecraft.config`, else PATH)."""
    chosen = config.nvcc_path()
    if chosen:
        return chosen
    return shutil.which("nvcc")


def _cuda_include_dir() -> str | None:
    nvcc = find_nvcc()
    if nvcc is None:
        return None
    inc = Path(nvcc).resolve().parent.parent / "include"
    return str(inc) if (inc / "cuda_fp16.h").exists() else None


def _nvrtc_module() -> ModuleType | None:
    for name in ("cuda.bindings.nvrtc", "cuda.nvrtc"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def _run(command: list[str], what: str) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(command, capture_output=True, text=True, check=False, timeout=600)
    except FileNotFoundError as e:
        raise BuildError(f"{what}: {command[0]!r} not found", command, str(e)) from e
    except subprocess.TimeoutExpired as e:
        raise BuildError(f"{what}: timed out", command, str(e.stderr or "")) from e
    if proc.returncode != 0:
        raise BuildError(f"{what} failed (exit {proc.returncode})", command, proc.stderr)
    return proc


def compile_with_nvcc(source: str, arch: str, extra: tuple[str, ...] = ()) -> tuple[bytes, str]:
    """Compile ``source`` with ``nvcc -cubin``; return the cubin and nvcc's diagnostics."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise BuildError(
            "CUDA build: neither cuda-python (NVRTC) nor nvcc is available; install "
            "tilecraft[cuda] or put nvcc on PATH (or set TILECRAFT_NVCC)"
        )
    with tempfile.TemporaryDirectory(prefix="tilecraft-cuda-") as tmp:
        src = Path(tmp) / "kernels.cu"
        out = Path(tmp) / "kernels.cubin"
        src.write_text(source, encoding="utf-8")
        cmd = [nvcc, f"-arch={arch}", "-cubin", *NVCC_FLAGS, *extra, "-o", str(out), str(src)]
        proc = _run(cmd, "nvcc")
        return out.read_bytes(), proc.stderr + proc.stdout


def _check_nvrtc(nvrtc: ModuleType, result: tuple[object, ...], what: str) -> tuple[object, ...]:
    err = result[0]
    if int(err) != 0:  # type: ignore[call-overload]
        raise BuildError(f"NVRTC {what} failed: {err}")
    return result[1:]


def compile_with_nvrtc(source: str, arch: str) -> bytes:
    """Compile ``source`` to a cubin with NVRTC (needs ``cuda-python``)."""
    nvrtc = _nvrtc_module()
    if nvrtc is None:
        raise BuildError("CUDA build: cuda-python is not installed (pip install tilecraft[cuda])")
    (prog,) = _check_nvrtc(
        nvrtc, nvrtc.nvrtcCreateProgram(source.encode(), b"kernels.cu", 0, [], []), "create"
    )
    opts = [f"--gpu-architecture={arch}".encode(), b"-default-device", b"--use_fast_math"]
    inc = _cuda_include_dir()
    if inc:
        opts.append(f"--include-path={inc}".encode())
    (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    if int(err) != 0:
        (size,) = _check_nvrtc(nvrtc, nvrtc.nvrtcGetProgramLogSize(prog), "log size")
        log = b" " * int(size)  # type: ignore[call-overload]
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise BuildError(
            "NVRTC compilation failed",
            ["nvrtc", *[o.decode() for o in opts]],
            log.decode(errors="replace"),
        )
    (size,) = _check_nvrtc(nvrtc, nvrtc.nvrtcGetCUBINSize(prog), "cubin size")
    cubin = b" " * int(size)  # type: ignore[call-overload]
    _check_nvrtc(nvrtc, nvrtc.nvrtcGetCUBIN(prog, cubin), "get cubin")
    return bytes(cubin)


def compile_cuda(source: str, arch: str = "sm_90") -> bytes:
    """A cubin for ``source`` (cached): NVRTC when cuda-python is present, else nvcc.

    Raises
    ------
    BuildError
        With the compiler command and diagnostics when compilation fails.
    """
    return compile_cuda_file(source, arch)[0]


def compile_cuda_file(source: str, arch: str = "sm_90") -> tuple[bytes, Path | None]:
    """The cubin for ``source`` and its verified file in the compile cache.

    The path is None when the cache cannot be written (the cubin is then only in memory).

    Raises
    ------
    BuildError
        With the compiler command and diagnostics when compilation fails.
    """
    use_nvrtc = _nvrtc_module() is not None
    tool = "nvrtc" if use_nvrtc else f"nvcc:{find_nvcc()}"
    key = hashlib.sha256(f"{tool}\0{arch}\0{NVCC_FLAGS}\0{source}".encode()).hexdigest()

    def make() -> bytes:
        if use_nvrtc:
            return compile_with_nvrtc(source, arch)
        return compile_with_nvcc(source, arch)[0]

    path = cache.lookup("cuda", key, ".cubin")
    if path is not None:
        try:
            return path.read_bytes(), path
        except OSError:
            pass
    data = make()
    try:
        return data, cache.store_bytes("cuda", key, ".cubin", data)
    except OSError as e:
        cache.log_store_failure(e)
    return data, None


@dataclass(frozen=True)
class PtxasInfo:
    """What ``ptxas -v`` reports for one kernel."""

    kernel: str
    registers: int
    spill_stores: int
    spill_loads: int
    stack_bytes: int
    shared_bytes: int

    @property
    def spills(self) -> bool:
        """True when the kernel spills registers to local memory."""
        return self.spill_stores > 0 or self.spill_loads > 0


_FUNC_RE = re.compile(r"Compiling entry function '(\w+)'|Function properties for (\w+)")
_REG_RE = re.compile(r"Used (\d+) registers")
_SMEM_RE = re.compile(r"(\d+) bytes smem")
_STACK_RE = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
)


def parse_ptxas_output(text: str) -> dict[str, PtxasInfo]:
    """Parse ``ptxas -v`` diagnostics into :class:`PtxasInfo` per kernel."""
    stats: dict[str, dict[str, int]] = {}
    current: str | None = None
    for line in text.splitlines():
        m = _FUNC_RE.search(line)
        if m:
            current = m.group(1) or m.group(2)
            stats.setdefault(current, {"regs": 0, "st": 0, "ld": 0, "stack": 0, "smem": 0})
            continue
        if current is None:
            continue
        s = stats[current]
        if m := _STACK_RE.search(line):
            s["stack"], s["st"], s["ld"] = (int(g) for g in m.groups())
        if m := _REG_RE.search(line):
            s["regs"] = int(m.group(1))
            if m2 := _SMEM_RE.search(line):
                s["smem"] = int(m2.group(1))
    return {
        k: PtxasInfo(k, v["regs"], v["st"], v["ld"], v["stack"], v["smem"])
        for k, v in stats.items()
    }


def ptxas_info(source: str, arch: str = "sm_90") -> dict[str, PtxasInfo]:
    """Compile ``source`` with ``nvcc -Xptxas -v`` and return each kernel's resource use."""
    _, log = compile_with_nvcc(source, arch, ("-Xptxas", "-v"))
    return parse_ptxas_output(log)
