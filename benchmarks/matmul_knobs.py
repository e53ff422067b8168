"""The CPU Matmul rule's sampled knobs against its own choice: fp32 matmul n^3, one thread.

``Matmul`` with ``tunable=True`` samples the count of ``m`` blocks and the micro-kernel's
``K`` unroll. This script builds the rules' untuned schedule and the tunable trace replayed
with each asked ``(blocks, unroll)`` pair, then times numpy, the rules and every pair in
turn, round after round, each side called once untimed before it is timed (the side timed
right after numpy otherwise ran up to 10% slow: numpy's buffers and threads leave the caches
cold), on the calling thread's CPU clock (on a shared machine, time the other processes take
from this core does not count). Best of ``--rounds`` rounds; read the ratios.

    python benchmarks/matmul_knobs.py --n 1024 --target "cpu -mcpu=avx2" --pairs 2x4,4x4,8x2
"""

from __future__ import annotations

import os

os.environ.setdefault("BENCH_THREADS", "1")

import argparse
import time
from collections.abc import Callable

import _bench_common as bench  # noqa: F401  (sets the thread environment before numpy loads)
import numpy as np

import tilecraft as tc
from tilecraft.rules.cpu import Matmul
from tilecraft.schedule import Schedule


def thread_interleaved(fns: list[Callable[[], object]], rounds: int, per: float) -> list[float]:
    """Seconds per call of each of ``fns`` (thread CPU time), the best of ``rounds`` rounds
    timed in turn, each round a warm-up call and then about ``per`` seconds of calls."""
    counts = []
    for fn in fns:
        fn()
        t0 = time.thread_time()
        fn()
        counts.append(max(1, round(per / max(time.thread_time() - t0, 1e-7))))
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, (fn, n) in enumerate(zip(fns, counts, strict=True)):
            fn()
            t0 = time.thread_time()
            for _ in range(n):
                fn()
            best[i] = min(best[i], (time.thread_time() - t0) / n)
    return best


def pair_schedule(func: tc.ir.PrimFunc, target: tc.Target, blocks: int, unroll: int) -> Schedule:
    """The tunable rule's trace replayed with ``blocks`` m blocks and ``unroll`` K steps."""
    got = Matmul().apply(func, target, True)
    assert isinstance(got, Schedule), got
    trace = got.trace
    sites = [i for i in trace.sampling_indices() if trace[i].kind == "sample_perfect_tile"]
    if len(sites) != 2:
        raise SystemExit(f"expected the m blocks and the K unroll sampled, found {len(sites)}")
    ext = [trace[i].decision[0] * trace[i].decision[1] for i in sites]
    sch = Schedule(func)
    decisions = {sites[0]: [blocks, ext[0] // blocks], sites[1]: [ext[1] // unroll, unroll]}
    trace.apply_to_schedule(sch, decisions=decisions)
    return sch


def main() -> None:
    """Time numpy, the rules and each asked pair (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--target", default="cpu")
    parser.add_argument("--pairs", default="1x4,2x4,4x4,8x4,2x2,2x8", help="BLOCKSxUNROLL,...")
    parser.add_argument("--rounds", type=int, default=11)
    opts = parser.parse_args()
    target = tc.Target(f"{opts.target} -num-cores=1")
    n = opts.n
    a = tc.te.placeholder((n, n), "float32", name="A")
    b = tc.te.placeholder((n, n), "float32", name="B")
    func = tc.te.create_prim_func([a, b, tc.topi.matmul(a, b)])
    rng = np.random.default_rng(0)
    args = [rng.random((n, n), dtype=np.float32) for _ in range(2)] + [np.zeros((n, n), "f4")]
    rules = Matmul().apply(func, target, False)
    assert isinstance(rules, Schedule), rules
    libs = {"rules": tc.build(rules.mod, target)}
    for pair in filter(None, opts.pairs.split(",")):
        blocks, unroll = (int(x) for x in pair.split("x"))
        libs[pair] = tc.build(pair_schedule(func, target, blocks, unroll).mod, target)
    for lib in libs.values():
        lib["main"](*args)
        np.testing.assert_allclose(args[-1], args[0] @ args[1], rtol=1e-3, atol=1e-3)
    names = list(libs)
    fns = [lambda: args[0] @ args[1], *(libs[k]["main"].bind(*args) for k in names)]
    np_s, *secs = thread_interleaved(fns, opts.rounds, 0.03)
    by = dict(zip(names, secs, strict=True))
    gf = 2.0 * n**3 / 1e9
    print(f"matmul {n}^3 on {target} (one thread, load {os.getloadavg()[0]:.1f}): "
          f"numpy {gf / np_s:.1f} GFLOP/s, rules {gf / by['rules']:.1f}")  # fmt: skip
    for name in sorted(names[1:], key=by.__getitem__):
        print(f"  blocks x unroll {name:>6}: {gf / by[name]:6.1f} GFLOP/s  "
              f"{np_s / by[name]:5.3f}x numpy  {by['rules'] / by[name]:5.3f}x rules")  # fmt: skip


if __name__ == "__main__":
    main()
