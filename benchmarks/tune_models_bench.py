"""Model-level tuning: a model's kernels tuned with ``TuneIRMod``, then compiled with
``tc.compile(database=...)``, against the rules-only compile, numpy and PyTorch eager.

Models (``tests/models``): the reference tutorial's MLP (Linear 768->768, ReLU, LayerNorm,
Linear 768->256) at batch 1 and 64, and the Llama-style decoder layer at TinyLlama-1.1B
sizes (decode with a KV cache, and prefill; ``--small`` for the test sizes). Each model's
module goes through the default graph pipeline with its weights bound, its tasks are tuned
with one global trial budget (``--trials``; the task scheduler shares it), and the records
are applied by ``tc.compile(mod, params=..., database=db)``: the same weights, the same
pipeline, records first, rules for the rest. A symbolic extent (the prefill's ``seq``) is
tuned at the size the benchmark runs (``TuneIRMod(specialize=...)``), and both the tuned and
the rules-only compile get that size's variant (``tc.compile(specialize=...)``), so the
comparison is of schedules, not of static against symbolic kernels. ``explain``'s count of
functions scheduled by a record is printed with each model.

Every implementation is checked against the float64 numpy reference, then timed in
interleaved rounds (``_bench_common.per_call``: medians, a settle pause before each block).
Threads and environment follow ``_bench_common`` (``BENCH_THREADS=1`` for one thread on each
side; tuning measures with the same thread count).

Run: ``python benchmarks/tune_models_bench.py [--trials N] [--rounds N] [--small]
[--only NAME]``.
"""

from __future__ import annotations

# isort: off
import _bench_common as bench  # first: sets the thread environment before numpy loads

# isort: on

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from _models import models, np_float32

import tilecraft as tc
from tilecraft import tune as ms
from tilecraft.graph import get_pipeline
from tilecraft.ir import scheduled_by


def tune_model(
    mod: tc.IRModule,
    params: dict[str, np.ndarray],
    trials: int,
    work_dir: str,
    sizes: dict[str, tuple[int, ...]],
) -> tuple[ms.Database, int, float]:
    """Tune the kernels of ``mod`` (weights bound), symbolic extents at ``sizes``;
    (database, tasks, seconds)."""
    target = tc.Target("cpu")
    with target:
        lowered = get_pipeline("default", params=params)(mod)
    tune = ms.TuneIRMod(work_dir, trials, target=target, specialize=sizes or None)
    start = time.perf_counter()
    tune(lowered)
    assert tune.database is not None
    ntasks = len({r.workload.key for r in tune.database.get_all_tuning_records()})
    return tune.database, ntasks, time.perf_counter() - start


def symbolic_sizes(case: models.ModelCase) -> dict[str, tuple[int, ...]]:
    """Each symbolic extent of the entry's inputs -> the size the benchmark runs it at."""
    out: dict[str, tuple[int, ...]] = {}
    for param, x in zip(case.mod[case.entry].params, case.inputs, strict=False):
        for dim, size in zip(param.type.shape or (), np.shape(x), strict=False):
            if isinstance(dim, tc.ir.Var):
                out[dim.name] = (int(size),)
    return out


def tuned_count(exe: Any) -> tuple[int, int]:
    """(functions scheduled by a database record, all functions) of a compiled module."""
    marks = [scheduled_by(f) for _, f in exe.mod.prim_funcs()]
    return sum(m == "database" for m in marks), len(marks)


def torch_fn(case: models.ModelCase, torch: Any) -> Callable[[], np.ndarray] | None:
    """PyTorch eager for ``case`` (None without torch)."""
    if torch is None:
        return None
    from models import torch_ref

    fn, targs = torch_ref.for_case(case)

    def run() -> np.ndarray:
        with torch.inference_mode():
            return fn(*targs).numpy()  # type: ignore[no-any-return]

    return run


def numpy_fn(case: models.ModelCase) -> Callable[[], np.ndarray]:
    """The numpy float32 implementation a numpy user writes."""
    if isinstance(case.model, models.llama.LlamaDecoderLayer):
        cfg = case.model.cfg
        x = case.inputs
        past = None if case.entry == "prefill" else (x[1], x[2])
        return lambda: models.llama.np_layer(x[0], case.params, cfg, past, dtype=np.float32)
    return np_float32(case)


def run_case(
    case: models.ModelCase, torch: Any, trials: int, rounds: int
) -> tuple[dict[str, float], str]:
    """Tune, compile, check and time one model; (median seconds per side, summary line)."""
    # a symbolic extent is tuned at the size it runs at; both sides get that size's variant
    sizes = symbolic_sizes(case)
    rules = tc.compile(case.mod, "cpu", params=case.params, specialize=sizes or None)
    with tempfile.TemporaryDirectory(prefix="tc-tune-models-") as work_dir:
        db, ntasks, tune_s = tune_model(case.mod, case.params, trials, work_dir, sizes)
        tuned = tc.compile(
            case.mod, "cpu", params=case.params, database=db, specialize=sizes or None
        )
    fns: dict[str, Callable[[], Any]] = {
        "tuned": lambda: tuned[case.entry](*case.inputs),
        "rules": lambda: rules[case.entry](*case.inputs),
        "numpy": numpy_fn(case),
    }
    eager = torch_fn(case, torch)
    if eager is not None:
        fns["torch"] = eager
    want = case.expected()
    for name, f in fns.items():
        np.testing.assert_allclose(f(), want, rtol=case.rtol, atol=case.atol, err_msg=name)
    times = dict(zip(fns, bench.per_call(list(fns.values()), rounds), strict=True))
    by_record, total = tuned_count(tuned)
    line = (
        f"{case.name}: {ntasks} tasks, {trials} trials in {tune_s:.1f} s "
        f"({tune_s / max(trials, 1):.2f} s a trial); {by_record} of {total} functions "
        "scheduled by a record"
    )
    return times, line


def print_table(rows: list[tuple[str, dict[str, float]]]) -> None:
    """Median times and the ratios a reader compares."""
    names = ["tuned", "rules", "numpy", "torch"]
    header = f"{'model':<26}" + "".join(f"{n + ' us':>13}" for n in names)
    header += f"{'tuned/rules':>13}{'tuned/numpy':>13}{'tuned/torch':>13}"
    print(header)
    print("-" * len(header))
    for name, t in rows:
        line = f"{name:<26}" + "".join(
            f"{t[n] * 1e6:>13,.1f}" if n in t else f"{'n/a':>13}" for n in names
        )
        for ref in ("rules", "numpy", "torch"):
            line += f"{t['tuned'] / t[ref]:>13.2f}" if ref in t else f"{'':>13}"
        print(line)
    print("ratio = tuned time / reference time (< 1: tuned is faster)")


def main(argv: list[str] | None = None) -> int:
    """Tune, compile, check and time each model; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=64, help="global trial budget per model")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--small", action="store_true", help="the small test sizes")
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    args = parser.parse_args(argv)
    torch = bench.load_torch()
    print(bench.environment_line())
    print(f"torch {torch.__version__}" if torch else "torch not installed: pip install torch")
    cfg = models.llama.SMALL if args.small else models.llama.TINYLLAMA
    cases = [models.tutorial.case("reference", b) for b in (1, 64)]
    cases += [models.llama.case(cfg, entry) for entry in ("decode", "prefill")]
    rows = []
    for case in cases:
        if args.only not in case.name:
            continue
        times, line = run_case(case, torch, args.trials, args.rounds)
        print(line, flush=True)
        rows.append((case.name, times))
    print()
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
