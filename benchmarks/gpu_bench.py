"""Time the hand-scheduled GPU kernels of tests/gpu/kernels.py against PyTorch on a GPU.

Usage: ``python benchmarks/gpu_bench.py [--repeat 20]``. Prints, per kernel, the median time,
the achieved GB/s (memory-bound kernels) or GFLOP/s (matmul), PyTorch's time for the same
computation when PyTorch with CUDA is installed, and the ratio (PyTorch time / ours; above 1
means tilecraft is faster). Exits with status 0 and a message when no GPU is present.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "gpu"))

import kernels

import tilecraft as tc
from tilecraft.runtime.cuda_driver import device_available

MB = 1 << 20

# name -> (factory, input shapes, bytes moved, flops, the PyTorch operation)
CASES: dict[str, tuple[Callable[[], Any], list[tuple[int, ...]], int, int, str]] = {
    "matmul_1024": (lambda: kernels.make_matmul(1024, 1024, 1024), [(1024, 1024)] * 2,
                    3 * 1024 * 1024 * 4, 2 * 1024**3, "matmul"),
    "softmax_4096x1024": (lambda: kernels.make_softmax(4096, 1024, 128), [(4096, 1024)],
                          2 * 4096 * 1024 * 4, 0, "softmax"),
    "layer_norm_4096x1024": (lambda: kernels.make_layer_norm(4096, 1024, 32), [(4096, 1024)],
                             2 * 4096 * 1024 * 4, 0,
                             "layer_norm"),
    "transpose_4096": (lambda: kernels.make_transpose(4096), [(4096, 4096)],
                       2 * 4096 * 4096 * 4, 0, "transpose"),
    "vector_add_16M": (lambda: kernels.make_vector_add(16 * MB, 256), [(16 * MB,)] * 2,
                       3 * 16 * MB * 4, 0, "vector_add"),
}  # fmt: skip


def _torch_time(expr: str, inputs: list[np.ndarray], repeat: int) -> float | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    tensors = [torch.from_numpy(x).cuda() for x in inputs]
    a, b = tensors[0], tensors[-1]
    fn = {
        "matmul": lambda: a @ b,
        "softmax": lambda: torch.softmax(a, dim=1),
        "layer_norm": lambda: torch.nn.functional.layer_norm(a, (a.shape[1],), eps=1e-5),
        "transpose": lambda: a.t().contiguous(),
        "vector_add": lambda: a + b,
    }[expr]
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


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args(argv)
    if not device_available():
        print("gpu_bench: no CUDA GPU available (or no driver); nothing to measure.")
        return 0
    from tilecraft.runtime.cuda import DeviceArray, build_cuda

    target = tc.Target(f"cuda -arch={args.arch}")
    rng = np.random.default_rng(0)
    header = (
        f"{'kernel':24s} {'ms':>9s} {'GB/s':>8s} {'GFLOP/s':>9s} {'torch ms':>9s} {'ratio':>6s}"
    )
    print(header)
    for name, (factory, shapes, nbytes, flops, expr) in CASES.items():
        func, ref = factory()
        lib = build_cuda(func, target)
        inputs = [rng.uniform(-1, 1, s).astype(np.float32) for s in shapes]
        want = ref(*inputs)
        dev_in = [DeviceArray.from_numpy(x) for x in inputs]
        out = DeviceArray(want.shape, np.float32)
        lib[func.name](*dev_in, out)
        err = float(np.max(np.abs(out.numpy() - want)))
        t = lib.time_evaluator(func.name, number=10, repeat=args.repeat)(*dev_in, out).median
        tt = _torch_time(expr, inputs, args.repeat)
        gbs = nbytes / t / 1e9
        gflops = f"{flops / t / 1e9:9.1f}" if flops else f"{'-':>9s}"
        torch_ms = f"{tt * 1e3:9.4f}" if tt else f"{'n/a':>9s}"
        ratio = f"{tt / t:6.2f}" if tt else f"{'n/a':>6s}"
        print(
            f"{name:24s} {t * 1e3:9.4f} {gbs:8.1f} {gflops} {torch_ms} {ratio}   max|err| {err:.1e}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
