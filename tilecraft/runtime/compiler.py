"""Compile C source to a shared library through the system compiler, with a content cache.

The cache (:mod:`tilecraft.runtime.cache`) lives in :func:`tilecraft.config.cache_dir`
(``cpu/`` subfolder); an entry's key is the sha256 of (source, compiler, flags and, when the
flags contain ``-march=native``, the host CPU the compiler resolves it to), so a second build of
the same source runs no compiler, and a cache shared between machines never hands one CPU code
built for another. Writers compile into a temporary file in the cache folder and move it into
place, so several processes building the same source at once all end with a complete library;
entries are verified before they are loaded and rebuilt when corrupt.
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from .. import config
from ..errors import BuildError
from . import cache

BASE_FLAGS = ("-O3", "-std=gnu11", "-shared", "-fPIC")
GUARD_FLAGS = ("-fno-tree-loop-distribute-patterns",)
"""Flags that switch off optimizations known to miscompile correct kernels; kept when the
compiler accepts them. gcc 12.2 at ``-O3`` turns zero-fill or copy loops into ``memset``/
``memcpy`` calls (loop distribution into patterns) and then gets the surrounding distributed
loops wrong (issue 10, 6d; reproducer ``tests/runtime/data/gcc12_ldist_miscompile.c``).
The other ``-O3`` loop passes (plain loop distribution, interchange, unroll-and-jam, versioning)
were checked on that reproducer and keep the result correct. Flags that change floating-point
semantics (``-ffast-math``, ``-Ofast``, ``-ffinite-math-only``...) are never used: kernels must
keep numpy's NaN and infinity behaviour; :data:`FORBIDDEN_FLAGS` lists them."""
FORBIDDEN_FLAGS = ("-ffast-math", "-Ofast", "-ffinite-math-only", "-funsafe-math-optimizations",
                   "-fno-signed-zeros", "-fassociative-math", "-freciprocal-math")  # fmt: skip
OPTIONAL_FLAGS = ("-march=native", "-mprefer-vector-width=512", "-fopenmp")
"""Flags kept when the compiler accepts them. gcc's tuning for recent x86 CPUs prefers 256-bit
vectors even where AVX-512 is available; asking for 512-bit ones doubles the width of the
register tiles that ``vectorize`` produces (16 zmm accumulators instead of 32 spilling ymm)."""
UNROLL_GUARD_FLAGS = ("-fno-tree-loop-if-convert",)
"""Added (when accepted) for sources holding ``#pragma GCC unroll``: gcc 12.2 at -O3 with AVX2
miscompiles a completely unrolled loop around a fill loop and a loop of guarded stores
(if-conversion to masked stores); ``tests/runtime/test_unroll_if_convert.py`` holds the C
reproducer. Other sources keep if-conversion, which guarded vector loops need to be fast."""
OPTIMIZE_LEVELS = ("-O3", "-O2", "-O1")
"""Optimization levels :func:`compile_shared` accepts (none changes floating-point semantics)."""
LINK_FLAGS = ("-lm",)
DLOPEN_FLAGS = ("-DTC_DLOPEN", "-ldl")
"""For a source calling ``dlopen`` (an exported model's ``tc_load_blas``): glibc before 2.34
keeps it in libdl."""
LIBMVEC_FLAGS = ("-DTC_LIBMVEC", "-lmvec")
"""Kept when the compiler links glibc's vector math library: the generated C then declares
the SIMD variants of ``expf``, ``logf``, ... (see :mod:`tilecraft.codegen._c_helpers`), so
loops calling them vectorize. The ``-l`` flag goes after the sources (``--as-needed`` links)."""

_PROBE_SOURCE = """#include <math.h>
int tc_probe(int n) { int s = 0;
#pragma omp parallel for reduction(+:s)
  for (int i = 0; i < n; ++i) s += i;
  return s + (int)sqrtf((float)n); }
"""
_LIBMVEC_PROBE = """#include <math.h>
__attribute__((simd("notinbranch"))) float expf(float);
void tc_probe(const float* restrict x, float* restrict y, int n) {
#pragma omp simd
  for (int i = 0; i < n; ++i) y[i] = expf(x[i]);
}
"""
_flag_cache: dict[str, tuple[str, ...]] = {}
_host_cache: dict[str, str] = {}
_lock = threading.Lock()
_log = logging.getLogger("tilecraft.runtime.compiler")


def find_compiler() -> str:
    """The C compiler: ``CC`` (via :mod:`tilecraft.config`), else cc, gcc or clang on PATH."""
    chosen = config.c_compiler()
    if chosen:
        return chosen
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return path
    raise BuildError("no C compiler found: set CC or install cc, gcc or clang")


def run_compiler(command: list[str]) -> subprocess.CompletedProcess[str]:
    """Run one compiler command (a separate function so tests can observe invocations)."""
    try:
        return subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    except FileNotFoundError as e:
        raise BuildError(f"C compiler {command[0]!r} not found", command, str(e)) from e
    except subprocess.TimeoutExpired as e:
        raise BuildError("C compiler timed out after 300 s", command, str(e.stderr or "")) from e


def compile_flags(compiler: str) -> tuple[str, ...]:
    """The flags used with ``compiler``: base flags plus the optional ones it accepts."""
    with _lock:
        cached = _flag_cache.get(compiler)
    if cached is not None:
        return cached
    flags = list(BASE_FLAGS)
    with tempfile.TemporaryDirectory(prefix="tilecraft-probe-") as tmp:
        src = Path(tmp) / "probe.c"
        src.write_text(_PROBE_SOURCE)
        for opt in (*GUARD_FLAGS, *OPTIONAL_FLAGS):
            cmd = [compiler, *flags, opt, str(src), "-o", str(Path(tmp) / "probe.so"), *LINK_FLAGS]
            if run_compiler(cmd).returncode == 0:
                flags.append(opt)
        if "-fopenmp" in flags:
            src.write_text(_LIBMVEC_PROBE)
            define, lib = LIBMVEC_FLAGS
            out = str(Path(tmp) / "probe.so")
            probe = run_compiler([compiler, *flags, str(src), "-o", out, *LINK_FLAGS, lib])
            if probe.returncode == 0:
                flags.append(define)
    result = tuple(flags)
    if "-fopenmp" not in result:
        _log.warning(
            "the C compiler %s does not support OpenMP (-fopenmp): loops scheduled with "
            "parallel() run on one core; install an OpenMP-capable compiler (gcc, or clang "
            "with libomp) or point CC at one",
            compiler,
        )
    bad = [f for f in result if f in FORBIDDEN_FLAGS]
    if bad:  # a programming error here, not a user error: the lists above are constants
        raise BuildError(f"compile flags {bad} would change floating-point semantics")
    with _lock:
        _flag_cache[compiler] = result
    return result


def unroll_guard_flags(compiler: str) -> tuple[str, ...]:
    """The flags of :data:`UNROLL_GUARD_FLAGS` that ``compiler`` accepts (probed once)."""
    key = f"unroll-guard:{compiler}"
    with _lock:
        cached = _flag_cache.get(key)
    if cached is not None:
        return cached
    kept = []
    with tempfile.TemporaryDirectory(prefix="tilecraft-probe-") as tmp:
        src = Path(tmp) / "probe.c"
        src.write_text(_PROBE_SOURCE)
        for opt in UNROLL_GUARD_FLAGS:
            cmd = [compiler, *BASE_FLAGS, opt, str(src), "-o", str(Path(tmp) / "p.so"), *LINK_FLAGS]
            if run_compiler(cmd).returncode == 0:
                kept.append(opt)
    with _lock:
        _flag_cache[key] = tuple(kept)
    return tuple(kept)


def link_flags(flags: tuple[str, ...]) -> tuple[str, ...]:
    """The libraries to link after the sources, given the compile ``flags`` in use."""
    libs = (*LINK_FLAGS, LIBMVEC_FLAGS[1]) if LIBMVEC_FLAGS[0] in flags else LINK_FLAGS
    return (*libs, DLOPEN_FLAGS[1]) if DLOPEN_FLAGS[0] in flags else libs


def host_cpu(compiler: str) -> str:
    """What ``-march=native`` means for ``compiler`` on this machine (cached per process).

    The compiler's own expansion of the flag (target CPU name and ISA switches, with its
    version), from a dry run (``-###``); when it gives none, the CPU model and feature flags
    from ``/proc/cpuinfo`` and the machine name.
    """
    with _lock:
        hit = _host_cache.get(compiler)
    if hit is not None:
        return hit
    parts: list[str] = []
    try:
        proc = subprocess.run(
            [compiler, "-march=native", "-###", "-E", "-x", "c", os.devnull],
            capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
        for line in (proc.stdout + proc.stderr).splitlines():
            if " version " in line:
                parts.append(line.strip())
            elif "-march=" in line or "-target-cpu" in line:
                parts.extend(w.strip('"') for w in line.split() if "/" not in w)  # no paths
    except (OSError, subprocess.SubprocessError):
        pass
    if not any(p.startswith(("-march=", "-target-cpu")) for p in parts):
        parts.extend([platform.machine(), *_cpuinfo_lines()])
    result = hashlib.sha256("\n".join(parts).encode()).hexdigest()
    with _lock:
        _host_cache[compiler] = result
    return result


def _cpuinfo_lines() -> list[str]:
    try:
        keys = ("model name", "flags", "Features", "CPU part", "CPU implementer")
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            lines = [ln.strip() for ln in f if ln.startswith(keys)]
    except OSError:
        return [platform.processor()]
    return sorted(set(lines))


def cache_key(source: str, compiler: str, flags: tuple[str, ...]) -> str:
    """sha256 hex digest of (source, compiler, flags, and the host CPU under -march=native)."""
    h = hashlib.sha256()
    host = host_cpu(compiler) if "-march=native" in flags else ""
    for part in (source, compiler, "\0".join(flags), host):
        h.update(part.encode())
        h.update(b"\x00\x01")
    return h.hexdigest()


ARCH_FLAG_PREFIXES = ("-march=", "-mtune=", "-mcpu=", "-mprefer-vector-width=")
"""Probed flags that describe the machine the code is for; ``arch_flags`` replace them."""
_ARCH_FLAG_RE = re.compile(r"^-m[A-Za-z0-9][A-Za-z0-9_.+,=-]*$")


def check_arch_flags(arch_flags: tuple[str, ...]) -> tuple[str, ...]:
    """``arch_flags`` when each is a machine option (``-march=...``, ``-mavx2``...).

    Raises
    ------
    BuildError
        For anything else (another option, a file name, ``-march=native`` for a build meant
        for a named machine).
    """
    if not isinstance(arch_flags, tuple) or not all(isinstance(f, str) for f in arch_flags):
        raise BuildError(f"arch_flags: expected a tuple of strings, got {arch_flags!r}")
    for flag in arch_flags:
        if not _ARCH_FLAG_RE.match(flag) or flag in FORBIDDEN_FLAGS:
            raise BuildError(
                f"arch_flags: {flag!r} is not a machine option such as '-march=x86-64-v3'"
            )
    return arch_flags


def build_flags(
    compiler: str, source: str, arch_flags: tuple[str, ...] | None = None, optimize: str = "-O3"
) -> tuple[str, ...]:
    """The flags :func:`compile_shared` uses for ``source``.

    The probed :func:`compile_flags` (with ``optimize`` in place of ``-O3``); with
    ``arch_flags`` in place of the probed machine flags (``-march=native
    -mprefer-vector-width=512``); and the :data:`UNROLL_GUARD_FLAGS` for a source holding
    ``#pragma GCC unroll``; ``-DTC_DLOPEN`` (linking libdl) for one calling ``dlopen``.
    """
    if optimize not in OPTIMIZE_LEVELS:
        raise BuildError(f"optimization level must be one of {OPTIMIZE_LEVELS}, got {optimize!r}")
    flags = tuple(optimize if f == "-O3" else f for f in compile_flags(compiler))
    if arch_flags is not None:
        kept = tuple(f for f in flags if not f.startswith(ARCH_FLAG_PREFIXES))
        flags = (*kept, *check_arch_flags(arch_flags))
    if "#pragma GCC unroll" in source:
        flags = (*flags, *unroll_guard_flags(compiler))
    if "dlopen(" in source:
        flags = (*flags, DLOPEN_FLAGS[0])
    return flags


def compile_shared(
    source: str, *, arch_flags: tuple[str, ...] | None = None, optimize: str = "-O3"
) -> Path:
    """Compile ``source`` to a shared library and return its path (cached by content).

    A cached library is used only after its size and hash are checked against the entry's
    record (see :mod:`tilecraft.runtime.cache`); a corrupt entry is rebuilt.

    Parameters
    ----------
    source
        The C translation unit.
    arch_flags
        The machine the library is for, as compiler options (``("-march=x86-64-v3",)``);
        None: this machine (``-march=native -mprefer-vector-width=512`` where accepted).
    optimize
        The optimization level (one of :data:`OPTIMIZE_LEVELS`): ``-O3`` for kernels that
        must be fast, a lower one where the compiler's time matters more (GPU emulation).

    Raises
    ------
    BuildError
        When no compiler is found, ``arch_flags`` are not machine options, or compilation
        fails (command and stderr attached).
    """
    compiler = find_compiler()
    flags = build_flags(compiler, source, arch_flags, optimize)
    key = cache_key(source, compiler, flags)
    hit = cache.lookup("cpu", key, ".so")
    if hit is not None:
        return hit
    folder = cache.writable_folder("cpu")
    try:
        return _compile_into(folder, key, source, compiler, flags)
    except OSError as e:
        raise BuildError(f"cannot write the compiled library to {folder}: {e}") from e


def _compile_into(
    folder: Path, key: str, source: str, compiler: str, flags: tuple[str, ...]
) -> Path:
    staging = cache.new_entry(folder)
    src, lib = staging / f"{key}.c", staging / f"{key}.so"
    src.write_text(source)
    command = [compiler, *flags, str(src), "-o", str(lib), *link_flags(flags)]
    try:
        proc = run_compiler(command)
        if proc.returncode != 0:
            kept = folder / f"{key}.failed.c"
            os.replace(src, kept)
            raise BuildError(
                f"C compilation failed (exit status {proc.returncode}); source kept at {kept}",
                command,
                proc.stderr,
            )
        return cache.commit(folder, key, ".so", staging)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def host_march() -> str:
    """What ``-march=native`` resolves to on this machine (ask it on the measuring host).

    Raises
    ------
    BuildError
        When the compiler does not say.
    """
    compiler = find_compiler()
    cmd = [compiler, "-march=native", "-Q", "--help=target"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BuildError(f"host_march: cannot run {compiler}: {e}") from None
    for line in out.stdout.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "-march=":
            return words[1]
    raise BuildError(f"host_march: {compiler} did not report its -march=native value")


def flag_probe() -> dict[str, object]:
    """What this process probed about the C compiler, for worker processes to adopt.

    A JSON-ready dict (see :func:`adopt_flag_probe`): the compiler, its :func:`compile_flags`
    and its :func:`unroll_guard_flags`.
    """
    compiler = find_compiler()
    return {
        "compiler": compiler,
        "flags": list(compile_flags(compiler)),
        "unroll_guard": list(unroll_guard_flags(compiler)),
    }


def adopt_flag_probe(probe: object) -> None:
    """Use another process's :func:`flag_probe` instead of probing again.

    Ignored unless it names this process's compiler (the flags are those of the same
    compiler on the same machine, so builds here match the prober's byte for byte).
    """
    if not isinstance(probe, dict):
        return
    compiler, flags, guard = probe.get("compiler"), probe.get("flags"), probe.get("unroll_guard")
    if compiler != find_compiler() or not isinstance(flags, list) or not isinstance(guard, list):
        return
    if not all(isinstance(f, str) for f in [*flags, *guard]):
        return
    if any(f in FORBIDDEN_FLAGS for f in flags):
        raise BuildError(f"compile flags {flags} would change floating-point semantics")
    with _lock:
        _flag_cache.setdefault(compiler, tuple(flags))
        _flag_cache.setdefault(f"unroll-guard:{compiler}", tuple(guard))
