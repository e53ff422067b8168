"""Shared pieces of the model benchmarks: environment, compile step, timing, kernel shares.

Import this module before numpy: it removes ``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE``
(which pin OpenBLAS to a slower kernel in some development environments) and sets one
thread count for everybody: ``OMP_NUM_THREADS`` (tilecraft's OpenMP kernels),
``OPENBLAS_NUM_THREADS`` (numpy) and, later, ``torch.set_num_threads``. The count is the
number of usable cores unless ``BENCH_THREADS`` is set.
"""

from __future__ import annotations

import os

REMOVED = {
    k: os.environ.pop(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ
}
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
THREADS = int(os.environ.get("BENCH_THREADS", _CORES))
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(THREADS)

import importlib.util  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Mapping, Sequence  # noqa: E402
from types import ModuleType  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

import tilecraft as tc  # noqa: E402
from tilecraft.graph import get_pipeline  # noqa: E402

SETTLE_S = 0.2
"""Pause before each timing block: OpenBLAS and OpenMP worker threads spin for a while after
a call and would slow whatever runs next on a small machine (same pause for everybody)."""


def load_torch() -> ModuleType | None:
    """torch with ``THREADS`` threads, or None when it is not installed (optional)."""
    if importlib.util.find_spec("torch") is None:
        return None
    import torch

    torch.set_num_threads(THREADS)
    return torch


def compile_model(mod: tc.IRModule, params: Mapping[str, np.ndarray]) -> Any:
    """The compile step of every benchmark: weights bound, default path for the CPU.

    ``tc.compile(mod, "cpu", params=params)`` when this tilecraft has it; otherwise the
    default graph pipeline (binds the weights, folds parameter-only work) and ``tc.build``.
    """
    compile_fn = getattr(tc, "compile", None)
    if compile_fn is not None:
        return compile_fn(mod, "cpu", params=params)
    with tc.Target("cpu"):
        return tc.build(get_pipeline("default", params=params)(mod), "cpu")


def cold_compile(mod: tc.IRModule, params: Mapping[str, np.ndarray]) -> tuple[Any, float]:
    """:func:`compile_model` with an empty compile cache; (executable, seconds).

    The cache is a fresh ``TILECRAFT_CACHE_DIR``, removed afterwards (the compiled library is
    loaded by then); the previous setting is restored.
    """
    old = os.environ.get("TILECRAFT_CACHE_DIR")
    folder = tempfile.mkdtemp(prefix="tc-cold-cache-")
    os.environ["TILECRAFT_CACHE_DIR"] = folder
    try:
        start = time.perf_counter()
        exe = compile_model(mod, params)
        return exe, time.perf_counter() - start
    finally:
        if old is None:
            del os.environ["TILECRAFT_CACHE_DIR"]
        else:
            os.environ["TILECRAFT_CACHE_DIR"] = old
        shutil.rmtree(folder, ignore_errors=True)


def per_call(
    fns: Sequence[Callable[[], object]],
    rounds: int,
    budget_s: float = 0.5,
    clock: Callable[[], float] = time.perf_counter,
) -> list[float]:
    """Median seconds per call of each callable, interleaved over ``rounds`` rounds.

    Each round times every callable alone after a settle pause, as many calls as fit in
    ``budget_s`` (at least one; each call timed alone, so preemption on a shared machine
    shows as outliers the median leaves out). ``clock``: ``time.thread_time`` times the
    calling thread's CPU time (one-thread runs only), leaving out the time it waited for a
    core.
    """
    first = []
    for fn in fns:  # warm-up, and the size of each timing block
        start = time.perf_counter()
        fn()
        first.append(time.perf_counter() - start)
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            time.sleep(SETTLE_S)
            for _ in range(max(1, int(budget_s / max(first[i], 1e-9)))):
                start = clock()
                fn()
                samples[i].append(clock() - start)
    return [statistics.median(s) for s in samples]


def kernel_shares(exe: Any, entry: str, args: Sequence[Any], runs: int) -> list[tuple[str, float]]:
    """(kernel, median seconds) per step of ``entry`` from ``exe.profile``, summed by name."""
    per_run = []
    for _ in range(runs):
        time.sleep(SETTLE_S)
        exe[entry](*args)  # wake the worker threads: a profile right after the pause times that
        totals: dict[str, float] = {}
        for name, seconds in exe.profile(entry, *args):
            totals[name] = totals.get(name, 0.0) + seconds
        per_run.append(totals)
    return sorted(
        ((n, statistics.median(r[n] for r in per_run)) for n in per_run[0]),
        key=lambda item: -item[1],
    )


def print_shares(title: str, shares: list[tuple[str, float]], calls: Mapping[str, int]) -> None:
    """A table of kernel times and their share of the sum."""
    total = sum(t for _, t in shares)
    print(f"{title}: per-kernel time (exe.profile, median of runs), sum {total * 1e6:,.0f} us")
    print(f"  {'kernel':<48}{'calls':>6}{'us':>14}{'share':>8}")
    for name, t in shares:
        print(f"  {name:<48}{calls.get(name, 1):>6}{t * 1e6:>14,.1f}{t / total:>8.1%}")


def environment_line() -> str:
    """Versions, threads and what was removed from the environment."""
    removed = ", ".join(REMOVED) or "none set"
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    return (
        f"numpy {np.__version__}; threads {THREADS} (OMP/OpenBLAS/torch); removed from env: "
        f"{removed}; load average {load}"
    )
