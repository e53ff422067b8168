"""Library dispatch against the rules: matmul 512^3, 1024^3 and the ViT batched matmul.

Each workload is an nn graph (``a @ b``) compiled two ways on one thread: the rules only
(graph pipeline, ``ApplyDefaultSchedule``) and library first (``DispatchLibrary`` then the
rules: the GEMM is a ``call_extern`` to OpenBLAS's cblas). numpy runs the same product as the
reference. Times are medians of interleaved rounds; on a shared machine read the ratios.

    python benchmarks/dispatch_bench.py [--rounds N]

One thread for everybody: ``BENCH_THREADS`` defaults to 1 here (OpenMP kernels, numpy's
OpenBLAS, the dispatched OpenBLAS); ``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` are
removed from this process's environment before any BLAS loads (``_bench_common``).
Needs ``pip install 'tilecraft[blas]'``.
"""

from __future__ import annotations

import os

os.environ.setdefault("BENCH_THREADS", "1")

import argparse
from typing import Any

import _bench_common as bench  # sets the thread environment before numpy loads
import numpy as np

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft.dispatch import DispatchLibrary
from tilecraft.frontend import nn
from tilecraft.graph import get_pipeline
from tilecraft.runtime.executor.extern import load_blas

WORKLOADS = {
    "matmul 512^3": ((512, 512), (512, 512)),
    "matmul 1024^3": ((1024, 1024), (1024, 1024)),
    "ViT bmm 16x197x64x197": ((16, 197, 64), (16, 64, 197)),
}


class Product(nn.Module):
    """``a @ b``."""

    def forward(self, a: nn.Tensor, b: nn.Tensor) -> nn.Tensor:
        """The product."""
        return a @ b


def build(shapes: tuple[tuple[int, ...], ...], target: tc.Target, dispatch: bool) -> Any:
    """The product compiled with the rules only, or with the library first."""
    spec = {n: nn.spec.Tensor(s, "float32") for n, s in zip("ab", shapes, strict=True)}
    mod, _ = Product().export({"forward": spec})
    with target:
        mod = get_pipeline("default")(mod)
        if dispatch:
            mod = DispatchLibrary()(mod)
        mod = dl.ApplyDefaultSchedule(*dl.cpu.default_rules())(mod)
    return tc.build(mod, target)


def main() -> None:
    """Print a table of median times and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    target = tc.Target(f"cpu -num-cores={bench.THREADS}")
    blas = load_blas()
    blas.set_num_threads(bench.THREADS)
    print(bench.environment_line())
    print(f"target: {target}")
    print(f"dispatched BLAS: {blas.config()}")
    print(f"{'workload':<24}{'rules ms':>10}{'library ms':>12}{'numpy ms':>10}"
          f"{'rules/lib':>11}{'lib/numpy':>11}")  # fmt: skip
    for name, shapes in WORKLOADS.items():
        rng = np.random.default_rng(0)
        a, b = (rng.standard_normal(s).astype("float32") for s in shapes)
        rules, library = build(shapes, target, False), build(shapes, target, True)
        np.testing.assert_allclose(library(a, b), a @ b, rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(rules(a, b), a @ b, rtol=1e-3, atol=1e-3)
        calls = [lambda f=f, a=a, b=b: f(a, b) for f in (rules, library, np.matmul)]
        t_rules, t_lib, t_np = bench.per_call(calls, args.rounds)
        print(f"{name:<24}{t_rules * 1e3:>10.2f}{t_lib * 1e3:>12.2f}{t_np * 1e3:>10.2f}"
              f"{t_rules / t_lib:>11.2f}{t_lib / t_np:>11.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
