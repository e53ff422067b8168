"""The tutorial models, a BERT-base encoder layer and ResNet-18 blocks: tilecraft vs numpy
(and PyTorch eager when installed).

Models (``tests/models``): the reference tutorial's MLP (Linear 768->768, ReLU, LayerNorm,
Linear 768->256) and the MetaSchedule tutorial's (Linear 784->256, ReLU, Linear 256->10) at
batch 1 and 64; a BERT-base layer (hidden 768, 12 heads, MLP 3072, GELU, post-norm) on 128
tokens; ResNet-18 basic blocks on a 56x56 batch-1 input: 64->64 channels, and the
downsampling block (stride 2, 64->128, 1x1 projection).

Each model is compiled once (``compile_model``: the default path with bound weights; its
compile time with a cold compile cache is reported), checked against the float64 numpy
reference together with the numpy float32 and torch implementations, then timed in
interleaved rounds after a settle pause; the table gives median times and ratios to numpy
(``<= 1``: at most numpy's time), and the per-kernel shares of tilecraft's time follow.
Threads, environment and timing conventions are those of ``llama_layer_bench.py``.

Run: ``python benchmarks/models_bench.py [--rounds N] [--small] [--only NAME]``.
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
from _models import models, np_float32


def run_case(case: models.ModelCase, torch: Any, rounds: int) -> tuple[dict[str, float], float]:
    """Check and time one model; (median seconds per implementation, compile seconds)."""
    exe, compile_s = bench.cold_compile(case.mod, case.params)
    fns: dict[str, Callable[[], Any]] = {
        "tilecraft": lambda: exe[case.entry](*case.inputs),
        "numpy": np_float32(case),
    }
    if torch is not None:
        from models import torch_ref

        fn, targs = torch_ref.for_case(case)

        def run_torch() -> np.ndarray:
            with torch.inference_mode():
                return fn(*targs).numpy()  # type: ignore[no-any-return]

        fns["torch"] = run_torch
    want = case.expected()
    for name, f in fns.items():
        got = f()
        np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol, err_msg=name)
    kernels = [b.value.func for b in exe.mod[case.entry].bindings if hasattr(b.value, "func")]
    print(f"{case.name}: compile {compile_s:.2f} s (cold cache); {len(kernels)} kernel calls: ")
    print(f"  {', '.join(kernels)}")
    times = dict(zip(fns, bench.per_call(list(fns.values()), rounds), strict=True))
    shares = bench.kernel_shares(exe, case.entry, case.inputs, runs=3)
    bench.print_shares(f"  {case.name}", shares, Counter(kernels))
    print()
    return times, compile_s


def main(argv: list[str] | None = None) -> int:
    """Check, time and profile every model; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--small", action="store_true", help="the small test sizes")
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    args = parser.parse_args(argv)
    torch = bench.load_torch()
    print(bench.environment_line())
    print(f"torch {torch.__version__}" if torch else "torch not installed: pip install torch")
    print()
    cases = [
        c
        for c in models.cases("small" if args.small else "full")
        if not c.name.startswith("llama") and args.only in c.name
    ]
    rows = [(c.name, *run_case(c, torch, args.rounds)) for c in cases]
    names = ["tilecraft", "numpy", "torch"]
    header = f"{'model':<28}" + "".join(f"{n + ' us':>15}" for n in names)
    header += f"{'tilecraft/numpy':>17}{'torch/numpy':>13}{'compile s':>11}"
    print(header)
    print("-" * len(header))
    for name, times, compile_s in rows:
        line = f"{name:<28}" + "".join(
            f"{times[n] * 1e6:>15,.1f}" if n in times else f"{'n/a':>15}" for n in names
        )
        line += f"{times['tilecraft'] / times['numpy']:>17.2f}"
        line += f"{times['torch'] / times['numpy']:>13.2f}" if "torch" in times else f"{'':>13}"
        print(line + f"{compile_s:>11.2f}")
    print("ratio = time / numpy's time (<= 1: at most numpy's time); tilecraft: tc.compile")
    return 0


if __name__ == "__main__":
    sys.exit(main())
