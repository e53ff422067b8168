"""Cost of a forward through the graph executor, and the tutorial models against numpy.

Part 1 — per-forward overhead on trivial models (one tiny elementwise kernel on 16 floats):
a forward through the native entry (``exe["main"](x)``), through the Python executor
(``f.run``: one kernel wrapper call per step, what every forward paid before), one kernel
called directly through its wrapper, and the numpy ufunc on the same array. Rows with a
symbolic extent, eight inputs, and inputs the entry declines (a strided view, a DLPack-only
tensor: validated and converted in Python first) show what the argument checks cost.

Part 2 — both tutorial models (the reference tutorial's Linear 768->768, ReLU, LayerNorm,
Linear 768->256 and the MetaSchedule tutorial's Linear 784->256, ReLU, Linear 256->10) at
batch 1 and 64 (``tests/models/tutorial.py``), compiled by ``tc.compile`` (weights bound,
CPU rules) and run by the native executor, against numpy float32 in the same run; ``sum
kernels`` is the time measured around each kernel call inside the entry and ``overhead`` the
rest of the same forward (median over calls, each timed whole from Python).
The "zero + Python executor" column is the path before this work (transposes recomputed,
one Python call per kernel).

Measurement: part 1 times blocks of 2000 back-to-back calls, part 2 every call alone (the
median of single calls leaves out preemption on a shared machine); each block of a variant
starts after a short pause (OpenBLAS threads spin after a numpy call), the variants are
interleaved over rounds, and the tables show per-call medians. numpy runs
as it does for a user: ``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` are removed from the
environment before numpy is imported.

Run: ``python benchmarks/executor_bench.py [--rounds N]``.
"""

from __future__ import annotations

import os
import sys

_REMOVED = {
    k: os.environ.pop(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ
}

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from _models import models, np_float32  # noqa: E402

import tilecraft as tc  # noqa: E402
from tilecraft.graph import GraphBuilder, Legalize, get_pipeline  # noqa: E402


def _block(fn: Callable[[], object], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


SETTLE_S = 0.2
"""Pause before each timing block: OpenBLAS keeps helper threads spinning for a while after a
numpy call, which would slow whatever runs next on a small machine (same pause for all)."""


def interleaved(fns: list[Callable[[], object]], rounds: int, number: int) -> list[float]:
    """Per-call median seconds of each callable, timed in interleaved rounds."""
    for fn in fns:  # warm up
        _block(fn, max(1, number // 10))
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            time.sleep(SETTLE_S)
            samples[i].append(_block(fn, number))
    return [statistics.median(s) for s in samples]


def per_call(fns: list[Callable[[], object]], rounds: int, calls: int) -> list[float]:
    """Per-call median seconds of each callable, every call timed alone.

    Long calls timed in blocks would include whatever preempted them on a shared machine;
    the median of single calls does not.
    """
    samples: list[list[float]] = [[] for _ in fns]
    for fn in fns:  # warm up
        fn()
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            time.sleep(SETTLE_S)
            for _ in range(calls):
                start = time.perf_counter()
                fn()
                samples[i].append(time.perf_counter() - start)
    return [statistics.median(s) for s in samples]


class _DLPackOnly:
    """A CPU tensor offering only DLPack (no buffer protocol), like a torch tensor."""

    def __init__(self, arr: np.ndarray) -> None:
        self.arr = arr

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.arr.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.arr.__dlpack_device__()


def _graph(shape: tuple[int | str, ...], inputs: int) -> tc.graph.Executable:
    """``negative(x0)`` with ``inputs - 1`` more parameters that are only checked."""
    bb = GraphBuilder()
    xs = [bb.param(f"x{i}", shape, "float32") for i in range(inputs)]
    mod = Legalize()(tc.IRModule({"main": bb.finish(bb.emit("negative", [xs[0]]), "main")}))
    return tc.build(mod, "cpu")


def overhead_table(rounds: int) -> None:
    """Part 1 (see the module docstring)."""
    x = np.random.default_rng(0).standard_normal(16).astype("float32")
    out = np.empty_like(x)
    exe = _graph((16,), 1)
    f, kernel = exe["main"], exe["negative"]
    sym = _graph(("n",), 1)["main"]
    many = _graph((16,), 8)["main"]
    xs = [x.copy() for _ in range(8)]
    strided = np.repeat(x, 2)[::2]
    dlpack = _DLPackOnly(x)
    rows: list[tuple[str, Callable[[], object]]] = [
        ("numpy ufunc np.negative(x)", lambda: np.negative(x)),
        ("numpy ufunc np.negative(x, out=out)", lambda: np.negative(x, out=out)),
        ("one kernel through its wrapper", lambda: kernel(x, out)),
        ("forward, Python executor (before)", lambda: f.run((x,))),
        ("forward, native: x (16,)", lambda: f(x)),
        ("forward, native: x (n,) symbolic", lambda: sym(x)),
        ("forward, native: 8 inputs (7 only checked)", lambda: many(*xs)),
        ("forward, native: strided view input", lambda: f(strided)),
        ("forward, native: DLPack-only input", lambda: f(dlpack)),
    ]
    times = interleaved([fn for _, fn in rows], 3 * rounds, 2000)
    kernel, overhead = split_forward(f, (x,), 20000)
    print("Part 1: per-forward overhead (one elementwise kernel on 16 float32)")
    print(f"{'':<44}{'us/call':>10}")
    for (name, _), t in zip(rows, times, strict=True):
        print(f"{name:<44}{t * 1e6:>10.3f}")
    print(
        f"native forward, profiled call by call: kernel {kernel * 1e6:.3f} us, "
        f"everything else {overhead * 1e6:.3f} us"
    )
    per_input = (times[6] - times[4]) * 1e6 / 7
    print(f"checks of one more input (format, rank, extents, contiguity): {per_input:.3f} us")
    print()


def split_forward(f: Any, args: tuple[Any, ...], calls: int) -> tuple[float, float]:
    """Median (kernel seconds, overhead seconds) of native forwards: each call is timed as a
    whole and its kernels inside the entry, so the overhead is that of the same call."""
    native = f.native
    assert native is not None
    names = [s.func for s in f.steps]
    kernels, overheads = [], []
    native.set_profiling(True)
    try:
        for _ in range(calls):
            start = time.perf_counter()
            f(*args)
            wall = time.perf_counter() - start
            inside = sum(r.seconds for r in native.records(names))
            kernels.append(inside)
            overheads.append(wall - inside)
    finally:
        native.set_profiling(False)
    return statistics.median(kernels), statistics.median(overheads)


def model_row(case: Any, rounds: int) -> str:
    """Time one tutorial model case; the table row."""
    f = tc.compile(case.mod, "cpu", params=case.params)["forward"]
    with tc.Target("cpu"):
        old = tc.build(get_pipeline("zero")(case.mod), "cpu")["forward"]
    (x,) = case.inputs
    reference = np_float32(case)
    weights = tuple(case.params.values())
    np.testing.assert_allclose(f(x), case.expected(), rtol=case.rtol, atol=case.atol)
    batch = x.shape[0]
    calls = 100 if batch == 1 else 3
    ours, theirs, before = per_call(
        [lambda: f(x), reference, lambda: old.run((x, *weights))],
        rounds,
        calls,
    )
    kernels, overhead = split_forward(f, (x,), 5 * calls * rounds)
    name = case.name.removeprefix("tutorial_").rsplit("_", 1)[0]
    return (
        f"{name:<18}{batch:>6}{theirs * 1e6:>12.1f}{ours * 1e6:>12.1f}{kernels * 1e6:>13.1f}"
        f"{overhead * 1e6:>11.2f}{theirs / ours:>8.3f}{before * 1e6:>14.1f}"
    )


def model_table(rounds: int) -> None:
    """Part 2 (see the module docstring)."""
    print("Part 2: tutorial models, tc.compile (bound weights, CPU rules), native executor")
    header = (
        f"{'model':<18}{'batch':>6}{'numpy us':>12}{'ours us':>12}{'sum kernels':>13}"
        f"{'overhead':>11}{'ratio':>8}{'zero+Python':>14}"
    )
    print(header)
    print("-" * len(header))
    for batch in (1, 64):
        for name in ("reference", "metaschedule"):
            print(model_row(models.tutorial.case(name, batch), rounds))
    print("ratio = numpy time / ours (>1: tilecraft faster)")


def main(argv: list[str] | None = None) -> int:
    """Print both tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds")
    args = parser.parse_args(argv)
    removed = ", ".join(_REMOVED) or "none set"
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"numpy {np.__version__}; removed from env: {removed}; load average {load}")
    overhead_table(args.rounds)
    model_table(args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
