"""Fused attention on the CPU: tilecraft's ``attention`` op (``tc.compile``, untuned) vs torch SDPA.

One graph with the ``attention`` operator (batch 1, 12 heads of 64, sequence ``s`` for the
queries and the keys, causal and not) compiled by ``tc.compile`` for the CPU, against
``torch.nn.functional.scaled_dot_product_attention`` on the same tensors (torch's
``(batch, heads, seq, dim)`` views of the same data). Outputs are checked against torch first.
Times are medians of interleaved rounds after a settle pause, in the same process; ``ratio``
is tilecraft's time over torch's (``<= 1``: at most torch's time), ``min ratio`` the same for
the fastest call of each (steadier on a shared machine).

One thread each side unless ``BENCH_THREADS`` says otherwise; ``OPENBLAS_CORETYPE`` and
``OPENBLAS_L2_SIZE`` are removed from this process's environment (``_bench_common``).

    python benchmarks/attention_bench.py [--rounds N] [--only NAME] [--seq 128,1024]
"""

from __future__ import annotations

import os

os.environ.setdefault("BENCH_THREADS", "1")

# isort: off
import _bench_common as bench  # first: sets the thread environment before numpy loads

# isort: on

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import tilecraft as tc
from tilecraft.graph import GraphBuilder

HEADS, HEAD_DIM = 12, 64


def attention_module(s: int, causal: bool) -> tc.IRModule:
    """A graph ``main(q, k, v)`` of one ``attention`` op on (1, s, 12, 64) tensors (BSHD)."""
    bb = GraphBuilder()
    q, k, v = (bb.param(n, (1, s, HEADS, HEAD_DIM), "float32") for n in "qkv")
    out = bb.emit("attention", [q, k, v], {"causal": causal})
    return tc.IRModule({"main": bb.finish(out, "main")})


def _times(fns: list[Callable[[], Any]], rounds: int) -> tuple[list[float], list[float]]:
    """(median, fastest) seconds per call of each callable, interleaved over ``rounds``."""
    first = []
    for fn in fns:
        start = time.perf_counter()
        fn()
        first.append(time.perf_counter() - start)
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            time.sleep(bench.SETTLE_S)
            for _ in range(max(3, int(0.3 / max(first[i], 1e-9)))):
                start = time.perf_counter()
                fn()
                samples[i].append(time.perf_counter() - start)
    return [statistics.median(s) for s in samples], [min(s) for s in samples]


def run_case(torch: Any, s: int, causal: bool, rounds: int) -> str:
    """Check and time one shape; its table row."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, s, HEADS, HEAD_DIM), dtype=np.float32) for _ in "qkv")
    exe = bench.compile_model(attention_module(s, causal), {})
    out = np.empty((1, s, HEADS, HEAD_DIM), np.float32)
    tq, tk, tv = (torch.from_numpy(a).transpose(1, 2) for a in (q, k, v))
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def fast() -> Any:
        return exe["main"](q, k, v)

    def ref() -> Any:
        with torch.inference_mode():
            return sdpa(tq, tk, tv, is_causal=causal)

    out = np.asarray(fast())
    want = ref().transpose(1, 2).numpy()
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=f"s={s}")
    med, low = _times([fast, ref], rounds)
    name = f"s={s} {'causal' if causal else 'full'}"
    return f"{name:<18}{med[0] * 1e3:>13.3f}{med[1] * 1e3:>10.3f}{med[0] / med[1]:>8.2f}" + (
        f"{low[0] / low[1]:>11.2f}"
    )


def main(argv: list[str] | None = None) -> int:
    """Check and time every case; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    parser.add_argument("--seq", default="128,1024", help="sequence lengths, comma-separated")
    opts = parser.parse_args(argv)
    torch = bench.load_torch()
    if torch is None:
        print("torch is not installed: pip install torch")
        return 1
    print(f"target: {tc.Target('cpu')}")
    print(bench.environment_line())
    print(f"torch {torch.__version__}; batch 1, {HEADS} heads of {HEAD_DIM}")
    print(f"{'case':<18}{'tilecraft ms':>13}{'sdpa ms':>10}{'ratio':>8}{'min ratio':>11}")
    for s in (int(x) for x in opts.seq.split(",")):
        for causal in (False, True):
            name = f"s={s} {'causal' if causal else 'full'}"
            if opts.only in name:
                print(run_case(torch, s, causal, opts.rounds), flush=True)
    print("ratio = tilecraft time / torch SDPA time, medians (<= 1: at most torch's time);")
    print("min ratio = the same for the fastest call of each")
    return 0


if __name__ == "__main__":
    sys.exit(main())
