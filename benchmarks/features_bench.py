"""How fast per-store features are extracted, the lowering they need included.

Candidates are distinct schedules of a float32 matmul from the default CPU design space
(sampled before timing); each batch extracts the rows of all of them. Prints the median and
best rate of the batches in wall time and the median in this process's CPU time (which other
work on a shared machine does not stretch), with the machine's load average.
Goal: at least 200 candidates a second.

Run: ``python benchmarks/features_bench.py [--size 64] [--candidates 100] [--batches 5]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import tilecraft as tc
from tilecraft.schedule import Schedule
from tilecraft.tune.features import NUM_FEATURES, PerStoreFeature
from tilecraft.tune.space import cpu_default_space


def _matmul(n: int) -> tc.ir.PrimFunc:
    a = tc.te.placeholder((n, n), "float32", name="A")
    b = tc.te.placeholder((n, n), "float32", name="B")
    return tc.te.create_prim_func([a, b, tc.topi.matmul(a, b)])


def main() -> None:
    """Parse the arguments, time the batches, print the rates."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--batches", type=int, default=5)
    args = parser.parse_args()
    func = _matmul(args.size)
    funcs = []
    for seed in range(args.candidates):
        sch = Schedule(func, seed=seed)
        cpu_default_space(sch)
        funcs.append(sch.func)
    ext = PerStoreFeature(tc.Target("cpu"))
    rates, cpu_rates = [], []
    for _ in range(args.batches):
        start, cpu = time.perf_counter(), time.process_time()
        rows = ext.extract(funcs)
        rates.append(len(funcs) / (time.perf_counter() - start))
        cpu_rates.append(len(funcs) / (time.process_time() - cpu))
    print(
        f"matmul {args.size}^3, {len(funcs)} candidates, {NUM_FEATURES} columns, "
        f"{sum(r.shape[0] for r in rows) / len(rows):.1f} rows a candidate"
    )
    print(
        f"candidates/s of wall time: median {statistics.median(rates):.0f}, best "
        f"{max(rates):.0f}; of CPU time: median {statistics.median(cpu_rates):.0f} "
        f"(load average {os.getloadavg()[0]:.2f})"
    )


if __name__ == "__main__":
    main()
