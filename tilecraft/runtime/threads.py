"""How many threads this process's kernels run on: one policy for our OpenMP kernels, the
BLAS calls they are mixed with, and the tuner's measurements of both.

Our CPU kernels run on OpenMP's threads: ``OMP_NUM_THREADS`` when it is set, else every
core this process may use. A BLAS step runs on the target's ``-num-cores`` threads, but never
on more than the kernels around it: with ``OMP_NUM_THREADS=1`` a two-thread BLAS call beside
single-thread kernels is not what the user asked for, and on a machine whose other core is
busy such a call waits on a preempted thread (a 64 x 768 x 256 GEMM measured 0.3 ms in a
tuning worker and 10-46 ms in the single-thread model process beside it).
"""

from __future__ import annotations

import os


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
    at most what the kernels of this process run on."""
    own = kernel_threads()
    return own if requested <= 0 else min(requested, own)
