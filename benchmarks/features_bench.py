"""How fast per-store features are extracted, the lowering they need included.

Candidates are distinct schedules of a float32 matmul from the default CPU design space
(sampled before timing); each batch extracts the rows of all of them. Prints the median and
best rate of the batches and the machine's load average (other work slows batches down).
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
    rates = []
    for _ in range(args.batches):
        start = time.perf_counter()
        rows = ext.extract(funcs)
        rates.append(len(funcs) / (time.perf_counter() - start))
    print(
        f"matmul {args.size}^3, {len(funcs)} candidates, {NUM_FEATURES} columns, "
        f"{sum(r.shape[0] for r in rows) / len(rows):.1f} rows a candidate"
    )
    print(
        f"candidates/s: median {statistics.median(rates):.0f}, best {max(rates):.0f} "
        f"(load average {os.getloadavg()[0]:.2f})"
    )


if __name__ == "__main__":
    main()
