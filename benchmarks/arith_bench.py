"""Median time of ``Analyzer.simplify`` on typical index expressions.

Run: ``python benchmarks/arith_bench.py``. Each simplify call uses a fresh analyzer state (its
result cache is cleared), so the time is that of real rewriting. The reference column is a plain
Python evaluation of the same expression (``tilecraft.arith.evaluate``) measured in the same run.
"""

from __future__ import annotations

import pathlib
import statistics
import sys
import time
from collections.abc import Callable

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from tilecraft import ir
from tilecraft.arith import Analyzer, evaluate


def _count(e: ir.Expr) -> int:
    n = 0

    def fn(_: ir.Node) -> None:
        nonlocal n
        n += 1

    ir.post_order_visit(e, fn)
    return n


def _median_us(fn: Callable[[], object], repeat: int = 2000) -> float:
    for _ in range(50):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def cases() -> tuple[Analyzer, dict[ir.Var, int], list[tuple[str, ir.Expr]]]:
    """The analyzer with loop bindings, one assignment, and the named expressions."""
    i0, i1, i2, i3 = (ir.Var(f"i{k}", "int32") for k in range(4))
    n = ir.Var("n", "int32")
    ana = Analyzer()
    for v, ext in ((i0, 8), (i1, 4), (i2, 8), (i3, 16)):
        ana.bind(v, ir.Range(0, ext))
    ana.bind(n, ir.Range(1, 1024))
    env = {i0: 3, i1: 2, i2: 5, i3: 7, n: 100}
    fused = (i0 * 4 + i1) * 8 + i2
    exprs = [
        ("split (i*16+j)//16", (i0 * 16 + i3) // 16),
        ("split (i*16+j)%16", (i0 * 16 + i3) % 16),
        ("fuse-split //8%4", fused // 8 % 4),
        ("fuse 3 loops", ((i0 * 4 + i1) * 8 + i2) // 32 * 32 + fused % 32),
        ("affine collect", i0 * 2 + i1 * 3 - i0 + 5 - i1 * 3 + i2),
        ("symbolic i*n+j", (i0 * n + i1) * 2 - i0 * n),
        ("min/max bound", ir.Min(i0 * 4 + i1, ir.IntImm("int32", 64)) + ir.Max(i2, 0 * i2)),
        ("21-node index", (fused * 16 + i3) // 16 % 8 * 4 + i1),
        (
            "33-node index",
            ((((i0 * 4 + i1) * 8 + i2) * 16 + i3) // 16 % 8) * 4
            + (((i0 * 4 + i1) * 8 + i2) // 8) % 4,
        ),
    ]
    return ana, env, exprs


def main() -> None:
    """Print the benchmark table."""
    ana, env, exprs = cases()
    print(f"{'expression':<22} {'nodes':>5} {'simplify us':>12} {'eval us':>9} {'ratio':>7}")
    for name, e in exprs:

        def run(e: ir.Expr = e) -> object:
            ana.clear_cache()
            return ana.simplify(e)

        t_simp = _median_us(run)
        t_eval = _median_us(lambda e=e: evaluate(e, env))
        print(f"{name:<22} {_count(e):>5} {t_simp:>12.1f} {t_eval:>9.1f} {t_simp / t_eval:>7.1f}")


if __name__ == "__main__":
    main()
