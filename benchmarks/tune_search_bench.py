"""Does the search beat blind sampling? Evolutionary search (XGBoost model) against
``ReplayTrace`` over the same space, and the evolutionary search's tuning curves.

Workloads (fp32): matmul 1024^3 (``mm1024``); batched matmul Q @ K^T with batch 16, M = N =
197, K = 64 as in ViT attention (``bmm``); ResNet-18's 3x3 convolution 64 -> 64 channels at
56x56, stride 1, padding 1, batch 1, NCHW as the other convolution benchmarks (``conv``);
softmax 333x5000 (``sm``).

* The comparison (default): for each workload and seed (three; one with ``--quick``),
  ``--trials`` trials (64) of each strategy over the search rules' space, neither seeded with
  the rules' schedule; the best measured time of each run, the median over seeds, the ratio
  replay / evolutionary and the goal (evolutionary >= 20% faster: ratio >= 1.2).
* ``--curves PNG``: ``--curve-trials`` trials (512) of the evolutionary search per workload,
  one seed (``--curve-seed``, 0), its best time against trials; prints the trial at which it
  first reached 95% of its own final best (goal: <= 200) and draws the curves, with the first
  comparison seed's ReplayTrace curves when the comparison ran in the same call, into PNG
  (``tilecraft[plot]``).

Times are the runner's (three repeats of at least 20 ms, one thread, ``BENCH_THREADS``
defaults to 1); each run also prints its wall time per trial. On a shared machine read the
ratios, measured in the same run.

    python benchmarks/tune_search_bench.py [--quick] [--only mm1024,bmm,conv,sm]
    python benchmarks/tune_search_bench.py --curves curves.png [--no-cmp] [--curve-trials 512]
"""

from __future__ import annotations

import os

os.environ.setdefault("BENCH_THREADS", "1")

import argparse
import json
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import _bench_common as bench  # sets the thread environment before numpy loads
from tune_bench import matmul, runner, softmax

import tilecraft as tc
from tilecraft import tune as ms

STRATEGIES = ("evolutionary", "replay-trace")
GOAL_RATIO = 1.2
"""Replay's best time over the evolutionary search's: evolutionary at least 20% faster."""
CURVE_SHARE, CURVE_GOAL = 0.95, 200
"""The curve's goal: 95% of the search's own final best speed within 200 trials."""


def batch_matmul(b: int, m: int, k: int, n: int) -> tc.ir.PrimFunc:
    """``Q @ K^T`` with Q ``(b, m, k)`` and K ``(b, n, k)``, as attention scores are."""
    q = tc.te.placeholder((b, m, k), "float32", name="Q")
    kt = tc.te.placeholder((b, n, k), "float32", name="K")
    return tc.te.create_prim_func([q, kt, tc.topi.matmul(q, kt, transpose_b=True)])


def conv2d(c: int, size: int, kernel: int) -> tc.ir.PrimFunc:
    """A ``kernel``x``kernel`` convolution, ``c`` -> ``c`` channels, stride 1, same padding,
    batch 1, NCHW (padding is a stage of its own, inlined or not by the space)."""
    x = tc.te.placeholder((1, c, size, size), "float32", name="x")
    w = tc.te.placeholder((c, c, kernel, kernel), "float32", name="w")
    y = tc.topi.conv2d(x, w, stride=1, padding=kernel // 2, layout="NCHW")
    return tc.te.create_prim_func([x, w, y])


WORKLOADS: dict[str, tuple[str, Callable[[], tc.ir.PrimFunc]]] = {
    "mm1024": ("matmul 1024^3", lambda: matmul(1024)[0]),
    "bmm": ("batch matmul 16x197x64x197", lambda: batch_matmul(16, 197, 64, 197)),
    "conv": ("conv2d 3x3 64->64 56x56", lambda: conv2d(64, 56, 3)),
    "sm": ("softmax 333x5000", lambda: softmax(333, 5000)[0]),
}


def run(func: tc.ir.PrimFunc, target: tc.Target, strategy: str, trials: int, seed: int
        ) -> tuple[list[float], float]:  # fmt: skip
    """Best seconds after each trial of one tuning run over the search rules' space (no
    rules' seed), and the run's wall time."""
    measure = runner()
    t0 = time.perf_counter()
    db = ms.tune_tir(func, target, max_trials_global=trials, database=ms.database.MemoryDatabase(),
                     strategy=strategy, num_trials_per_iter=16, runner=measure, seed=seed,
                     seed_with_rules=False, progress=False,
                     space=ms.space.search_rules_space(target))  # fmt: skip
    wall = time.perf_counter() - t0
    measure.close()
    curve, best = [], math.inf
    for rec in db.get_all_tuning_records():  # in the order measured
        best = min(best, rec.mean_secs)
        curve.append(best)
    return curve, wall


def _line(seed: int, strategy: str, curve: list[float], wall: float) -> str:
    per = wall / max(len(curve), 1)
    return (f"    seed {seed} {strategy:12s}: best {curve[-1] * 1e3:8.3f} ms, {len(curve)} trials, "
            f"{wall:5.0f} s ({per:.2f} s/trial)")  # fmt: skip


def compare(key: str, target: tc.Target, seeds: list[int], trials: int,
            curves: dict[str, list[float]]) -> str:  # fmt: skip
    """Both strategies on workload ``key``, each seed; the summary line. The first seed's
    ReplayTrace curve goes into ``curves``."""
    name, make = WORKLOADS[key]
    func = make()
    found: dict[str, list[float]] = {s: [] for s in STRATEGIES}
    for seed in seeds:
        for strategy in STRATEGIES:
            curve, wall = run(func, target, strategy, trials, seed)
            found[strategy].append(curve[-1])
            print(_line(seed, strategy, curve, wall), flush=True)
            if strategy == "replay-trace" and seed == seeds[0]:
                curves[f"{key} replay-trace ({trials})"] = curve
    evo, rep = (statistics.median(found[s]) for s in STRATEGIES)
    ratio = rep / evo
    verdict = "PASS" if ratio >= GOAL_RATIO else f"FAIL (goal {GOAL_RATIO:.2f}x)"
    return (f"{name:28s} {trials} trials, median of {len(seeds)}: evolutionary "
            f"{evo * 1e3:8.3f} ms, replay-trace {rep * 1e3:8.3f} ms, ratio {ratio:5.2f}x "
            f"{verdict}")  # fmt: skip


def reached(curve: list[float], share: float = CURVE_SHARE) -> int:
    """The first trial (from 1) whose best speed is at least ``share`` of the final best's."""
    goal = curve[-1] / share
    return next(n for n, t in enumerate(curve, start=1) if t <= goal)


def curve_of(key: str, target: tc.Target, trials: int, seed: int,
             curves: dict[str, list[float]]) -> str:  # fmt: skip
    """The evolutionary search's curve on workload ``key`` (into ``curves``); its line."""
    name, make = WORKLOADS[key]
    curve, wall = run(make(), target, "evolutionary", trials, seed)
    print(_line(seed, "evolutionary", curve, wall), flush=True)
    curves[f"{key} evolutionary ({trials})"] = curve
    at = reached(curve)
    verdict = "PASS" if at <= CURVE_GOAL else f"FAIL (goal <= {CURVE_GOAL})"
    at64 = curve[min(63, len(curve) - 1)]
    return (f"{name:28s} seed {seed}: best {curve[-1] * 1e3:8.3f} ms after {len(curve)} trials "
            f"(at 64: {at64 * 1e3:.3f} ms); 95% of it at trial {at:3d} {verdict}")  # fmt: skip


def main() -> None:
    """Run the comparison and/or the curves (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one seed in the comparison")
    parser.add_argument("--only", default="", help="comma list of " + ",".join(WORKLOADS))
    parser.add_argument("--trials", type=int, default=64, help="trials of each strategy")
    parser.add_argument("--curves", default="", help="PNG: run and plot the tuning curves")
    parser.add_argument("--curve-trials", type=int, default=512, help="trials of each curve")
    parser.add_argument("--curve-seed", type=int, default=0, help="seed of the curves")
    parser.add_argument("--no-cmp", action="store_true", help="the curves only")
    parser.add_argument("--save", default="", help="JSON: write every curve of this run")
    parser.add_argument("--merge", default="", help="comma list of --save files to plot too")
    opts = parser.parse_args()
    target = tc.Target("cpu -num-cores=1")
    print(f"target: {target}; {bench.environment_line()}", flush=True)
    keys = opts.only.split(",") if opts.only else list(WORKLOADS)  # in the order given
    if unknown := set(keys) - set(WORKLOADS):
        parser.error(f"--only: unknown workloads {sorted(unknown)}")
    curves: dict[str, list[float]] = {}
    lines = []
    for key in keys if not opts.no_cmp else ():
        lines.append(compare(key, target, [0] if opts.quick else [0, 1, 2], opts.trials, curves))
        print(lines[-1], flush=True)
        _keep(curves, opts)
    for key in keys if opts.curves else ():
        lines.append(curve_of(key, target, opts.curve_trials, opts.curve_seed, curves))
        print(lines[-1], flush=True)
        _keep(curves, opts)
    print("\n".join(["", "summary:", *lines]))
    if opts.curves:
        print(f"curves: {opts.curves}")


def _keep(curves: dict[str, list[float]], opts: argparse.Namespace) -> None:
    """Save and plot the curves so far (with the merged files'), so a cut run leaves them."""
    if opts.save:
        Path(opts.save).write_text(json.dumps(curves))
    if opts.curves:
        merged = {}
        for path in filter(None, opts.merge.split(",")):
            merged.update(json.loads(Path(path).read_text()))
        ms.plot_tuning_curves({**merged, **curves}, opts.curves)


if __name__ == "__main__":
    main()
