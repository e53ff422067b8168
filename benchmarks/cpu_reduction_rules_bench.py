"""The CPU rules (no tuning, no hand-written schedule) versus numpy, measured in the same run.

Workloads, all float32: softmax and layer_norm on (4096, 1024) (issue 12 target: at least
1.5x numpy's speed), RMS norm and a row sum (``x.sum(-1)``) on (4096, 1024), a transpose of
(4096, 4096) and an elementwise add of two (4096, 4096) arrays; softmax on (333, 5000) and
(4096, 1024) and (128, 1024) against ``torch.softmax`` too when torch is installed (issue 19:
at least torch's speed at one thread), at one thread and at every usable core (``1T``/``2T``
rows: both sides run that many threads, whatever ``--threads`` says; the ratio is torch's time
over tilecraft's). Each kernel is scheduled by
the first rule of ``tilecraft.rules.cpu.default_rules()`` that accepts it (the table names
it) and checked against numpy before timing.

numpy references: softmax ``exp(x - max) / sum``, layer_norm ``(x - mean) / sqrt(var + eps)
* gamma + beta``, RMS norm ``x / sqrt(mean(x * x) + eps) * w`` (as a user writes them, with
temporaries), ``x.sum(-1)``, ``np.copyto(out, x.T)`` and ``np.add(a, b, out=c)`` (no
allocation). numpy runs these on one thread; tilecraft uses every usable core.

Measurement: as ``benchmarks/cpu_schedule_bench.py`` — ``OPENBLAS_CORETYPE`` and
``OPENBLAS_L2_SIZE`` are removed from this process's environment before numpy is imported,
tilecraft's ``OMP_NUM_THREADS`` is the number of usable cores (``--threads=N`` to change it:
on a machine shared with other work, a parallel loop waits for its slowest thread, so one
thread gives steadier figures, and so does ``OMP_WAIT_POLICY=passive`` in the environment:
OpenMP's default spin-waiting workers compete with the other work), calls are interleaved in
rounds with a pause before each timing block (so one library's spinning threads do not slow
the other), and the table shows per-call medians; ``ratio`` is numpy's time over tilecraft's
(>1: tilecraft faster). GB/s counts the minimum traffic: bytes of the inputs and the output.

Run: ``python benchmarks/cpu_reduction_rules_bench.py [--rounds N] [--threads=N]``.
"""

from __future__ import annotations

import os
import sys

_REMOVED = {
    k: os.environ.pop(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ
}
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
# --threads N (before anything starts OpenMP): tilecraft's thread count, default every core
_THREADS = next((int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--threads=")), _CORES)
os.environ["OMP_NUM_THREADS"] = str(_THREADS)

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import numpy as np  # noqa: E402

import tilecraft as tc  # noqa: E402
from tilecraft import te, topi  # noqa: E402
from tilecraft.rules import Decline  # noqa: E402
from tilecraft.rules import cpu as rules_cpu  # noqa: E402

SETTLE_S = 0.25
"""Pause before each timing block (see benchmarks/cpu_schedule_bench.py)."""


@dataclass
class Workload:
    """One row of the table."""

    name: str
    rule: str
    ours: Callable[[], None]
    theirs: Callable[[], object]
    nbytes: int
    target: float | None  # minimum ratio numpy_time / tilecraft_time, None: reported only
    threads: int | None = None  # both sides' threads while timed; None: the process default


def schedule(func: tc.ir.PrimFunc) -> tuple[str, tc.Schedule]:
    """The first default rule accepting ``func`` and its schedule."""
    target = tc.Target("cpu")
    for rule in rules_cpu.default_rules():
        got = rule.apply(func, target, False)
        if isinstance(got, tc.Schedule):
            return rule.name, got
        assert isinstance(got, Decline)
    raise AssertionError("Fallback takes every function")


def workload(
    name: str,
    tensors: list[te.Tensor],
    inputs: list[np.ndarray],
    reference: Callable[[], np.ndarray],
    target: float | None,
) -> Workload:
    """Schedule, build and check one kernel; the output buffer is the last tensor."""
    rule, sch = schedule(te.create_prim_func(tensors))
    lib = tc.build(sch.mod, target="cpu")
    want = reference()
    out = np.empty_like(want)
    lib["main"](*inputs, out)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(want).max()))
    nbytes = sum(a.nbytes for a in inputs) + out.nbytes
    return Workload(name, rule, lib["main"].bind(*inputs, out), reference, nbytes, target)


def norm_workloads(rows: int, cols: int) -> list[Workload]:
    """softmax, layer_norm, RMS norm and a row sum on (rows, cols)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    g = rng.standard_normal(cols, dtype=np.float32)
    b = rng.standard_normal(cols, dtype=np.float32)
    X = te.placeholder((rows, cols), "float32", name="x")
    G = te.placeholder((cols,), "float32", name="g")
    B = te.placeholder((cols,), "float32", name="b")

    def softmax() -> np.ndarray:
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)  # type: ignore[no-any-return]

    def layer_norm() -> np.ndarray:
        mean = x.mean(axis=-1, keepdims=True)
        var = x.var(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-5) * g + b  # type: ignore[no-any-return]

    def rms_norm() -> np.ndarray:
        return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-5) * g  # type: ignore[no-any-return]

    shape = f"{rows}x{cols}"
    return [
        workload(f"softmax {shape}", [X, topi.softmax(X)], [x], softmax, 1.5),
        workload(f"layer_norm {shape}", [X, G, B, topi.layer_norm(X, G, B, eps=1e-5)],
                 [x, g, b], layer_norm, 1.5),
        workload(f"rms_norm {shape}", [X, G, topi.rms_norm(X, G, eps=1e-5)], [x, g],
                 rms_norm, None),
        workload(f"row sum {shape}", [X, topi.sum(X, axis=1)], [x], lambda: x.sum(-1), None),
    ]  # fmt: skip


def set_threads(n: int) -> None:
    """Run tilecraft's OpenMP kernels (called from this thread) and torch on ``n`` threads."""
    import contextlib
    import ctypes

    with contextlib.suppress(OSError):  # loaded by the kernels when the compiler has OpenMP
        ctypes.CDLL("libgomp.so.1", mode=os.RTLD_NOLOAD).omp_set_num_threads(n)
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(n)


def torch_softmax_workloads(shapes: list[tuple[int, int]]) -> list[Workload]:
    """softmax against ``torch.softmax`` on each (rows, cols), when torch is installed, at one
    thread and at every usable core: issue 19 asks for at least torch's speed at one."""
    try:
        import torch
    except ImportError:
        return []
    out = []
    for rows, cols in shapes:
        x = np.random.default_rng(2).standard_normal((rows, cols), dtype=np.float32)
        xt = torch.from_numpy(x)
        X = te.placeholder((rows, cols), "float32", name="x")
        for threads in sorted({1, _CORES}):
            goal = 1.0 if threads == 1 else None
            w = workload(f"softmax {rows}x{cols} torch {threads}T", [X, topi.softmax(X)], [x],
                         lambda xt=xt: torch.softmax(xt, -1).numpy(), goal)  # fmt: skip
            w.threads = threads
            out.append(w)
    return out


def data_movement_workloads(n: int) -> list[Workload]:
    """A transpose and an elementwise add on (n, n)."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, n), dtype=np.float32)
    c = rng.standard_normal((n, n), dtype=np.float32)
    t_out = np.empty((n, n), np.float32)
    s_out = np.empty((n, n), np.float32)
    A = te.placeholder((n, n), "float32", name="a")
    C = te.placeholder((n, n), "float32", name="c")

    def transpose() -> np.ndarray:
        np.copyto(t_out, a.T)
        return t_out

    def add() -> np.ndarray:
        return np.add(a, c, out=s_out)  # type: ignore[no-any-return]

    shape = f"{n}x{n}"
    return [
        workload(f"transpose {shape}", [A, topi.transpose(A)], [a], transpose, None),
        workload(f"add {shape}", [A, C, topi.add(A, C)], [a, c], add, None),
    ]


def _time_calls(fn: Callable[[], object], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def measure(w: Workload, rounds: int, number: int) -> tuple[float, float]:
    """Interleaved per-call medians (tilecraft, numpy) in seconds."""
    for _ in range(2):
        w.ours()
        w.theirs()
    ours, theirs = [], []
    for _ in range(rounds):
        time.sleep(SETTLE_S)
        ours.append(_time_calls(w.ours, number))
        time.sleep(SETTLE_S)
        theirs.append(_time_calls(w.theirs, number))
    return statistics.median(ours), statistics.median(theirs)


def main(argv: list[str] | None = None) -> int:
    """Build, check and time every workload and print the table; 1 when a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11, help="interleaved timing rounds")
    parser.add_argument("--rows", type=int, default=4096, help="rows of the norm workloads")
    parser.add_argument("--cols", type=int, default=1024, help="row length of the norms")
    parser.add_argument("--n", type=int, default=4096, help="edge of transpose and add")
    parser.add_argument("--threads", type=int, default=_CORES,
                        help="tilecraft's OpenMP threads (give it as --threads=N)")  # fmt: skip
    args = parser.parse_args(argv)
    removed = ", ".join(_REMOVED) or "none set"
    print(f"numpy {np.__version__}; cores: {_CORES}; tilecraft OMP_NUM_THREADS={_THREADS}; "
          f"removed from env: {removed}; target {tc.Target('cpu').features}")  # fmt: skip
    workloads = [*norm_workloads(args.rows, args.cols),
                 *torch_softmax_workloads([(333, 5000), (args.rows, args.cols), (128, 1024)]),
                 *data_movement_workloads(args.n)]  # fmt: skip
    header = (f"{'workload':<28}{'rule':<18}{'tilecraft ms':>13}{'GB/s':>7}{'numpy ms':>10}"
              f"{'GB/s':>7}{'ratio':>7}{'target':>8}  met")  # fmt: skip
    print(header)
    print("-" * len(header))
    ok = True
    for w in workloads:
        set_threads(w.threads or _THREADS)
        ours, theirs = measure(w, args.rounds, 5)
        ratio = theirs / ours
        met = w.target is None or ratio >= w.target
        ok = ok and met
        goal = f"{w.target:.2f}" if w.target is not None else "-"
        print(
            f"{w.name:<28}{w.rule:<18}{ours * 1e3:>13.3f}{w.nbytes / ours / 1e9:>7.1f}"
            f"{theirs * 1e3:>10.3f}{w.nbytes / theirs / 1e9:>7.1f}{ratio:>7.2f}{goal:>8}  "
            f"{'yes' if met else 'NO' if w.target is not None else '-'}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
