"""Trace replay speed: a 30-instruction trace on a 1024^3 float32 matmul.

Prints a table: replaying the trace (live and JSON-loaded) on a fresh schedule versus building
the same schedule by hand-calling the primitives, medians over repeated runs in this process.
Target: replay median under 20 ms.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import tilecraft as tc
from tilecraft.schedule import Trace


def matmul(n: int = 1024) -> tc.ir.PrimFunc:
    A = tc.te.placeholder((n, n), "float32", name="A")
    B = tc.te.placeholder((n, n), "float32", name="B")
    k = tc.te.reduce_axis((0, n), name="k")
    C = tc.te.compute((n, n), lambda i, j: tc.te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return tc.te.create_prim_func([A, B, C])


def by_hand(func: tc.ir.PrimFunc) -> tc.Schedule:
    """A tiled CPU schedule of 30 instructions (queries and sampling included)."""
    sch = tc.Schedule(func, seed=0)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    ti = sch.sample_perfect_tile(i, n=3, max_innermost_factor=8, decision=[16, 8, 8])
    tj = sch.sample_perfect_tile(j, n=3, max_innermost_factor=16, decision=[8, 8, 16])
    tk = sch.sample_perfect_tile(k, n=2, max_innermost_factor=8, decision=[128, 8])
    i0, i1, i2 = sch.split(i, ti)
    j0, j1, j2 = sch.split(j, tj)
    k0, k1 = sch.split(k, tk)
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    f = sch.fuse(i0, j0)
    sch.parallel(f)
    sch.vectorize(j2)
    sch.unroll(i2)
    sch.unroll(k1)
    sch.annotate(c, "tile", "SSRSRS")
    sch.annotate(f, "pragma_auto_unroll_max_step", 16)
    u = sch.sample_categorical([0, 16, 64], [0.3, 0.3, 0.4], decision=1)
    sch.annotate(i1, "unroll_depth", u)
    c2 = sch.get_block("C")
    sch.get_loops(c2)
    sch.get_child_blocks(sch.get_block("root"))
    sch.get_producers(c2)
    sch.get_consumers(c2)
    sch.unannotate(c, "tile")
    sch.annotate(c, "tile", "SSR")
    sch.add_unit_loop(c2)
    sch.get_loops(c2)
    sch.annotate(k0, "note", 1)
    sch.unannotate(k0, "note")
    return sch


def median_ms(fn: Callable[[], object], repeat: int = 30) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def main() -> None:
    func = matmul()
    ref = by_hand(func)
    trace = ref.trace
    loaded = Trace.from_json(trace.as_json())
    assert len(trace) == 30, len(trace)

    def replay(t: Trace) -> tc.Schedule:
        sch = tc.Schedule(func)
        t.apply_to_schedule(sch)
        return sch

    assert tc.ir.structural_equal(replay(loaded).func, ref.func)
    rows = [
        ("build by hand (reference)", median_ms(lambda: by_hand(func))),
        ("replay live trace", median_ms(lambda: replay(trace))),
        ("replay JSON-loaded trace", median_ms(lambda: replay(loaded))),
        ("Trace.from_json + replay", median_ms(lambda: replay(Trace.from_json(trace.as_json())))),
    ]
    print(f"matmul 1024^3, {len(trace)}-instruction trace (median of 30)")
    print(f"{'case':<30} {'ms':>8}")
    for name, ms in rows:
        print(f"{name:<30} {ms:>8.2f}")
    verdict = "OK" if rows[1][1] < 20.0 else "SLOW"
    print(f"replay median {rows[1][1]:.2f} ms vs target 20 ms: {verdict}")


if __name__ == "__main__":
    main()
