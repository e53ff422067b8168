"""PyTorch models through tilecraft against torch eager and torch.compile (inductor), CPU.

The models are the importer tests' plain-PyTorch ones with random weights, at a width a
small machine compiles in seconds: a GPT-2 block, a Llama decoder block decoding one token
against a KV cache, a BERT layer on ``nn.MultiheadAttention``, a ViT patch embedding plus
block, ResNet-18's stem and basic blocks, MobileNetV2's inverted residuals. Each runs in fp32
through ``torch.export`` + ``tc.compile`` (the CPU rules), torch eager and ``torch.compile``
(inductor; skipped with the reason when it fails to compile here). Outputs are checked
against eager first (1e-4 relative).

    python benchmarks/torch_models_bench.py [--rounds N] [--threads 1,all]

Each thread count runs in its own process (OpenMP reads its thread count once):
``BENCH_THREADS`` sets tilecraft's OpenMP, OpenBLAS and ``torch.set_num_threads`` alike.
A program with several outputs (the Llama decode step returns the caches too) is one graph
function per output in tilecraft: its time is all of them, each computing its own output.
Times are medians of interleaved rounds; on a shared machine read the ratios.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import _bench_common as bench  # sets the thread environment before numpy loads
import numpy as np

import tilecraft as tc

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "frontend" / "torch"))


def models(torch: Any) -> dict[str, tuple[Any, tuple[Any, ...]]]:
    """name -> (model in eval mode, example inputs)."""
    import torch_models as tm

    torch.manual_seed(0)
    d = 128
    cache = (torch.randn(1, 2, 63, d // 4), torch.randn(1, 2, 63, d // 4))
    return {
        "GPT-2 block d128 s64": (tm.GPT2Block(d, 4), (torch.randn(1, 64, d),)),
        "Llama decode d128 kv63": (tm.LlamaDecode(d, 4, 2, 128), (torch.randn(1, 1, d), *cache)),
        "BERT MHA layer d128 s64": (tm.BertMHALayer(d, 4, 4 * d), (torch.randn(64, 1, d),)),
        "ViT patch+block d128 64px": (tm.ViTPatchBlock(d, 64), (torch.randn(1, 3, 64, 64),)),
        "ResNet-18 blocks w16 64px": (
            tm.randomize_batch_norms(tm.ResNetStem(16)),
            (torch.randn(1, 3, 64, 64),),
        ),
        "MobileNetV2 blocks 64px": (
            tm.randomize_batch_norms(tm.MobileNetV2Blocks()),
            (torch.randn(1, 3, 64, 64),),
        ),
    }


def _tilecraft(torch: Any, model: Any, args: tuple[Any, ...]) -> Any:
    from tilecraft.frontend.torch import from_exported_program

    mod, params = from_exported_program(torch.export.export(model, args))
    exe = bench.compile_model(mod, params)
    arrays = [a.numpy() for a in args]
    return lambda: exe["main"](*arrays)  # several outputs: one function returning their tuple


def _inductor(torch: Any, model: Any, args: tuple[Any, ...]) -> tuple[Any, str]:
    """The inductor-compiled call, or (None, why it failed)."""
    torch._dynamo.reset()
    fast = torch.compile(model)
    inductor_error = getattr(torch._inductor.exc, "InductorError", RuntimeError)
    failures = (torch._dynamo.exc.BackendCompilerFailed, inductor_error, RuntimeError, OSError)
    try:
        with torch.no_grad():
            fast(*args)
    except failures as e:  # a C++ compiler missing or failing here: reported, then skipped
        return None, f"{type(e).__name__}: {str(e).splitlines()[0][:100]}"
    return fast, ""


def run_one(rounds: int) -> None:
    """Time every model at this process's thread count; print one row per model."""
    torch = bench.load_torch()
    assert torch is not None, "this benchmark needs torch"
    print(f"    {bench.environment_line()}")
    for name, (model, args) in models(torch).items():
        model.eval()
        with torch.no_grad():
            ref = model(*args)
        refs = ref if isinstance(ref, tuple) else (ref,)
        ours = _tilecraft(torch, model, args)
        for out, r in zip(ours(), refs, strict=True):
            scale = 1e-4 * float(r.abs().max())
            np.testing.assert_allclose(np.asarray(out), r.numpy(), rtol=1e-4, atol=scale)
        fast, why = _inductor(torch, model, args)

        def eager(model: Any = model, args: tuple[Any, ...] = args) -> Any:
            with torch.no_grad():
                return model(*args)

        def inductor(fast: Any = fast, args: tuple[Any, ...] = args) -> Any:
            with torch.no_grad():
                return fast(*args)

        fns = [ours, eager] + ([inductor] if fast is not None else [])
        t = bench.per_call(fns, rounds)
        ind = f"{t[2] * 1e3:>10.3f}" if fast is not None else f"{'skipped':>10}"
        ratio = f"{t[1] / t[0]:>7.2f}x" + (f"{t[2] / t[0]:>8.2f}x" if fast is not None else "")
        print(f"{bench.THREADS:>3} {name:<28}{t[0] * 1e3:>10.3f}{t[1] * 1e3:>10.3f}{ind}  {ratio}")
        if why:
            print(f"    inductor skipped: {why}")


def main() -> None:
    """Parse arguments; run each thread count in a child process (or this one)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", default="1,all", help="comma-separated counts; 'all' = cores")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        run_one(a.rounds)
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    target = tc.Target("cpu")
    print(f"ISA: {target.mcpu} {','.join(target.features)}; {cores} usable cores")
    print("ms per forward (median); ratio = torch's time / tilecraft's (above 1: tilecraft faster)")
    print(f"{'thr':>3} {'model':<28}{'tilecraft':>10}{'eager':>10}{'inductor':>10}  "
          f"{'eager/tc':>8}{'ind/tc':>8}")  # fmt: skip
    for count in a.threads.split(","):
        n = str(cores) if count == "all" else count
        env = {**os.environ, "BENCH_THREADS": n}
        cmd = [sys.executable, __file__, "--child", "--rounds", str(a.rounds)]
        subprocess.run(cmd, env=env, check=True)


if __name__ == "__main__":
    main()
