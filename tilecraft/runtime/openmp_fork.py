"""Forked children and OpenMP: a child must not wait for its parent's worker threads.

GCC's OpenMP runtime (libgomp) is not fork-safe. Once a process has run a parallel region, its
worker threads exist in that process only; a child made by ``fork`` (``multiprocessing``'s
default on Linux) that enters a parallel region waits for them forever. Every loaded tilecraft
library calls :func:`guard_forks`, which makes OpenMP in a forked child run each parallel
region on the calling thread (``omp_set_num_threads(1)``, set before any code of the child
runs): the child's kernels run on one thread instead of hanging. Other OpenMP runtimes
(LLVM's ``libomp``) are left alone.
"""

from __future__ import annotations

import ctypes
import os
import threading

_LIBGOMP = "libgomp.so.1"
_lock = threading.Lock()
_installed = False


def _one_thread_in_child() -> None:
    """In a forked child: libgomp, when this process has it loaded, runs one thread."""
    try:  # RTLD_NOLOAD: only a library already loaded (by a tilecraft kernel) is used
        gomp = ctypes.CDLL(_LIBGOMP, mode=os.RTLD_NOLOAD)
    except OSError:
        return
    gomp.omp_set_num_threads(1)


def guard_forks() -> None:
    """Install the fork handler of the module docstring once per process."""
    global _installed
    with _lock:
        if _installed or not hasattr(os, "register_at_fork") or not hasattr(os, "RTLD_NOLOAD"):
            return
        os.register_at_fork(after_in_child=_one_thread_in_child)
        _installed = True
