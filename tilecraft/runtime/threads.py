"""How many threads this process's kernels run on: one policy for our OpenMP kernels, the
BLAS calls they are mixed with, and the tuner's measurements of both.

Our CPU kernels run on OpenMP's threads: ``OMP_NUM_THREADS`` when it is set; else every core
this process may use, less the cores other processes keep busy, re-measured between calls
(:class:`CoreShare`: on a shared machine a parallel region waits for its slowest, preempted
thread), before each unbound call from Python (:func:`before_call`). Bound calls and
``time_evaluator`` run on the count last set in their thread; the tuner's runners fix theirs
with ``OMP_NUM_THREADS``. A BLAS step runs on the target's ``-num-cores`` threads, but never
on more than the kernels around it: with ``OMP_NUM_THREADS=1`` a two-thread BLAS call beside
single-thread kernels is not what the user asked for, and on a machine whose other core is
busy such a call waits on a preempted thread (a 64 x 768 x 256 GEMM measured 0.3 ms in a
tuning worker and 10-46 ms in the single-thread model process beside it).
"""

from __future__ import annotations

import ctypes
import os
import threading
import time


def usable_cores() -> int:
    """Cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def configured_threads() -> int | None:
    """The thread count ``OMP_NUM_THREADS`` gives (its first entry), or None when it is
    unset or not a positive integer (then OpenMP uses every usable core)."""
    first = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if first.isdigit() and int(first) > 0:
        return int(first)
    return None


def kernel_threads() -> int:
    """The threads this process's OpenMP kernels run on."""
    return configured_threads() or usable_cores()


def library_threads(requested: int) -> int:
    """Threads for a library call asked to run on ``requested`` (0: as many as the kernels):
    at most what the kernels of this process run on now (:func:`current_threads`)."""
    own = current_threads()
    return own if requested <= 0 else min(requested, own)


ADAPTIVE_ENV = "TILECRAFT_ADAPTIVE_THREADS"
"""Set to ``0`` to keep every core in use whatever the other processes do."""

SAMPLE_SECONDS = 0.5
"""Shortest window over which the other processes' use of the cores is measured."""


class CoreShare:
    """The cores of this process's affinity that other processes leave free, measured.

    A kernel's parallel region ends when its last thread does; on a machine whose other
    processes keep cores busy, a thread of ours waits for a scheduler time slice on each of
    them and a call of tiny kernels stalls for milliseconds (measured on 2 cores, load 4.5:
    the small prefill layer 22 ms a call on 2 threads, 53 us on 1; the tutorial model at
    batch 64 p90 18 ms against 1.9 ms). Between calls, no more often than every
    :data:`SAMPLE_SECONDS`, the busy time of this process's CPUs (``/proc/stat``) less this
    process's own CPU time gives the cores other processes used; the kernels then run on
    the cores left, rounded, at least one. Where ``/proc/stat`` cannot be read, every core.
    """

    def __init__(self, cores: int | None = None, window: float = SAMPLE_SECONDS) -> None:
        self.cores = cores or usable_cores()
        self.window = window
        self.threads = self.cores
        self._lock = threading.Lock()
        self._last: tuple[float, float, float] | None = self._sample()

    def _sample(self) -> tuple[float, float, float] | None:
        """(wall seconds, busy CPU seconds of our CPUs, our CPU seconds), or None."""
        try:
            with open("/proc/stat", encoding="ascii") as f:
                lines = f.read().splitlines()
        except OSError:
            return None
        mine = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
        busy = 0
        for line in lines:
            name, *fields = line.split()
            if not name.startswith("cpu") or name == "cpu":
                continue
            if mine is not None and int(name[3:]) not in mine:
                continue
            ticks = [int(x) for x in fields[:8]]
            busy += sum(ticks) - ticks[3] - ticks[4]  # all but idle and iowait
        own = os.times()
        tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        return time.monotonic(), busy / tick, own.user + own.system

    def update(self) -> int:
        """The thread count for the next call (re-measured when a window has passed)."""
        if self._last is None or time.monotonic() - self._last[0] < self.window:
            return self.threads
        with self._lock:
            now = self._sample()
            if now is None or self._last is None or now[0] - self._last[0] < self.window:
                return self.threads
            wall = now[0] - self._last[0]
            others = max(0.0, (now[1] - self._last[1]) - (now[2] - self._last[2])) / wall
            self.threads = max(1, min(self.cores, round(self.cores - others)))
            self._last = now
            return self.threads


_SHARE: CoreShare | None = None
_CALLER = threading.local()


_FORKED = False


def _in_child() -> None:
    global _FORKED
    _FORKED = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_in_child)


def adaptive() -> bool:
    """Whether the kernels' thread count follows the free cores: unless ``OMP_NUM_THREADS``
    fixes it, :data:`ADAPTIVE_ENV` is ``0``, or this is a forked child (whose OpenMP runs
    one thread: :mod:`tilecraft.runtime.openmp_fork`)."""
    return not _FORKED and configured_threads() is None and os.environ.get(ADAPTIVE_ENV, "1") != "0"


def current_threads() -> int:
    """The threads this process's kernels run on now: :func:`kernel_threads`, or with
    :func:`adaptive` threads, the cores other processes leave free (:class:`CoreShare`)."""
    global _SHARE
    if not adaptive():
        return kernel_threads()
    if _SHARE is None:
        _SHARE = CoreShare()
    return _SHARE.update()


def before_call() -> None:
    """Set the calling thread's OpenMP thread count to :func:`current_threads` (called
    before kernels run from Python; a no-op when libgomp is not loaded or the count is
    unchanged for this thread)."""
    if _FORKED:
        return
    last = getattr(_CALLER, "threads", None)
    if adaptive():
        n = current_threads()
    elif last is None:
        return  # never changed here: OpenMP's own count stands
    else:
        n = kernel_threads()  # adaptation was turned off: back to the fixed count
    if last == n:
        return
    gomp = _libgomp()
    if gomp is not None:
        gomp.omp_set_num_threads(n)
    _CALLER.threads = n


_GOMP: list[ctypes.CDLL | None] = []


def _libgomp() -> ctypes.CDLL | None:
    """The libgomp this process has loaded (by a tilecraft kernel), else None."""
    if not _GOMP:
        try:
            _GOMP.append(ctypes.CDLL("libgomp.so.1", mode=getattr(os, "RTLD_NOLOAD", 4)))
        except OSError:
            return None  # not loaded yet: look again next time
    return _GOMP[0]
