"""PyTorch models through tilecraft against torch eager, torch.compile and onnxruntime, CPU.

The models are the importer tests' plain-PyTorch ones with random weights, at the widths of
the models they stand for (``--size real``, the default): a GPT-2 block (768, 12 heads), a
Llama decoder block at TinyLlama's widths (2048, 32 query and 4 KV heads, 5632
intermediate) for a 64-token prefill and for one token decoded against a 63-entry KV cache,
a BERT-base layer, ViT-B/16's patch embedding plus one block on a 224x224 image, and
torchvision's ResNet-18 and MobileNetV2 whole on one 224x224 image; ``--size small`` runs
them at width 128 (ResNet-18's stem and blocks, MobileNetV2's first inverted residuals)
and 64x64 images. Each runs in fp32 through ``torch.export`` +
``tc.compile`` (the CPU rules), torch eager, ``torch.compile`` (inductor; skipped with the
reason when it fails to compile here) and onnxruntime on the ``torch.onnx.export`` of the
model (``intra_op_num_threads`` = the thread count). Outputs are checked against eager
first (1e-4 relative).

    python benchmarks/torch_models_bench.py [--rounds N] [--threads 1,all] [--size real]

Each thread count runs in its own process (OpenMP reads its thread count once):
``BENCH_THREADS`` sets tilecraft's OpenMP, OpenBLAS, ``torch.set_num_threads`` and
onnxruntime's intra-op threads alike. A program with several outputs (the Llama decode step
returns the caches too) is one graph function returning their tuple. Times are medians of
interleaved rounds; on a shared machine read the ratios.
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


def models(torch: Any, size: str) -> dict[str, tuple[Any, tuple[Any, ...]]]:
    """name -> (model in eval mode, example inputs)."""
    import torch_models as tm

    torch.manual_seed(0)
    if size == "small":
        d = 128
        cache = (torch.randn(1, 2, 63, d // 4), torch.randn(1, 2, 63, d // 4))
        image = (torch.randn(1, 3, 64, 64),)
        return {
            "GPT-2 block d128 s64": (tm.GPT2Block(d, 4), (torch.randn(1, 64, d),)),
            "Llama decode d128 kv63": (
                tm.LlamaDecodeKV(d, 4, 2, 128),
                (torch.randn(1, 1, d), *cache),
            ),
            "BERT layer d128 s64": (tm.BertLayer(d, 4, 4 * d), (torch.randn(1, 64, d),)),
            "ViT patch+block d128 64px": (tm.ViTPatchBlock(d, 64), image),
            "ResNet-18 blocks w16 64px": (tm.randomize_batch_norms(tm.ResNetStem(16)), image),
            "MobileNetV2 blocks 64px": (tm.randomize_batch_norms(tm.MobileNetV2Blocks()), image),
        }
    llama = {"d": 2048, "h": 32, "kv": 4, "maxlen": 512, "ff": 5632}
    cache = (torch.randn(1, 4, 63, 64), torch.randn(1, 4, 63, 64))
    image = (torch.randn(1, 3, 224, 224),)
    return {
        "GPT-2 block 768 s64": (tm.GPT2Block(768, 12), (torch.randn(1, 64, 768),)),
        "Llama 2048/5632 s64": (tm.LlamaBlock(**llama), (torch.randn(1, 64, 2048),)),
        "Llama decode kv63": (tm.LlamaDecodeKV(**llama), (torch.randn(1, 1, 2048), *cache)),
        "BERT-base layer s64": (tm.BertLayer(768, 12, 3072), (torch.randn(1, 64, 768),)),
        "ViT-B/16 patch+blk 224": (tm.ViTPatchBlock(768, 224, 16, 12, 3072), image),
        "ResNet-18 224": (tm.randomize_batch_norms(tm.ResNet18()), image),
        "MobileNetV2 224": (tm.randomize_batch_norms(tm.MobileNetV2()), image),
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


def _onnxruntime(torch: Any, model: Any, args: tuple[Any, ...]) -> tuple[Any, str]:
    """The onnxruntime call on the model's ONNX export, or (None, why it is missing)."""
    import io
    import warnings

    try:
        import onnxruntime as ort
    except ImportError as e:
        return None, f"onnxruntime is not installed ({e})"
    names = [f"in{i}" for i in range(len(args))]
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, buf, dynamo=False, input_names=names, opset_version=17)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = bench.THREADS
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(buf.getvalue(), opts, providers=["CPUExecutionProvider"])
    feeds = {n: a.numpy() for n, a in zip(names, args, strict=True)}
    return (lambda: sess.run(None, feeds)), ""


def _check_outputs(name: str, got: Any, refs: tuple[Any, ...]) -> None:
    outs = got if isinstance(got, (tuple, list)) else (got,)
    assert len(outs) == len(refs), f"{name}: {len(outs)} outputs, eager has {len(refs)}"
    for out, r in zip(outs, refs, strict=True):
        scale = 1e-4 * float(r.abs().max())
        np.testing.assert_allclose(np.asarray(out), r.numpy(), rtol=1e-4, atol=scale)


def _row(name: str, t: list[float], have: list[bool]) -> str:
    """One table row: tilecraft, eager, inductor, onnxruntime (ms) and each over tilecraft."""
    it = iter(t[1:])
    others = [next(it) if h else None for h in have]
    cells = [f"{t[0] * 1e3:>10.3f}", f"{others[0] * 1e3:>10.3f}"]  # type: ignore[operator]
    cells += [f"{o * 1e3:>10.3f}" if o is not None else f"{'skipped':>10}" for o in others[1:]]
    ratios = [f"{o / t[0]:>8.2f}x" if o is not None else f"{'-':>9}" for o in others]
    return f"{bench.THREADS:>3} {name:<26}{''.join(cells)}  {''.join(ratios)}"


def run_one(rounds: int, size: str) -> None:
    """Time every model at this process's thread count; print one row per model."""
    torch = bench.load_torch()
    assert torch is not None, "this benchmark needs torch"
    print(f"    {bench.environment_line()}", flush=True)
    for name, (model, args) in models(torch, size).items():
        model.eval()
        with torch.no_grad():
            ref = model(*args)
        refs = ref if isinstance(ref, tuple) else (ref,)
        ours = _tilecraft(torch, model, args)
        _check_outputs(name, ours(), refs)
        fast, why = _inductor(torch, model, args)
        ort_run, ort_why = _onnxruntime(torch, model, args)
        if ort_run is not None:
            _check_outputs(f"{name} (onnxruntime)", ort_run(), refs)

        def eager(model: Any = model, args: tuple[Any, ...] = args) -> Any:
            with torch.no_grad():
                return model(*args)

        def inductor(fast: Any = fast, args: tuple[Any, ...] = args) -> Any:
            with torch.no_grad():
                return fast(*args)

        have = [True, fast is not None, ort_run is not None]
        fns = [ours, eager] + ([inductor] if fast is not None else [])
        fns += [ort_run] if ort_run is not None else []
        print(_row(name, bench.per_call(fns, rounds), have), flush=True)
        for tool, reason in (("inductor", why), ("onnxruntime", ort_why)):
            if reason:
                print(f"    {tool} skipped: {reason}")


def main() -> None:
    """Parse arguments; run each thread count in a child process (or this one)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", default="1,all", help="comma-separated counts; 'all' = cores")
    p.add_argument("--size", choices=["real", "small"], default="real")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        run_one(a.rounds, a.size)
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    target = tc.Target("cpu")
    print(f"ISA: {target.mcpu} {','.join(target.features)}; {cores} usable cores")
    print("ms per forward (median); ratio = the other's time / tilecraft's (above 1: tilecraft "
          "faster)")  # fmt: skip
    print(f"{'thr':>3} {'model':<26}{'tilecraft':>10}{'eager':>10}{'inductor':>10}"
          f"{'ort':>10}  {'eager/tc':>9}{'ind/tc':>9}{'ort/tc':>9}")  # fmt: skip
    for count in a.threads.split(","):
        n = str(cores) if count == "all" else count
        env = {**os.environ, "BENCH_THREADS": n}
        cmd = [sys.executable, __file__, "--child", "--rounds", str(a.rounds), "--size", a.size]
        subprocess.run(cmd, env=env, check=True)


if __name__ == "__main__":
    main()
