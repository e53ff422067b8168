"""What the tuning loop costs per candidate: builder + runner overhead and throughput.

Two measurements, each on a batch of distinct candidates built and measured the way
``tune_tir`` does it (``LocalBuilder`` worker pool, ``LocalRunner`` in an isolated worker with
the correctness check on):

1. **overhead** on a trivial kernel (``B[i] = A[i] + 1``, 65,536 floats, tiled three ways): the
   kernel itself runs for microseconds, so the wall time per candidate is what building (lower,
   generate C, compile) and running (load, check against the reference, time) cost. Goal: under
   50 ms per candidate on the development machine.
2. **throughput** on 64 schedules of a 512 x 512 x 512 float32 matmul from the default CPU design
   space: candidates per second, kernel time included.

Workers are started (and the compiler's flags probed) before timing. Candidates are distinct
and the compile cache starts empty (``TILECRAFT_CACHE_DIR`` points to a new folder), so every
build really compiles. ``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` are removed from the
environment, as in the other benchmarks. The machine's load average is printed with the table:
builds and runs share its cores with whatever else runs.

Run: ``python benchmarks/tune_overhead_bench.py [--candidates 64] [--workers N]``.
"""

from __future__ import annotations

import os
import tempfile

for _key in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    os.environ.pop(_key, None)
os.environ["TILECRAFT_CACHE_DIR"] = tempfile.mkdtemp(prefix="tilecraft-tune-bench-")

import argparse  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import tilecraft as tc  # noqa: E402
from tilecraft import tune as ms  # noqa: E402
from tilecraft.runtime.compiler import flag_probe  # noqa: E402
from tilecraft.schedule import Schedule  # noqa: E402

CPU = tc.Target("cpu")


def trivial() -> tc.PrimFunc:
    """B[i] = A[i] + 1 over 65,536 floats."""
    A = tc.te.placeholder((1 << 16,), "float32", name="A")
    B = tc.te.compute((1 << 16,), lambda i: A[i] + 1.0, name="B")
    return tc.te.create_prim_func([A, B])


def tile3(sch: Schedule) -> None:
    """Split the loop into three sampled tiles (many distinct candidates)."""
    (loop,) = sch.get_loops(sch.get_block("B"))
    sch.split(loop, sch.sample_perfect_tile(loop, n=3, max_innermost_factor=64))


def matmul512() -> tc.PrimFunc:
    """C = A @ B, 512 x 512 x 512 float32."""
    A = tc.te.placeholder((512, 512), "float32", name="A")
    B = tc.te.placeholder((512, 512), "float32", name="B")
    k = tc.te.reduce_axis((0, 512), name="k")
    C = tc.te.compute((512, 512), lambda i, j: tc.te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return tc.te.create_prim_func([A, B, C])


def candidates(func: tc.PrimFunc, space: ms.SpaceGenerator, count: int) -> list[Schedule]:
    """``count`` distinct candidates drawn the way ReplayTrace draws them."""
    strategy = ms.ReplayTrace()
    strategy.initialize(func, CPU, space, seed=0)
    found = strategy.generate(count)
    if len(found) < count:
        raise SystemExit(f"the space gave only {len(found)} distinct candidates")
    return found


@dataclass
class Row:
    """One measured batch."""

    name: str
    count: int
    build_s: float
    run_s: float
    failed: int
    best_ms: float
    kernel_s: float


def measure(name: str, func: tc.PrimFunc, schs: list[Schedule], workers: int,
            runner: ms.LocalRunner) -> Row:  # fmt: skip
    """Build and run ``schs`` (workers started beforehand) and time both phases."""
    builder = ms.LocalBuilder(max_workers=workers, recycle_after=None)
    builder.pool.wait_ready()
    runner.pool.wait_ready()
    args = ms.args_info(func)
    start = time.perf_counter()
    built = builder.build([ms.BuilderInput(s.mod, CPU) for s in schs])
    mid = time.perf_counter()
    ran = runner.run([ms.RunnerInput(b.artifact, args, func) for b in built if b.artifact])
    end = time.perf_counter()
    builder.close()
    ok = [min(r.run_secs) for r in ran if r.run_secs]
    failed = len(schs) - len(ok)
    ev = runner.evaluator
    calls = 1 + ev.warmup + ev.number * ev.repeat  # the correctness check, warm-up, timing
    kernel = sum(sum(r.run_secs) / len(r.run_secs) * calls for r in ran if r.run_secs)
    return Row(name, len(schs), mid - start, end - mid, failed, min(ok, default=0.0) * 1e3,
               kernel)  # fmt: skip


def main() -> None:
    """Measure both batches and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=64)
    parser.add_argument("--workers", type=int, default=None, help="builder workers")
    opts = parser.parse_args()
    workers = opts.workers or ms.builder.local.usable_cores()
    flag_probe()  # probe the compiler once, outside the timings
    rows = []
    with ms.LocalRunner(timeout_s=60.0) as runner:
        func = trivial()
        warm = ms.LocalBuilder(max_workers=1).build([ms.BuilderInput(tc.IRModule({"main": func}),
                                                                     CPU)])  # fmt: skip
        runner.run([ms.RunnerInput(warm[0].artifact, ms.args_info(func), func)])  # reference
        schs = candidates(func, ms.ScheduleFnSpace(tile3), opts.candidates)
        rows.append(measure("trivial kernel", func, schs, workers, runner))
    with ms.LocalRunner(timeout_s=120.0, number=1, repeat=3) as runner:
        func = matmul512()
        schs = candidates(func, ms.space.default_space(CPU), opts.candidates + 1)
        rows.append(measure("warm-up", func, schs[:1], workers, runner))  # reference built here
        rows.append(measure("matmul 512^3", func, schs[1:], workers, runner))
    print(f"tune overhead ({workers} builder workers, runner threads {runner.num_threads}, "
          f"load average {os.getloadavg()[0]:.2f})")  # fmt: skip
    head = f"{'batch':<16}{'cands':>6}{'build s':>9}{'run s':>8}{'kernel s':>10}"
    print(head + f"{'ms/cand':>9}{'overhead ms/cand':>18}{'cand/s':>8}{'failed':>8}{'best ms':>9}")
    for r in rows:
        if r.name == "warm-up":
            continue
        total = r.build_s + r.run_s
        print(f"{r.name:<16}{r.count:>6}{r.build_s:>9.2f}{r.run_s:>8.2f}{r.kernel_s:>10.2f}"
              f"{total / r.count * 1e3:>9.1f}{(total - r.kernel_s) / r.count * 1e3:>18.1f}"
              f"{r.count / total:>8.2f}{r.failed:>8}{r.best_ms:>9.3f}")  # fmt: skip
    print(
        "kernel s: estimated time inside the kernels (calls x measured time per call); "
        "overhead = (build + run - kernel) per candidate"
    )
    shutil.rmtree(os.environ["TILECRAFT_CACHE_DIR"], ignore_errors=True)


if __name__ == "__main__":
    main()
