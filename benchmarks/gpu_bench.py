"""Time GPU kernels against PyTorch: those the Schedule API builds (tests/gpu/schedules.py) and
the hand-scheduled ones of tests/gpu/kernels.py.

Usage::

    python benchmarks/gpu_bench.py [--repeat 20] [--arch sm_90] [--only gemm]
    python benchmarks/gpu_bench.py --emulate        # no GPU: every kernel, reduced sizes,
                                                    # emulated and checked against numpy
    python benchmarks/gpu_bench.py --ptxas          # no GPU: registers, shared memory and
                                                    # spills from ptxas -v at full size

On a GPU it prints, per kernel, the median time, the achieved GB/s (memory-bound kernels) and
GFLOP/s (matmuls), PyTorch's time for the same computation when PyTorch with CUDA is installed,
the ratio (PyTorch time / ours; above 1 means tilecraft is faster) and the largest difference
from numpy. Exits with status 0 and a message when no GPU is present and no dry mode is given.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "gpu"))

import kernels
import schedules as ks

import tilecraft as tc
from tilecraft.ir import PrimFunc, Var
from tilecraft.runtime.cuda_driver import device_available
from tilecraft.schedule import Schedule

MB = 1 << 20


@dataclass(frozen=True)
class Case:
    """One kernel: how to build it at a size, its inputs, numpy and PyTorch references."""

    build: Callable[[bool], tuple[PrimFunc, PrimFunc]]  # small -> (scheduled, unscheduled)
    inputs: Callable[[bool, np.random.Generator], list[np.ndarray]]
    reference: Callable[..., np.ndarray]
    torch: str
    nbytes: int = 0  # at full size
    flops: int = 0


def _scheduled(make: Callable[[], PrimFunc], schedule: Callable[[PrimFunc], Schedule]):
    func = make()
    return schedule(func).func, func


def _arrays(*shapes: tuple[int, ...], dtype: str = "float32"):
    def make(small: bool, rng: np.random.Generator) -> list[np.ndarray]:
        del small
        return [rng.uniform(-1, 1, s).astype(dtype) for s in shapes]

    return make


def _sized(full: Callable, small: Callable):
    return lambda is_small, rng: (small if is_small else full)(is_small, rng)


def _gemm(dtype: str) -> Case:
    n_full, n_small = 1024, 64
    return Case(
        lambda small: _scheduled(
            lambda: ks.gemm_func(*(3 * [n_small if small else n_full]), dtype), ks.schedule_gemm
        ),
        _sized(_arrays((n_full, n_full), (n_full, n_full), dtype=dtype),
               _arrays((n_small, n_small), (n_small, n_small), dtype=dtype)),
        ks.gemm_reference, "matmul", 3 * n_full * n_full * np.dtype(dtype).itemsize,
        2 * n_full**3,
    )  # fmt: skip


def _row(make: Callable, ref: Callable, torch: str, symbolic: str) -> Case:
    """Softmax/RMSNorm on 4096 x 4096 (64 x 512 emulated), one size symbolic."""

    def build(small: bool) -> tuple[PrimFunc, PrimFunc]:
        rows, cols = (64, 512) if small else (4096, 4096)
        shape = (Var("m"), cols) if symbolic == "rows" else (rows, Var("n"))
        return _scheduled(lambda: make(*shape), ks.schedule_row_reduction)

    def inputs(small: bool, rng: np.random.Generator) -> list[np.ndarray]:
        rows, cols = (64, 512) if small else (4096, 4096)
        x = rng.uniform(-1, 1, (rows, cols)).astype("float32")
        return [x] if torch == "softmax" else [x, rng.uniform(0.5, 1.5, cols).astype("float32")]

    return Case(build, inputs, ref, torch, 2 * 4096 * 4096 * 4)


CASES: dict[str, Case] = {
    "gemm_fp32_1024": _gemm("float32"),
    "gemm_fp16_1024": _gemm("float16"),
    "gemv_fp16_4096": Case(
        lambda small: _scheduled(
            lambda: ks.gemv_func(64 if small else 4096, 2048 if small else 4096), ks.schedule_gemv
        ),
        _sized(_arrays((1, 4096), (4096, 4096), dtype="float16"),
               _arrays((1, 2048), (64, 2048), dtype="float16")),
        ks.gemv_reference, "gemv", 4096 * 4096 * 2, 2 * 4096 * 4096,
    ),
    "transpose_4096": Case(
        lambda small: _scheduled(lambda: ks.transpose_func(64 if small else 4096),
                                 ks.schedule_transpose),
        _sized(_arrays((4096, 4096)), _arrays((64, 64))),
        lambda a: np.ascontiguousarray(a.T), "transpose", 2 * 4096 * 4096 * 4,
    ),
    "softmax_rows_sym": _row(ks.softmax_func, ks.softmax_reference, "softmax", "rows"),
    "softmax_cols_sym": _row(ks.softmax_func, ks.softmax_reference, "softmax", "cols"),
    "rms_norm_rows_sym": _row(ks.rms_norm_func, ks.rms_norm_reference, "rms_norm", "rows"),
    "rms_norm_cols_sym": _row(ks.rms_norm_func, ks.rms_norm_reference, "rms_norm", "cols"),
}  # fmt: skip


def _hand(factory: Callable[[bool], Any], shapes: Callable[[bool], list], torch: str,
          nbytes: int, flops: int = 0) -> Case:  # fmt: skip
    def build(small: bool) -> tuple[PrimFunc, PrimFunc]:
        func, _ = factory(small)
        return func, func

    def inputs(small: bool, rng: np.random.Generator) -> list[np.ndarray]:
        return [rng.uniform(-1, 1, s).astype("float32") for s in shapes(small)]

    return Case(build, inputs, lambda *a: factory(False)[1](*a), torch, nbytes, flops)


HAND: dict[str, Case] = {
    "hand_matmul_1024": _hand(lambda s: kernels.make_matmul(*(3 * [64 if s else 1024])),
                              lambda s: [(64, 64)] * 2 if s else [(1024, 1024)] * 2, "matmul",
                              3 * 1024 * 1024 * 4, 2 * 1024**3),
    "hand_softmax_4096x1024": _hand(lambda s: kernels.make_softmax(*((16, 256, 128) if s else
                                                                   (4096, 1024, 128))),
                                    lambda s: [(16, 256) if s else (4096, 1024)], "softmax",
                                    2 * 4096 * 1024 * 4),
    "hand_vector_add_16M": _hand(lambda s: kernels.make_vector_add(4096 if s else 16 * MB, 256),
                                 lambda s: [(4096,)] * 2 if s else [(16 * MB,)] * 2,
                                 "vector_add", 3 * 16 * MB * 4),
}  # fmt: skip


def _torch_fn(expr: str, tensors: list[Any]) -> Callable[[], Any]:
    import torch

    a, b = tensors[0], tensors[-1]
    fns: dict[str, Callable[[], Any]] = {
        "matmul": lambda: a @ b,
        "gemv": lambda: a @ b.t(),
        "softmax": lambda: torch.softmax(a, dim=1),
        "rms_norm": lambda: a * torch.rsqrt((a * a).mean(dim=1, keepdim=True) + 1e-5) * b,
        "transpose": lambda: a.t().contiguous(),
        "vector_add": lambda: a + b,
    }
    return fns[expr]


def _torch_time(expr: str, inputs: list[np.ndarray], repeat: int) -> float | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    fn = _torch_fn(expr, [torch.from_numpy(x).cuda() for x in inputs])
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(repeat):
        start.record()
        for _ in range(10):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 10 / 1e3)
    return float(np.median(times))


def _selected(only: str | None) -> dict[str, Case]:
    cases = {**CASES, **HAND}
    return {k: v for k, v in cases.items() if only is None or only in k}


def run_emulated(cases: dict[str, Case], target: tc.Target) -> int:
    """Every kernel at its reduced size, emulated on the CPU and compared with numpy."""
    rng = np.random.default_rng(0)
    failures = 0
    for name, case in cases.items():
        func, _ = case.build(True)
        inputs = case.inputs(True, rng)
        want = case.reference(*inputs)
        t0 = time.perf_counter()
        lib = tc.build(func, target, emulate=True)
        out = np.zeros(want.shape, want.dtype)
        lib[func.name](*inputs, out)
        err = float(np.max(np.abs(out.astype(np.float64) - want.astype(np.float64))))
        ok = err <= (2e-2 if want.dtype == np.float16 else 1e-4) * max(1.0, np.abs(want).max())
        failures += not ok
        status = "ok" if ok else "MISMATCH"
        secs = time.perf_counter() - t0
        print(f"{name:24s} emulated in {secs:6.2f} s  max|err| {err:.1e} {status}")
    return 1 if failures else 0


def run_ptxas(cases: dict[str, Case], arch: str) -> int:
    """Registers, shared memory and spills of every kernel at full size (nvcc, no GPU)."""
    from tilecraft.runtime import build_cuda_source
    from tilecraft.runtime.cuda_compile import ptxas_info

    target = tc.Target(f"cuda -arch={arch}")
    print(f"{'kernel':24s} {'arch':6s} {'regs':>5s} {'smem B':>7s} {'spill st/ld':>11s} "
          f"{'stack':>6s}")  # fmt: skip
    for name, case in cases.items():
        func, _ = case.build(False)
        src = build_cuda_source(func, target)
        for kname, s in ptxas_info(src.text, arch).items():
            del kname
            spills = f"{s.spill_stores}/{s.spill_loads}"
            print(f"{name:24s} {arch:6s} {s.registers:5d} {s.shared_bytes:7d} {spills:>11s} "
                  f"{s.stack_bytes:6d}")  # fmt: skip
    return 0


def run_gpu(cases: dict[str, Case], target: tc.Target, repeat: int) -> int:
    """Time every kernel on the GPU at full size, against PyTorch."""
    from tilecraft.runtime import DeviceArray, build_cuda

    rng = np.random.default_rng(0)
    print(f"{'kernel':24s} {'ms':>9s} {'GB/s':>8s} {'GFLOP/s':>9s} {'torch ms':>9s} {'ratio':>6s}")
    for name, case in cases.items():
        func, _ = case.build(False)
        inputs = case.inputs(False, rng)
        want = case.reference(*inputs)
        lib = build_cuda(func, target)
        dev_in = [DeviceArray.from_numpy(x) for x in inputs]
        out = DeviceArray(want.shape, want.dtype)
        lib[func.name](*dev_in, out)
        err = float(np.max(np.abs(out.numpy().astype(np.float64) - want.astype(np.float64))))
        t = lib.time_evaluator(func.name, number=10, repeat=repeat)(*dev_in, out).median
        tt = _torch_time(case.torch, inputs, repeat)
        gbs = f"{case.nbytes / t / 1e9:8.1f}" if case.nbytes else f"{'-':>8s}"
        gflops = f"{case.flops / t / 1e9:9.1f}" if case.flops else f"{'-':>9s}"
        torch_ms = f"{tt * 1e3:9.4f}" if tt else f"{'n/a':>9s}"
        ratio = f"{tt / t:6.2f}" if tt else f"{'n/a':>6s}"
        print(f"{name:24s} {t * 1e3:9.4f} {gbs} {gflops} {torch_ms} {ratio}   max|err| {err:.1e}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit status."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--only", default=None, help="run the kernels whose name contains this")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--emulate", action="store_true", help="no GPU: emulate at reduced sizes")
    mode.add_argument("--ptxas", action="store_true", help="no GPU: ptxas -v at full size")
    args = ap.parse_args(argv)
    target = tc.Target(f"cuda -arch={args.arch}")
    cases = _selected(args.only)
    if args.emulate:
        return run_emulated(cases, target)
    if args.ptxas:
        return run_ptxas(cases, args.arch)
    if not device_available():
        print("gpu_bench: no CUDA GPU available (or no driver); nothing to measure "
              "(--emulate and --ptxas run without one).")  # fmt: skip
        return 0
    return run_gpu(cases, target, args.repeat)


if __name__ == "__main__":
    sys.exit(main())
