"""Process-wide settings; the only module that reads environment variables.

``TILECRAFT_CACHE_DIR``  where compiled kernels are cached (default: the user cache directory,
                         ``$XDG_CACHE_HOME/tilecraft`` or ``~/.cache/tilecraft``).
``CC``                   the C compiler to use (default: the first of cc, gcc, clang on PATH).
``TILECRAFT_NVCC``       the nvcc executable (default: ``nvcc`` on PATH).
``TILECRAFT_VERIFY``     "1" runs :func:`tilecraft.ir.verify` after every schedule primitive
                         (a debug switch: slower; ``Schedule(func, verify=True)`` does the
                         same for one schedule).
``TILECRAFT_HOST_TARGET`` a CPU preset (``avx2``, ``avx512``, ``x86-64-v2``...) or ``-mcpu``
                         model whose ISA ``Target("cpu")`` gives the host instead of the
                         detected one (cores and caches stay the host's): runs the test suite
                         "as an AVX2 machine" on an AVX-512 host. A preset the host cannot
                         execute (``avx512`` on an AVX2 host) makes its builds refuse to run
                         (``Target.missing_host_features``).
``CI``                   set (not "0"/"false"): a continuous-integration run; the tuner's live
                         table stays quiet.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])


def cache_dir() -> Path:
    """Directory of the content-addressed compile cache (created on demand by its users)."""
    env = os.environ.get("TILECRAFT_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tilecraft"


def c_compiler() -> str | None:
    """The C compiler named by ``CC``, or None to search PATH."""
    return os.environ.get("CC") or None


def nvcc_path() -> str | None:
    """The nvcc executable named by ``TILECRAFT_NVCC``, or None to search PATH."""
    return os.environ.get("TILECRAFT_NVCC") or None


def host_target() -> str | None:
    """The CPU preset ``TILECRAFT_HOST_TARGET`` names as the host's ISA, or None to detect it."""
    value = os.environ.get("TILECRAFT_HOST_TARGET", "").strip()
    return value or None


def env_flag(name: str, default: bool = False) -> bool:
    """Read a boolean ``TILECRAFT_<name>`` switch ("1", "true", "yes" are true)."""
    value = os.environ.get(f"TILECRAFT_{name}")
    if value is None:
        return default
    return value.strip().lower() in ("1", "true", "yes", "on")


def verify_schedules() -> bool:
    """Whether ``TILECRAFT_VERIFY`` asks to verify the IR after every schedule primitive."""
    return env_flag("VERIFY")


RECURSION_HEADROOM = 50_000
"""The recursion limit inside :func:`deep_recursion` (Python's default is 1,000).

The IR's visitors, simplifier and emitters recurse once per nesting level of an expression, so
a long chain (a sum of 5,000 terms written as ``a + b + c ...``) needs a few frames per term.
Since Python 3.11 such pure-Python recursion no longer grows the C stack, so a higher limit
is safe; measured: a 20,000-term chain builds, and at 60,000 terms the C compiler gives up
first (a BuildError).
"""


def deep_recursion(fn: _F) -> _F:
    """Run ``fn`` with the recursion limit raised to :data:`RECURSION_HEADROOM`.

    The limit is process-wide while the callers are per thread: it is raised when the first
    caller enters and restored (never lowered below what it was) when the last one leaves, so
    a thread finishing its build cannot pull the limit down under another still inside one.
    """

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        _raise_recursion_limit()
        try:
            return fn(*args, **kwargs)
        finally:
            _release_recursion_limit()

    return call  # type: ignore[return-value]


_recursion_lock = threading.Lock()
_recursion_users = 0
_recursion_saved: int | None = None


def _raise_recursion_limit() -> None:
    global _recursion_users, _recursion_saved
    with _recursion_lock:
        _recursion_users += 1
        before = sys.getrecursionlimit()
        if before < RECURSION_HEADROOM:
            if _recursion_saved is None:
                _recursion_saved = before
            sys.setrecursionlimit(RECURSION_HEADROOM)


def _release_recursion_limit() -> None:
    global _recursion_users, _recursion_saved
    with _recursion_lock:
        _recursion_users -= 1
        if _recursion_users == 0 and _recursion_saved is not None:
            if sys.getrecursionlimit() == RECURSION_HEADROOM:  # nobody else changed it since
                sys.setrecursionlimit(_recursion_saved)
            _recursion_saved = None


def in_ci() -> bool:
    """Whether ``CI`` is set (to anything but "", "0" or "false"): a continuous-integration run."""
    value = os.environ.get("CI", "").strip().lower()
    return value not in ("", "0", "false", "no", "off")
