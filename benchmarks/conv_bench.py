"""Convolution blocks on the CPU: tilecraft (``tc.compile``, untuned) vs torch eager.

The blocks are PyTorch modules in NCHW as users write them (``tests/frontend/torch``'s
``torch_models``), batch norms in inference mode with random statistics, imported through
``torch.export`` and compiled with bound weights: ResNet-18's basic block (64 -> 64 channels
at 56x56, two 3x3 convolutions, identity shortcut), its downsampling block (64 -> 128, stride
2, 1x1 projection shortcut) and MobileNetV2 inverted residual blocks (1x1 expand, 3x3
depthwise, 1x1 projection; with and without the residual add). Outputs are checked against
eager first. Times are medians of interleaved rounds after a settle pause, in the same
process; ``ratio`` is tilecraft's time over eager's (``<= 1``: at most eager's time), and
``min ratio`` the same for the fastest call of each, steadier on a shared machine. The
per-kernel times of tilecraft follow each table row with ``--kernels``. ``--inductor`` also
times ``torch.compile`` (slow to compile).

One thread unless ``BENCH_THREADS`` says otherwise; ``OPENBLAS_CORETYPE`` and
``OPENBLAS_L2_SIZE`` are removed from this process's environment (``_bench_common``).

    python benchmarks/conv_bench.py [--rounds N] [--only NAME] [--kernels] [--inductor]
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
from pathlib import Path
from typing import Any

import numpy as np

import tilecraft as tc

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "frontend" / "torch"))


def blocks(torch: Any) -> dict[str, tuple[Any, tuple[Any, ...]]]:
    """name -> (model in eval mode, example inputs)."""
    import torch_models as tm

    torch.manual_seed(0)

    def image(c: int, size: int) -> tuple[Any, ...]:
        return (torch.randn(1, c, size, size),)

    def ready(m: Any) -> Any:
        return tm.randomize_batch_norms(m).eval()

    return {
        "resnet18 block 64 56": (ready(tm.BasicBlock(64, 64)), image(64, 56)),
        "resnet18 down 64>128 s2": (ready(tm.BasicBlock(64, 128, 2)), image(64, 56)),
        "mbv2 IR 24 t6 56 res": (ready(tm.InvertedResidual(24, 24, 1, 6)), image(24, 56)),
        "mbv2 IR 32 t6 28 res": (ready(tm.InvertedResidual(32, 32, 1, 6)), image(32, 28)),
        "mbv2 IR 24>32 t6 s2": (ready(tm.InvertedResidual(24, 32, 2, 6)), image(24, 56)),
    }


def _tilecraft(torch: Any, model: Any, args: tuple[Any, ...]) -> tuple[Any, Any, list[Any]]:
    from tilecraft.frontend.torch import from_exported_program

    mod, params = from_exported_program(torch.export.export(model, args))
    exe = bench.compile_model(mod, params)
    arrays = [a.numpy() for a in args]
    return (lambda: exe["main"](*arrays)), exe, arrays


def _times(fns: list[Any], rounds: int) -> tuple[list[float], list[float]]:
    """(median, fastest) seconds per call of each callable, interleaved over ``rounds``
    rounds of a few calls each after a settle pause (the fastest call is the steadier
    comparison on a machine other work shares)."""
    samples: list[list[float]] = [[] for _ in fns]
    for fn in fns:
        fn()
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            time.sleep(bench.SETTLE_S)
            for _ in range(5):
                start = time.perf_counter()
                fn()
                samples[i].append(time.perf_counter() - start)
    return [statistics.median(s) for s in samples], [min(s) for s in samples]


def run_block(torch: Any, name: str, model: Any, args: tuple[Any, ...], opts: Any) -> str:
    """Check and time one block; its table row (and its kernel times when asked)."""
    fast, exe, arrays = _tilecraft(torch, model, args)
    with torch.inference_mode():
        want = model(*args).numpy()
    scale = 1e-4 * float(np.abs(want).max())
    np.testing.assert_allclose(np.asarray(fast()), want, rtol=1e-4, atol=scale, err_msg=name)

    def eager() -> Any:
        with torch.inference_mode():
            return model(*args)

    fns = [fast, eager]
    if opts.inductor:
        torch._dynamo.reset()
        compiled = torch.compile(model)
        with torch.inference_mode():
            compiled(*args)

        def inductor() -> Any:
            with torch.inference_mode():
                return compiled(*args)

        fns.append(inductor)
    med, low = _times(fns, opts.rounds)
    row = f"{name:<26}{med[0] * 1e3:>13.3f}{med[1] * 1e3:>11.3f}{med[0] / med[1]:>8.2f}"
    if opts.inductor:
        row += f"{med[2] * 1e3:>13.3f}{med[0] / med[2]:>8.2f}"
    row += f"{low[0] / low[1]:>11.2f}"
    if opts.kernels:
        for kernel, seconds in bench.kernel_shares(exe, "main", arrays, runs=3):
            row += f"\n    {kernel:<52}{seconds * 1e6:>10.1f} us"
    return row


def main(argv: list[str] | None = None) -> int:
    """Check and time every block; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--only", default="", help="run the blocks whose name contains this")
    parser.add_argument("--kernels", action="store_true", help="per-kernel times of tilecraft")
    parser.add_argument("--inductor", action="store_true", help="time torch.compile too")
    opts = parser.parse_args(argv)
    torch = bench.load_torch()
    if torch is None:
        print("torch is not installed: pip install torch")
        return 1
    target = tc.Target("cpu")
    print(f"target: {target}")
    print(bench.environment_line())
    print(f"torch {torch.__version__}")
    head = f"{'block':<26}{'tilecraft ms':>13}{'eager ms':>11}{'ratio':>8}"
    if opts.inductor:
        head += f"{'inductor ms':>13}{'ratio':>8}"
    head += f"{'min ratio':>11}"
    print(head)
    for name, (model, args) in blocks(torch).items():
        if opts.only in name:
            print(run_block(torch, name, model, args, opts), flush=True)
    print("ratio = tilecraft time / torch time, medians (<= 1: at most torch's time);")
    print("min ratio = the same for the fastest call of each (vs eager)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
