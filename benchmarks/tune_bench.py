"""Tuning against numpy and the rules: what 64 (or 32) trials of the evolutionary search buy.

On one thread for both sides (``BENCH_THREADS`` defaults to 1; ``OPENBLAS_CORETYPE`` and
``OPENBLAS_L2_SIZE`` are removed from this process before numpy loads, see
``_bench_common``), the host's ISA (printed), for each workload:

* fp32 matmul 512^3 and 1024^3 tuned with 64 trials: GFLOP/s of the best record against
  numpy's and against the rules-only schedule;
* layer_norm 128x768 and softmax 128x1024 tuned with 32 trials: against numpy;
* tuning wall time per trial and in total (the figures' runs confirm their three fastest
  functions and the rules' schedule at the end, ``confirm_top=3``: included in the time, not
  counted as trials);
* evolutionary search (XGBoost model) against ``ReplayTrace`` over the same space at 64
  trials on matmul 1024^3, neither seeded with the rules' schedule: the best time of each,
  median over seeds (three; one with ``--quick``); the same on four workloads, and the
  search's 512-trial tuning curves, in ``benchmarks/tune_search_bench.py``.

Every time is measured in this process after tuning, numpy, tuned and rules timed in turn
round by round, each round calling a side for about 20 ms (kernels through bound calls, as
the runner times them), the best of ``--rounds`` rounds; on a shared machine read the ratios. Each
line also says which record won: the rules' schedule or a search candidate.

    python benchmarks/tune_bench.py [--quick] [--rounds N]
"""

from __future__ import annotations

import os

os.environ.setdefault("BENCH_THREADS", "1")

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import _bench_common as bench  # sets the thread environment before numpy loads
import numpy as np

import tilecraft as tc
from tilecraft import tune as ms
from tilecraft.tune._confirm import is_confirmation
from tilecraft.tune._defaults import rules_candidate


def matmul(n: int) -> tuple[tc.ir.PrimFunc, Callable[..., Any], list[np.ndarray], float]:
    """C = A @ B (n^3) with its numpy reference, inputs and FLOPs."""
    a = tc.te.placeholder((n, n), "float32", name="A")
    b = tc.te.placeholder((n, n), "float32", name="B")
    k = tc.te.reduce_axis((0, n), name="k")
    c = tc.te.compute((n, n), lambda i, j: tc.te.sum(a[i, k] * b[k, j], axis=k), name="C")
    rng = np.random.default_rng(0)
    args = [rng.random((n, n), dtype=np.float32) for _ in range(2)] + [np.zeros((n, n), "f4")]
    return tc.te.create_prim_func([a, b, c]), lambda x, y: x @ y, args, 2.0 * n**3


def layer_norm(
    m: int, n: int
) -> tuple[tc.ir.PrimFunc, Callable[..., Any], list[np.ndarray], float]:
    """Layer norm over the last axis with gamma and beta."""
    x = tc.te.placeholder((m, n), "float32", name="x")
    g = tc.te.placeholder((n,), "float32", name="g")
    b = tc.te.placeholder((n,), "float32", name="b")
    y = tc.topi.layer_norm(x, g, b, axis=[-1], eps=1e-5)
    rng = np.random.default_rng(0)
    args = [rng.random((m, n), dtype=np.float32), rng.random(n, dtype=np.float32),
            rng.random(n, dtype=np.float32), np.zeros((m, n), "f4")]  # fmt: skip

    def ref(xv: np.ndarray, gv: np.ndarray, bv: np.ndarray) -> np.ndarray:
        mu = xv.mean(-1, keepdims=True)
        var = xv.var(-1, keepdims=True)
        return (xv - mu) / np.sqrt(var + 1e-5) * gv + bv

    return tc.te.create_prim_func([x, g, b, y]), ref, args, 8.0 * m * n


def softmax(m: int, n: int) -> tuple[tc.ir.PrimFunc, Callable[..., Any], list[np.ndarray], float]:
    """Softmax over the last axis."""
    x = tc.te.placeholder((m, n), "float32", name="x")
    rng = np.random.default_rng(0)
    args = [rng.random((m, n), dtype=np.float32), np.zeros((m, n), "f4")]

    def ref(xv: np.ndarray) -> np.ndarray:
        e = np.exp(xv - xv.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    return tc.te.create_prim_func([x, tc.topi.softmax(x, axis=-1)]), ref, args, 5.0 * m * n


def seconds(fn: Callable[[], object], rounds: int) -> float:
    """Seconds per call of ``fn`` in its best of ``rounds`` rounds (see :func:`interleaved`)."""
    return interleaved([fn], rounds)[0]


ROUND_S = 0.02
"""Least time of one round of one side: a kernel of microseconds is called many times per
round, so the clock's resolution and one preemption do not decide the comparison."""


def calls_per_round(fn: Callable[[], object]) -> int:
    """How many calls of ``fn`` (after a warm-up call) take about :data:`ROUND_S`."""
    fn()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        took = time.perf_counter() - t0
        if took >= ROUND_S / 4 or n >= 1 << 20:
            return max(1, round(n * ROUND_S / max(took, 1e-9)))
        n *= 4


def interleaved(fns: list[Callable[[], object]], rounds: int) -> list[float]:
    """Seconds per call of each of ``fns`` in its least disturbed of ``rounds`` rounds, the
    sides timed in turn round by round (so a change of the machine's load hits every side
    alike), each round calling a side for about :data:`ROUND_S`. Other work on the machine
    only ever adds time, in bursts: the same library timed twice this way agreed within 1%
    where medians of the same rounds differed by up to 30% (two cores, load average 3-4)."""
    counts = [calls_per_round(fn) for fn in fns]
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for fn, n, out in zip(fns, counts, times, strict=True):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            out.append((time.perf_counter() - t0) / n)
    return [min(t) for t in times]


def runner() -> ms.LocalRunner:
    """Three repeats of at least 20 ms each (a kernel of microseconds is run many times, so one
    hiccup of a shared machine does not make the rules' schedule look slow), slow candidates
    cut at 5 s, on the same number of threads as the other side (the runner's default is
    every usable core); at one thread timed on the thread's CPU clock, which other work on a
    shared machine disturbs far less."""
    return ms.LocalRunner(
        timeout_s=5.0,
        number=1,
        repeat=3,
        min_repeat_ms=20.0,
        num_threads=bench.THREADS,
        clock="thread" if bench.THREADS == 1 else "wall",
    )


def tune(func: tc.ir.PrimFunc, target: tc.Target, trials: int, strategy: str, seed: int,
         with_rules: bool) -> tuple[ms.Database, float]:  # fmt: skip
    """The database of one tuning run and its wall time (without the rules: over the search
    rules' space alone, so the comparison is about the search, not the rules' schedule that
    the default space holds)."""
    run = runner()
    space = None if with_rules else ms.space.search_rules_space(target)
    t0 = time.perf_counter()
    db = ms.tune_tir(func, target, max_trials_global=trials, database=ms.database.MemoryDatabase(),
                     strategy=strategy, num_trials_per_iter=16, runner=run, seed=seed,
                     seed_with_rules=with_rules, progress=False, space=space,
                     confirm_top=3 if with_rules else 0)  # fmt: skip
    wall = time.perf_counter() - t0
    run.close()
    return db, wall


def best_secs(db: ms.Database) -> float:
    """The best measured mean time of the records."""
    ok = [r.mean_secs for r in db.get_all_tuning_records() if r.ok]
    return min(ok) if ok else float("inf")


def report(name: str, make: Any, target: tc.Target, trials: int, rounds: int) -> None:
    """Tune one workload and print its figures.

    The kernels are timed through bound calls (``Function.bind``: arguments checked once), as
    the runner and ``time_evaluator`` time them; an unbound ``lib["main"](*args)`` adds tens
    of microseconds of argument checks per call, more than a small kernel takes.
    """
    func, ref, args, flops = make
    rules = rules_candidate(func, target, name)
    rules_lib = tc.build(rules.mod, target) if rules is not None else None
    db, wall = tune(func, target, trials, "evolutionary", 0, True)
    sch = ms.compile_tir(db, func, target)
    assert sch is not None
    lib = tc.build(sch.mod, target)
    lib["main"](*args)
    np.testing.assert_allclose(args[-1], ref(*args[:-1]), rtol=1e-3, atol=1e-3)
    sides: list[Callable[[], object]] = [lambda: ref(*args[:-1]), lib["main"].bind(*args)]
    if rules_lib is not None:
        sides.append(rules_lib["main"].bind(*args))
    np_secs, tuned, *rest = interleaved(sides, rounds)
    gf = flops / 1e9
    line = f"{name}: tuned {gf / tuned:7.2f} GFLOP/s  numpy {gf / np_secs:7.2f}  " \
           f"tuned/numpy {np_secs / tuned:5.2f}x"  # fmt: skip
    if rest:
        line += f"  rules {gf / rest[0]:7.2f}  tuned/rules {rest[0] / tuned:5.2f}x"
    n = sum(not is_confirmation(r) for r in db.get_all_tuning_records())
    print(f"{line}\n    {n} trials, tuning {wall:6.1f} s total, {wall / max(n, 1):5.2f} s/trial"
          f"; best record: {_best_of(db, rules, func, target)}", flush=True)  # fmt: skip


def _best_of(db: ms.Database, rules: Any, func: tc.ir.PrimFunc, target: tc.Target) -> str:
    """Which function won, and the runner's own ratio of the rules' time to its time."""
    wl = db.commit_workload(func, target)
    ok = db.get_top_k(wl, len(db.records_of(wl)))  # one per function, by median
    if not ok:
        return "none"
    key = tc.ir.structural_hash(rules.func) if rules is not None else None
    mine = [r for r in ok if r.func_hash == key]
    if ok[0].func_hash == key:
        return "the rules' schedule"
    if not mine:
        return "a search candidate (the rules' one was not measured)"
    return f"a search candidate, {mine[0].mean_secs / ok[0].mean_secs:.2f}x the rules' as measured"


def compare(target: tc.Target, seeds: list[int], n: int = 1024, trials: int = 64) -> None:
    """Evolutionary vs ReplayTrace on matmul n^3, ``trials`` trials, no rules' seed."""
    func = matmul(n)[0]
    found: dict[str, list[float]] = {"evolutionary": [], "replay-trace": []}
    for seed in seeds:
        for strategy in found:
            db, wall = tune(func, target, trials, strategy, seed, False)
            found[strategy].append(best_secs(db))
            rate = 2.0 * n**3 / found[strategy][-1] / 1e9
            print(f"    seed {seed} {strategy}: best {rate:.2f} GFLOP/s, {wall:.0f} s", flush=True)
    evo, rep = (statistics.median(found[k]) for k in ("evolutionary", "replay-trace"))
    print(f"matmul {n}^3, {trials} trials, median of {len(seeds)} seed(s): evolutionary "
          f"{2.0 * n**3 / evo / 1e9:.2f} GFLOP/s, replay-trace {2.0 * n**3 / rep / 1e9:.2f}"
          f"; evolutionary {rep / evo:.2f}x faster")  # fmt: skip


def main() -> None:
    """Run every figure (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one seed in the comparison")
    parser.add_argument("--rounds", type=int, default=9, help="rounds of timing per side")
    parser.add_argument("--only", default="", help="comma list: mm512,mm1024,ln,sm,cmp")
    parser.add_argument("--cmp-size", type=int, default=1024, help="matmul size compared")
    parser.add_argument("--cmp-trials", type=int, default=64, help="trials of each strategy")
    opts = parser.parse_args()
    target = tc.Target("cpu -num-cores=1")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"target: {target}  (threads: {bench.THREADS}, both sides; {os.cpu_count()} cores, "
          f"load average {load})", flush=True)  # fmt: skip
    only = set(filter(None, opts.only.split(",")))
    todo = [("mm512", "matmul 512^3", lambda: matmul(512), 64),
            ("mm1024", "matmul 1024^3", lambda: matmul(1024), 64),
            ("ln", "layer_norm 128x768", lambda: layer_norm(128, 768), 32),
            ("sm", "softmax 128x1024", lambda: softmax(128, 1024), 32)]  # fmt: skip
    for key, name, make, trials in todo:
        if not only or key in only:
            report(name, make(), target, trials, opts.rounds)
    if not only or "cmp" in only:
        compare(target, [0] if opts.quick else [0, 1, 2], opts.cmp_size, opts.cmp_trials)


if __name__ == "__main__":
    main()
