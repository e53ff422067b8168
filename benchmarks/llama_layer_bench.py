"""A Llama-style decoder layer at TinyLlama-1.1B sizes: tilecraft vs PyTorch eager vs numpy.

The layer of ``tests/models/llama.py`` (hidden 2048, 32 query / 4 key-value heads of 64,
MLP 5632, RMSNorm, rotary, SiLU-gated MLP) in two entry points, compiled once into one
executable:

* ``decode``: one token after a 511-token KV cache (attention over 512 keys);
* ``prefill``: 128 tokens at positions 0..127, causal.

Reported: the compile time with a cold compile cache (a fresh ``TILECRAFT_CACHE_DIR``), the
kernel list of each entry after the default pipeline, a table of median times (tilecraft,
PyTorch eager on the CPU, numpy float32) with the ratio of each to torch (< 1: faster than
torch), and each kernel's share of tilecraft's time (``exe.profile``). Before timing, every
implementation's output is checked against the float64 numpy reference: torch runs the same
function (packed hidden state and new keys/values), from the same weights.

Threads: one count for all (``_bench_common``): ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``
and ``torch.set_num_threads``; ``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` are removed from
the environment before numpy loads. torch is optional: without it the torch column is
skipped with a message.

Run: ``python benchmarks/llama_layer_bench.py [--rounds N] [--small]``.
"""

from __future__ import annotations

# isort: off
import _bench_common as bench  # first: sets the thread environment before numpy loads

# isort: on

import argparse
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
from _models import models

llama = models.llama


def implementations(
    cfg: llama.LlamaConfig, exe: Any, params: dict[str, np.ndarray], entry: str, torch: Any
) -> tuple[dict[str, Callable[[], np.ndarray]], tuple[np.ndarray, ...]]:
    """name -> zero-argument callable returning the packed result, and the inputs."""
    inputs = llama.example_inputs(cfg, entry, seed=1)
    past = None if entry == "prefill" else (inputs[1], inputs[2])
    p32 = {k: np.ascontiguousarray(v) for k, v in params.items()}
    fns: dict[str, Callable[[], np.ndarray]] = {
        "tilecraft": lambda: exe[entry](*inputs),
        "numpy": lambda: llama.np_layer(inputs[0], p32, cfg, past, dtype=np.float32),
    }
    if torch is not None:
        from models import torch_ref

        fn = torch_ref.llama_fn(cfg, params)
        targs = [torch.from_numpy(a) for a in inputs]

        def run_torch() -> np.ndarray:
            with torch.inference_mode():
                return fn(*targs).numpy()  # type: ignore[no-any-return]

        fns["torch"] = run_torch
    return fns, inputs


def check(fns: dict[str, Callable[[], np.ndarray]], want: np.ndarray, entry: str) -> None:
    """Every implementation computes the reference (float32 tolerance)."""
    for name, fn in fns.items():
        got = fn()
        err = float(np.abs(got - want).max())
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3, err_msg=f"{entry} {name}")
        print(f"  {entry:<8}{name:<10} max abs error vs float64 numpy {err:.2e}")


def kernel_calls(exe: Any, entry: str) -> list[str]:
    """The kernel called by each step of ``entry`` in the compiled module."""
    return [b.value.func for b in exe.mod[entry].bindings if hasattr(b.value, "func")]


def main(argv: list[str] | None = None) -> int:
    """Compile, check, time and profile; print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--small", action="store_true", help="the small test layer instead")
    args = parser.parse_args(argv)
    cfg = llama.SMALL if args.small else llama.TINYLLAMA
    torch = bench.load_torch()
    print(bench.environment_line())
    print(f"torch {torch.__version__}" if torch else "torch not installed: pip install torch")
    print(f"layer: {cfg}")
    _, mod, params = llama.export_layer(cfg, seed=0)
    exe, seconds = bench.cold_compile(mod, params)
    print(f"\ncompile (decode + prefill, cold compile cache): {seconds:.2f} s\n")
    rows = []
    for entry in ("decode", "prefill"):
        kernels = kernel_calls(exe, entry)
        print(f"{entry}: {len(kernels)} kernel calls: {', '.join(kernels)}")
        fns, inputs = implementations(cfg, exe, params, entry, torch)
        ref = llama.reference_for(cfg, entry)(inputs, params)
        check(fns, ref, entry)
        times = dict(zip(fns, bench.per_call(list(fns.values()), args.rounds), strict=True))
        rows.append((entry, times))
        shares = bench.kernel_shares(exe, entry, inputs, runs=3)
        bench.print_shares(f"{entry} (tilecraft)", shares, Counter(kernels))
        print()
    print_table(rows)
    return 0


def print_table(rows: list[tuple[str, dict[str, float]]]) -> None:
    """Median times and ratios to torch."""
    names = ["tilecraft", "torch", "numpy"]
    header = f"{'entry':<10}" + "".join(f"{n + ' us':>16}" for n in names)
    header += f"{'tilecraft/torch':>17}{'numpy/torch':>13}"
    print(header)
    print("-" * len(header))
    for entry, times in rows:
        line = f"{entry:<10}" + "".join(
            f"{times[n] * 1e6:>16,.0f}" if n in times else f"{'n/a':>16}" for n in names
        )
        if "torch" in times:
            line += f"{times['tilecraft'] / times['torch']:>17.2f}"
            line += f"{times['numpy'] / times['torch']:>13.2f}"
        print(line)
    print("ratio = time / torch's time (<= 1: at most torch eager's time)")


if __name__ == "__main__":
    sys.exit(main())
