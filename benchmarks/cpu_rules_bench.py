"""CPU rules (no tuning) versus numpy and the memory bandwidth, measured in the same run.

Workloads, each scheduled by ``ApplyDefaultSchedule(Matmul(), GEMV())`` and checked against
numpy before timing; the header names the ISA tilecraft compiles for (the host's, or the
``TILECRAFT_HOST_TARGET`` preset's) and the BLAS numpy uses:

* float32 matmuls ``M x K x N`` 512^3, 1024^3, 1000^3, 127 x 255 x 511, 4096 x 4096 x 64 and
  4096 x 64 x 4096, and batched ones (ViT attention ``16 x 197 x 64 x 197``, ``12 x 128 x 64
  x 128``, ``8 x 256^3``): each at least 0.9x numpy's ``A @ B`` GFLOP/s;
* GEMV 4096 x 4096 float32, ``y = W x`` with W stored (N, K) (rows contiguous along K, the
  ``(out, in)`` weight) and transposed (K, N): at least 80% of the bandwidth of the faster of
  two reads of the 64 MiB weight, each measured in the same rounds: a STREAM-like read of a
  64 MiB array compiled from C with the same compiler, flags and thread count (64
  independent lanes, so memory, not a chain of adds, bounds it), and numpy's own ``W @ x``
  (OpenBLAS's GEMV, which may read faster than a plain loop). The table says whether the
  64 MiB weight fits in the last-level cache (then "bandwidth" is the cache's).

Measurement: the machine may be shared, so tilecraft and the reference are interleaved in
rounds (each round times a block of back-to-back calls of each after a pause, as
``benchmarks/cpu_schedule_bench.py`` does: OpenBLAS and OpenMP workers spin for a while after
a call; a block lasts at least 0.1 s, so waking idle worker threads and idle virtual cores
after the pause is paid once per block, by both sides) and the table shows per-call medians;
``ratio`` is reference time over tilecraft time (>1: tilecraft faster); for GEMV it is
tilecraft's GB/s over the read's.

Threads: ``--threads N`` (default: all usable cores) sets both ``OMP_NUM_THREADS`` (tilecraft,
the C read) and ``OPENBLAS_NUM_THREADS`` (numpy) before anything is imported, so both sides
use the same count. ``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` are removed from the
environment first; with ``TILECRAFT_HOST_TARGET=avx2`` numpy gets
``OPENBLAS_CORETYPE=Haswell``, OpenBLAS's AVX2 kernel, so both sides run the same ISA.
``--clock thread`` (with ``--threads 1`` only) times with the calling thread's CPU time
instead of the wall clock: on an oversubscribed machine it leaves out the time the thread
waits for a core, which the wall clock charges to whoever runs.

Run: ``python benchmarks/cpu_rules_bench.py [--threads N] [--clock wall|thread] [--rounds R]
[--only TEXT]``.
"""

from __future__ import annotations

import os
import sys


def _early_option(name: str, default: str) -> str:
    """An option's value read before the imports (the thread count must be in the env first)."""
    for i, arg in enumerate(sys.argv):
        if arg == name and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


_REMOVED = {
    k: os.environ.pop(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ
}
_SAME_ISA = {"avx2": "Haswell", "x86-64-v3": "Haswell"}
"""OpenBLAS kernel matching a ``TILECRAFT_HOST_TARGET`` preset: numpy then runs the ISA
tilecraft compiles for (an AVX2 build against AVX-512 OpenBLAS compares two ISAs)."""
_CORETYPE = _SAME_ISA.get(os.environ.get("TILECRAFT_HOST_TARGET", ""))
if _CORETYPE is not None:
    os.environ["OPENBLAS_CORETYPE"] = _CORETYPE
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
_THREADS = int(_early_option("--threads", str(_CORES)))
os.environ["OMP_NUM_THREADS"] = str(_THREADS)
os.environ["OPENBLAS_NUM_THREADS"] = str(_THREADS)

import argparse  # noqa: E402
import ctypes  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import numpy as np  # noqa: E402

import tilecraft as tc  # noqa: E402
from tilecraft import rules as dl  # noqa: E402
from tilecraft.runtime.compiler import compile_shared  # noqa: E402

SETTLE_S = 0.25
BLOCK_S = 0.1
"""Pause before each timing block (see benchmarks/cpu_schedule_bench.py)."""

READ_SOURCE = r"""
/* STREAM-like read: sum a float array with 64 independent lanes per thread (4 AVX-512 or 8
   AVX2 vector accumulators: more than the add latency times the load ports needs, so the
   loop is bound by the memory, not by one chain of dependent adds). */
float tc_bench_read(const float* restrict a, long n) {
  float total = 0.0f;
  #pragma omp parallel for reduction(+:total) schedule(static)
  for (long b = 0; b < n; b += 16384) {
    float acc[64] = {0};
    long end = b + 16384 < n ? b + 16384 : n;
    long i = b;
    for (; i + 64 <= end; i += 64)
      for (int l = 0; l < 64; ++l) acc[l] += a[i + l];
    for (; i < end; ++i) acc[0] += a[i];
    for (int l = 0; l < 64; ++l) total += acc[l];
  }
  return total;
}
"""


@dataclass
class Workload:
    """One row: tilecraft and the reference as no-argument callables, and their work."""

    name: str
    ours: Callable[[], object]
    theirs: Callable[[], object]
    work: float  # FLOPs ("GFLOP/s") or bytes ("GB/s")
    unit: str
    target: float | None  # minimum ratio, None: reported only
    reference: str


def _clock(kind: str) -> Callable[[], float]:
    return time.thread_time if kind == "thread" else time.perf_counter


def _calls_per_block(fn: Callable[[], object]) -> int:
    """Back-to-back calls of ``fn`` that last at least ``BLOCK_S`` (measured after a warm-up
    run of the same length, so slow first calls do not shrink the block)."""
    calls, spent = 1, 0.0
    for _ in range(2):
        calls, spent, start = 0, 0.0, time.perf_counter()
        while spent < BLOCK_S / 2:
            fn()
            calls += 1
            spent = time.perf_counter() - start
    return max(1, math.ceil(calls * BLOCK_S / spent))


def measure(
    w: Workload, rounds: int, number: int, clock: Callable[[], float]
) -> tuple[float, float]:
    """Interleaved per-call medians (tilecraft, reference) in seconds; each timing block runs
    at least ``number`` calls and lasts at least ``BLOCK_S``: waking idle worker threads (and,
    on a virtual machine, idle virtual cores) after the pause is then paid once per block, by
    both sides, instead of once per call."""
    fns = (w.ours, w.theirs)
    calls = [max(number, _calls_per_block(fn)) for fn in fns]
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        for fn, n, out in zip(fns, calls, times, strict=True):
            time.sleep(SETTLE_S)
            start = clock()
            for _ in range(n):
                fn()
            out.append((clock() - start) / n)
    return statistics.median(times[0]), statistics.median(times[1])


def _schedule(func: tc.PrimFunc) -> tuple[Callable[..., object], str]:
    """Build ``func`` scheduled by the rules; the kernel and the rule that took it."""
    with tc.Target("cpu"):
        mod = dl.ApplyDefaultSchedule(dl.cpu.Matmul(), dl.cpu.GEMV(), strict=True)(
            tc.IRModule({"main": func})
        )
    rule = mod["main"].attrs.get(dl.SCHEDULE_RULE_ATTR)
    assert rule is not None, "no rule took the kernel"
    return tc.build(mod, target="cpu")["main"], str(rule)


def matmul_workloads(only: str = "") -> list[Workload]:
    """float32 matmuls and batched matmuls (issue 19's shapes, ``M x K x N``) whose name
    contains ``only``: each at least 0.9x numpy's GFLOP/s."""
    rng = np.random.default_rng(0)
    out = []
    cases = [("matmul 512^3", (), 512, 512, 512), ("matmul 1024^3", (), 1024, 1024, 1024),
             ("matmul 1000^3", (), 1000, 1000, 1000), ("matmul 127x255x511", (), 127, 511, 255),
             ("matmul 4096x4096x64", (), 4096, 64, 4096),
             ("matmul 4096x64x4096", (), 4096, 4096, 64),
             ("bmm 16x197x64x197", (16,), 197, 197, 64),
             ("bmm 12x128x64x128", (12,), 128, 128, 64),
             ("bmm 8x256^3", (8,), 256, 256, 256)]  # fmt: skip
    for name, batch, m, n, k in (c for c in cases if only in c[0]):
        target = 0.9
        a = tc.te.placeholder((*batch, m, k), "float32", name="A")
        b = tc.te.placeholder((*batch, k, n), "float32", name="B")
        kernel, rule = _schedule(tc.te.create_prim_func([a, b, tc.topi.matmul(a, b)]))
        x = rng.standard_normal((*batch, m, k), dtype=np.float32)
        y = rng.standard_normal((*batch, k, n), dtype=np.float32)
        z = np.empty((*batch, m, n), np.float32)
        kernel(x, y, z)
        np.testing.assert_allclose(z, x @ y, rtol=1e-4, atol=1e-3 * np.sqrt(k))
        flops = 2.0 * m * n * k * int(np.prod(batch))
        out.append(Workload(f"{name} [{rule}]", kernel.bind(x, y, z), lambda x=x, y=y: x @ y,
                            flops, "GFLOP/s", target, "numpy"))  # fmt: skip
    return out


def gemv_workloads(read: Callable[[], object], nbytes: int) -> list[Workload]:
    """GEMV 4096 x 4096 in both weight layouts, against the read bandwidth and numpy."""
    n = k = 4096
    rng = np.random.default_rng(1)
    weight = rng.standard_normal((n, k), dtype=np.float32)  # (N, K)
    vec = rng.standard_normal((1, k), dtype=np.float32)
    y = np.empty((1, n), np.float32)
    out = []
    for transposed in (False, True):
        w_arr = np.ascontiguousarray(weight.T) if transposed else weight
        x = tc.te.placeholder((1, k), "float32", name="x")
        w = tc.te.placeholder(w_arr.shape, "float32", name="W")
        func = tc.te.create_prim_func([x, w, tc.topi.matmul(x, w, transpose_b=not transposed)])
        kernel, rule = _schedule(func)
        kernel(vec, w_arr, y)
        want = vec @ (w_arr if transposed else w_arr.T)
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-3 * np.sqrt(k))
        layout = "W (K, N)" if transposed else "W (N, K)"
        run = kernel.bind(vec, w_arr, y)
        out.append(Workload(f"gemv 4096^2 {layout} [{rule}]", run, read, float(w_arr.nbytes),
                            "GB/s", 0.8, f"read {nbytes >> 20} MiB"))  # fmt: skip
        numpy_gemv = (lambda w_arr=w_arr: vec @ w_arr) if transposed else (lambda: weight @ vec[0])
        out.append(Workload(f"gemv 4096^2 {layout} [{rule}]", run, numpy_gemv,
                            float(w_arr.nbytes), "GB/s", 0.8, "numpy"))  # fmt: skip
    return out


def read_kernel(nbytes: int) -> tuple[Callable[[], object], np.ndarray]:
    """The C read of an ``nbytes`` float array, and the array."""
    lib = ctypes.CDLL(str(compile_shared(READ_SOURCE)))
    fn = lib.tc_bench_read
    fn.restype = ctypes.c_float
    fn.argtypes = [ctypes.c_void_p, ctypes.c_long]
    data = np.random.default_rng(2).standard_normal(nbytes // 4, dtype=np.float32)
    ptr, size = data.ctypes.data, data.size
    return (lambda: fn(ptr, size)), data


def blas_info() -> str:
    """The BLAS numpy was built with, from ``numpy.show_config``."""
    try:
        cfg = np.show_config(mode="dicts")
    except TypeError:  # numpy < 1.26 has no mode argument
        return "numpy BLAS: see numpy.show_config()"
    blas = cfg.get("Build Dependencies", {}).get("blas", {})
    return f"numpy {np.__version__}, BLAS {blas.get('name', '?')} {blas.get('version', '?')}"


def main(argv: list[str] | None = None) -> int:
    """Build, check and time every workload and print the table; 1 when a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11, help="interleaved timing rounds")
    parser.add_argument("--threads", type=int, default=_CORES, help="threads on both sides")
    parser.add_argument("--clock", choices=["wall", "thread"], default="wall")
    parser.add_argument("--only", default="", help="run the workloads whose name has this text")
    args = parser.parse_args(argv)
    if args.clock == "thread" and _THREADS != 1:
        parser.error("--clock thread needs --threads 1 (it counts the calling thread only)")
    target = tc.Target("cpu")
    nbytes = 64 << 20
    fits = "fits" if nbytes <= target.l3_bytes else "does not fit"
    print(blas_info())
    names = (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX"))
    isa = next((name for feat, name in names if feat in target.features), target.arch)
    print(f"ISA: {isa} ({target.simd_bits}-bit SIMD); tilecraft target: {target}")
    removed = ", ".join(_REMOVED) or "none set"
    if _CORETYPE is not None:
        removed += f"; OPENBLAS_CORETYPE={_CORETYPE} (the ISA of TILECRAFT_HOST_TARGET)"
    print(f"cores: {_CORES}; threads: {_THREADS} (OMP_NUM_THREADS = OPENBLAS_NUM_THREADS); "
          f"clock: {args.clock}; removed from env: {removed}")  # fmt: skip
    print(f"caches: L1d {target.l1d_bytes >> 10} KiB, L2 {target.l2_bytes >> 10} KiB, "
          f"L3 {target.l3_bytes >> 20} MiB; the 64 MiB GEMV weight {fits} in the L3")  # fmt: skip
    read, _keep = read_kernel(nbytes)
    gemvs = gemv_workloads(read, nbytes) if "gemv".startswith(args.only) else []
    workloads = [*matmul_workloads(args.only), *gemvs]
    clock = _clock(args.clock)
    head = f"{'workload':<34}{'tilecraft':>18}{'reference':>26}{'ratio':>7}{'target':>8}  met"
    print(head)
    print("-" * len(head))
    ok = True
    for w in workloads:
        ours, theirs = measure(w, args.rounds, 3, clock)
        ratio = theirs / ours
        met = w.target is None or ratio >= w.target
        ok = ok and met
        ref = f"{w.reference} {w.work / theirs / 1e9:.1f}"
        print(f"{w.name:<34}{w.work / ours / 1e9:>10.1f} {w.unit:<7}{ref:>18} {w.unit:<7}"
              f"{ratio:>7.2f}{'-' if w.target is None else f'{w.target:.2f}':>8}  "
              f"{'-' if w.target is None else ('yes' if met else 'NO')}")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
