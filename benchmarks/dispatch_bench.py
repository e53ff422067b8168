"""Library dispatch against the rules and the tuner: matmul 512^3, 1024^3, the ViT batched matmul.

Each workload is an nn graph (``a @ b``) compiled four ways on one thread: the rules only
(graph pipeline, ``ApplyDefaultSchedule``); library first (``DispatchLibrary`` then the
rules: the GEMM is a ``call_extern`` to OpenBLAS's cblas); tuned (``--trials`` trials of the
default space, the rules' schedule first, BLAS not measured, then ``tc.compile(database=)``);
and the tuner's choice (the same tuning with BLAS measured as one more candidate, then
``tc.compile(database=)``, which keeps the faster per function). numpy runs the same product
as the reference. Times are medians of interleaved rounds; on a shared machine read the ratios.

    python benchmarks/dispatch_bench.py [--rounds N] [--trials N] [--small]

One thread for everybody: ``BENCH_THREADS`` defaults to 1 here (OpenMP kernels, numpy's
OpenBLAS, the dispatched OpenBLAS); ``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` are
removed from this process's environment before any BLAS loads (``_bench_common``).
Needs ``pip install 'tilecraft[blas]'``.
"""

from __future__ import annotations

import os

os.environ.setdefault("BENCH_THREADS", "1")

import argparse
import tempfile
import time
from typing import Any

import _bench_common as bench  # sets the thread environment before numpy loads
import numpy as np

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft import tune as ms
from tilecraft.dispatch import DispatchLibrary
from tilecraft.frontend import nn
from tilecraft.graph import get_pipeline
from tilecraft.runtime.executor.extern import load_blas

WORKLOADS = {
    "matmul 512^3": ((512, 512), (512, 512)),
    "matmul 1024^3": ((1024, 1024), (1024, 1024)),
    "ViT bmm 16x197x64x197": ((16, 197, 64), (16, 64, 197)),
}
SMALL = {
    "matmul 48x40x32": ((48, 32), (32, 40)),
    "bmm 2x24x16x20": ((2, 24, 16), (2, 16, 20)),
}
"""``--small``: the same four paths on tiny products (the test's run of this script)."""


class Product(nn.Module):
    """``a @ b``."""

    def forward(self, a: nn.Tensor, b: nn.Tensor) -> nn.Tensor:
        """The product."""
        return a @ b


def _module(shapes: tuple[tuple[int, ...], ...], target: tc.Target) -> tc.IRModule:
    spec = {n: nn.spec.Tensor(s, "float32") for n, s in zip("ab", shapes, strict=True)}
    mod, _ = Product().export({"forward": spec})
    with target:
        return get_pipeline("default")(mod)


def build(shapes: tuple[tuple[int, ...], ...], target: tc.Target, dispatch: bool) -> Any:
    """The product compiled with the rules only, or with the library first."""
    mod = _module(shapes, target)
    with target:
        if dispatch:
            mod = DispatchLibrary()(mod)
        mod = dl.ApplyDefaultSchedule(*dl.cpu.default_rules())(mod)
    return tc.build(mod, target)


def tuned(
    shapes: tuple[tuple[int, ...], ...], target: tc.Target, trials: int, library: bool
) -> tuple[Any, str]:
    """The product compiled from ``trials`` tuning trials (``library``: BLAS measured as one
    of them), and who scheduled its GEMM."""
    mod = _module(shapes, target)
    with tempfile.TemporaryDirectory() as work_dir:
        runner = ms.LocalRunner(num_threads=bench.THREADS, timeout_s=120.0)
        try:
            db = ms.tune_tir(
                mod, target, work_dir=work_dir, max_trials_global=trials,
                num_trials_per_iter=min(trials, 8), runner=runner, progress=False,
                libraries=["blas"] if library else [],
            )  # fmt: skip
        finally:
            runner.close()
        exe = tc.compile(mod, target, database=db)
    with target:
        chosen = DispatchLibrary(database=db)(mod) if library else mod
        chosen = ms.ApplyDatabase(database=db)(chosen)
    who = {tc.ir.scheduled_by(f) for _, f in chosen.prim_funcs()} - {None}
    return exe, ",".join(sorted(str(w) for w in who)) or "rules"


def main() -> None:
    """Print a table of median times and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--trials", type=int, default=8, help="tuning trials per workload")
    parser.add_argument("--small", action="store_true", help="tiny products (a quick check)")
    parser.add_argument(
        "--clock",
        choices=["wall", "thread"],
        default="wall",
        help="thread: the calling thread's CPU time (one thread only; leaves out waits for a core)",
    )
    args = parser.parse_args()
    if args.clock == "thread" and bench.THREADS != 1:
        parser.error("--clock thread needs one thread (BENCH_THREADS=1)")
    clock = time.thread_time if args.clock == "thread" else time.perf_counter
    target = tc.Target(f"cpu -num-cores={bench.THREADS}")
    blas = load_blas()
    blas.set_num_threads(bench.THREADS)
    print(bench.environment_line())
    print(f"target: {target}")
    print(f"dispatched BLAS: {blas.config()}")
    print(f"tuning: {args.trials} trials per workload (the rules' schedule first)")
    print(f"clock: {args.clock}")
    print(f"{'workload':<24}{'rules':>9}{'library':>9}{'tuned':>9}{'choice':>9}{'numpy':>9}"
          f"  (ms)  choice/best  choice took")  # fmt: skip
    for name, shapes in (SMALL if args.small else WORKLOADS).items():
        rng = np.random.default_rng(0)
        a, b = (rng.standard_normal(s).astype("float32") for s in shapes)
        rules, library = build(shapes, target, False), build(shapes, target, True)
        tuned_exe, _ = tuned(shapes, target, args.trials, library=False)
        choice, who = tuned(shapes, target, args.trials, library=True)
        for exe in (rules, library, tuned_exe, choice):
            np.testing.assert_allclose(exe(a, b), a @ b, rtol=1e-3, atol=1e-3)
        fns = (rules, library, tuned_exe, choice, np.matmul)
        calls = [lambda f=f, a=a, b=b: f(a, b) for f in fns]
        times = bench.per_call(calls, args.rounds, clock=clock)
        best = min(times[:4])
        cells = "".join(f"{t * 1e3:>9.2f}" for t in times)
        print(f"{name:<24}{cells}        {times[3] / best:>5.2f}  {who}")


if __name__ == "__main__":
    main()
