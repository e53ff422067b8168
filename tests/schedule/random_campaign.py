"""Random-schedule campaign: apply random primitive sequences and check the invariants.

For each sequence (a workload, a seed, a number of steps) every step either raises
``ScheduleError`` -- and then the schedule must be exactly as before: the same function
object, trace length, block-handle generations and random state (*transactionality*) -- or
succeeds. At the end the trace must replay to the same function, live, after a JSON round trip
and as Python text (*replay*). The distinct scheduled functions of a workload are then built
with the unscheduled one in one module and run on the same random inputs, at every runtime
size the workload lists (*meaning*). Anything else leaving a primitive, the replay or the build
is a *raw exception*.

Used two ways: ``strict=True`` (the pytest property test) raises at the first violation with
the seed and the trace; ``strict=False`` (the command line) counts everything and runs the
compiled kernels in a forked child, so a crashing kernel is counted instead of ending the run::

    PYTHONPATH=<tree> python tests/schedule/random_campaign.py --per-workload 417 --seed 50000

It tolerates a tree without some primitive (the steps for it are skipped), so the same command
measures an older commit.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
from random_steps import STEPS, WORKLOADS, Workload

import tilecraft as tc
from tilecraft.errors import ScheduleError
from tilecraft.ir import BufferStore, PrimFunc, Var, post_order_visit, structural_equal
from tilecraft.ir import structural_hash as shash
from tilecraft.schedule import INSTRUCTION_KINDS, Schedule
from tilecraft.testing import run_forked, verify_trace_roundtrip

NEW_PRIMITIVES = ("get_output_blocks", "transform_block_layout", "pad_einsum", "decompose_padding")


class CampaignError(AssertionError):
    """An invariant broke (raised in strict mode)."""


@dataclass
class Stats:
    """What a campaign saw; ``examples`` keeps the first few findings of each kind."""

    sequences: int = 0
    primitive_calls: int = 0
    steps: int = 0
    schedule_errors: int = 0
    successes: int = 0
    checked_functions: int = 0
    meaning_changes: int = 0
    transactionality_violations: int = 0
    replay_mismatches: int = 0
    oversized_allocations: int = 0
    crashes: int = 0
    raw_exceptions: Counter[str] = field(default_factory=Counter)
    kinds_succeeded: Counter[str] = field(default_factory=Counter)
    steps_succeeded: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def note(self, what: str, text: str, strict: bool) -> None:
        """Record a finding (first 5 of each kind); in strict mode raise it."""
        if strict:
            raise CampaignError(f"{what}: {text}")
        found = self.examples.setdefault(what, [])
        if len(found) < 5:
            found.append(text[-12000:])

    def as_dict(self) -> dict[str, Any]:
        """JSON-able summary (counters as plain dicts, most common first)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = dict(value.most_common()) if isinstance(value, Counter) else value
        return out


class _Counted(Schedule):
    """A Schedule that counts the primitive calls made on it and remembers the last one."""

    counter: list[int]
    last_call: list[str]

    def __getattribute__(self, name: str) -> Any:
        attr = super().__getattribute__(name)
        if name not in INSTRUCTION_KINDS:
            return attr
        object.__getattribute__(self, "counter")[0] += 1
        last = object.__getattribute__(self, "last_call")

        def call(*args: Any, **kwargs: Any) -> Any:
            shown = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
            last[:] = [f"sch.{name}({', '.join(shown)})"]
            return attr(*args, **kwargs)

        return call


# ------------------------------------------------------------------------------------------
# one sequence
def _snapshot(sch: Schedule) -> tuple[object, int, dict[str, int], object]:
    st = sch.state
    return (st.func, len(st.trace), dict(st.block_gen), st.rng.getstate())


def _replay_python(sch: Schedule, original: PrimFunc) -> str | None:
    """Replay ``sch``'s trace from its Python text; a description of any mismatch."""
    text = sch.trace.as_python()
    fresh = Schedule(original)
    exec(compile(text, "<trace>", "exec"), {"sch": fresh, "T": tc.script.T})
    if not structural_equal(fresh.func, sch.func):
        return "the Python trace replays to a different function"
    if fresh.trace.as_python() != text:
        return "the Python replay records a different trace"
    return None


def _check_replay(
    sch: Schedule, original: PrimFunc, where: str, stats: Stats, strict: bool
) -> bool:
    try:
        verify_trace_roundtrip(sch, original)
        problem = _replay_python(sch, original)
    except AssertionError as e:
        problem = str(e)
    except Exception as e:  # noqa: BLE001 - the campaign counts whatever replay raises
        problem = f"{type(e).__name__}: {e}"
    if problem is None:
        return True
    stats.replay_mismatches += 1
    stats.note("replay", f"{where}: {problem}\n{sch.trace.as_python()}", strict)
    return False


def run_sequence(
    name: str, seed: int, n_steps: int, stats: Stats, *, strict: bool
) -> Schedule | None:
    """Apply ``n_steps`` random steps to workload ``name``; the schedule, or None when the
    sequence hit a raw exception or a broken invariant (it is then not checked further)."""
    original = WORKLOADS[name].make()
    rng = random.Random(seed)
    sch = _Counted(original, seed=seed)
    sch.counter, sch.last_call = [0], [""]
    where = f"{name} seed {seed}"
    stats.sequences += 1
    ok = True
    for _ in range(n_steps):
        step = rng.choice(STEPS)
        try:
            action = step(sch, rng)
            if action is None:
                continue
            before = _snapshot(sch)
            stats.steps += 1
            action()
        except ScheduleError as e:
            stats.schedule_errors += 1
            after = _snapshot(sch)
            if after[0] is not before[0] or after[1:] != before[1:]:
                stats.transactionality_violations += 1
                stats.note("transactionality", f"{where}: {step.__name__}: {e.short}", strict)
                ok = False
                break
            continue
        except Exception as e:  # noqa: BLE001 - a raw exception is a finding, counted
            key = f"{type(e).__name__} in {step.__name__}"
            stats.raw_exceptions[key] += 1
            text = (
                f"{where}: {key}\n{traceback.format_exc()}\nlast call: {sch.last_call[0]}\n"
                "trace before the step:\n"
            )
            stats.note("raw", text + sch.trace.as_python(), strict)
            ok = False
            break
        stats.successes += 1
        stats.steps_succeeded[step.__name__] += 1
    stats.primitive_calls += sch.counter[0]
    if not ok or not _check_replay(sch, original, where, stats, strict):
        return None
    stats.kinds_succeeded.update(inst.kind for inst in sch.trace)
    return sch


# ------------------------------------------------------------------------------------------
# meaning: one module per chunk, every runtime size
def _outputs(func: PrimFunc) -> list[int]:
    written: set[int] = set()

    def fn(n: object) -> None:
        if isinstance(n, BufferStore):
            written.add(id(n.buffer))

    post_order_visit(func.body, fn)
    return [k for k, p in enumerate(func.params) if id(p) in written]


def _arguments(func: PrimFunc, size: dict[str, int], seed: int) -> list[Any]:
    """Inputs (random), outputs (NaN) and scalar parameters for one call at ``size``."""
    env: dict[int, int] = {}
    for p in func.params:
        for v in [p] if isinstance(p, Var) else p.shape_vars():
            if v.name in size:
                env[id(v)] = size[v.name]
    rng = np.random.default_rng(seed)
    outs = set(_outputs(func))
    args: list[Any] = []
    for k, p in enumerate(func.params):
        if isinstance(p, Var):
            args.append(env[id(p)])
            continue
        shape = [tc.arith.evaluate(e, {v: env[id(v)] for v in p.shape_vars()}) for e in p.shape]
        arr = rng.standard_normal(shape).astype("float32")
        args.append(np.full_like(arr, np.nan) if k in outs else arr)
    return args


def _compare(lib: Any, labels: Sequence[str], work: Workload, original: PrimFunc) -> list[str]:
    """Per scheduled function: "" when it matches the reference at every size, else why."""
    outs = _outputs(original)
    verdicts = [""] * len(labels)
    for size in work.sizes:
        base = _arguments(original, size, seed=0)

        def run(fname: str, base: list[Any] = base) -> list[np.ndarray]:
            args = [a.copy() if isinstance(a, np.ndarray) else a for a in base]
            lib[fname](*args)
            return [args[k] for k in outs]

        want = run("reference")
        for k in range(len(labels)):
            if verdicts[k]:
                continue
            for got, ref in zip(run(f"f{k}"), want, strict=True):
                scale = max(1.0, float(np.nanmax(np.abs(ref)))) if ref.size else 1.0
                if not np.allclose(got, ref, rtol=1e-4, atol=1e-4 * scale):
                    err = np.nanmax(np.abs(got - ref)) if got.size else 0.0
                    verdicts[k] = f"at {size}: max abs error {err}, nan {np.isnan(got).sum()}"
    return verdicts


_ALLOC = re.compile(r"tc_alloc\(([^;]*)\);")


def _oversized(source: str, names: Sequence[str]) -> set[str]:
    """Functions whose C source allocates a constant of 2**28 elements or more."""
    found: set[str] = set()
    parts = re.split(r"TC_EXPORT \w+ (\w+)\(", source)
    for fname, body in zip(parts[1::2], parts[2::2], strict=True):
        for m in _ALLOC.finditer(body):
            if any(int(x) >= 2**28 for x in re.findall(r"\b\d+\b", m.group(1))):
                found.add(fname.rstrip("_"))
    return found & set(names)


def _run_forked(fn: Callable[[], list[str]], timeout: float) -> list[str] | str:
    """``fn()`` in a forked child: its result, or a description of how the child died."""
    got = run_forked(fn, timeout)
    if got.failure is None:
        assert got.value is not None
        return got.value
    if got.failure == "raised":
        return got.detail.splitlines()[0]
    return "hang (timeout)" if got.failure == "hang" else f"crash ({got.failure})"


def check_meaning(
    name: str, done: list[tuple[str, Schedule]], stats: Stats, *, strict: bool
) -> None:
    """Build ``done``'s functions with the original in one module and compare outputs."""
    work = WORKLOADS[name]
    original = work.make()
    funcs = {"reference": original.update(name="reference")}
    for k, (_, sch) in enumerate(done):
        funcs[f"f{k}"] = sch.func.update(name=f"f{k}")
    labels = [label for label, _ in done]
    try:
        lib = tc.build(tc.ir.IRModule(funcs), target="cpu", emulate=True)
    except Exception as e:  # noqa: BLE001 - narrowed down function by function below
        if len(done) == 1:
            stats.raw_exceptions[f"{type(e).__name__} in build"] += 1
            stats.note("raw", f"{labels[0]}: build: {e}\n{done[0][1].trace.as_python()}", strict)
            return
        for item in done:
            check_meaning(name, [item], stats, strict=strict)
        return
    for fname in _oversized(lib.source, list(funcs)):
        k = int(fname[1:])
        stats.oversized_allocations += 1
        stats.note("oversized", f"{labels[k]}\n{done[k][1].trace.as_python()}", strict)
    verdicts: list[str] | str
    if strict:
        verdicts = _compare(lib, labels, work, original)
    else:
        verdicts = _run_forked(lambda: _compare(lib, labels, work, original), timeout=300)
    if isinstance(verdicts, str):  # the child died: find the culprit one function at a time
        if len(done) == 1:
            stats.crashes += 1
            stats.note("crash", f"{labels[0]}: {verdicts}\n{done[0][1].trace.as_python()}", False)
            return
        for item in done:
            check_meaning(name, [item], stats, strict=strict)
        return
    stats.checked_functions += len(done)
    for (label, sch), verdict in zip(done, verdicts, strict=True):
        if verdict:
            stats.meaning_changes += 1
            stats.note("meaning", f"{label}: {verdict}\n{sch.trace.as_python()}", strict)


def run_campaign(
    per_workload: int,
    base_seed: int,
    n_steps: int,
    *,
    strict: bool,
    names: Sequence[str] | None = None,
    chunk: int = 40,
    progress: bool = False,
) -> Stats:
    """Run ``per_workload`` sequences on each workload (seeds ``base_seed + k``)."""
    stats = Stats()
    for name in names or list(WORKLOADS):
        seen: set[str] = set()
        done: list[tuple[str, Schedule]] = []
        for k in range(per_workload):
            sch = run_sequence(name, base_seed + k, n_steps, stats, strict=strict)
            if sch is not None and (key := shash(sch.func)) not in seen:
                seen.add(key)  # identical results need one check
                done.append((f"{name} seed {base_seed + k}", sch))
            if len(done) == chunk or (k == per_workload - 1 and done):
                check_meaning(name, done, stats, strict=strict)
                done = []
        if progress:
            sys.stderr.write(
                f"{name}: {stats.sequences} sequences, {stats.meaning_changes} meaning "
                f"changes, raw {dict(stats.raw_exceptions)}\n"
            )
            sys.stderr.flush()
    return stats


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run a campaign, print and save the figures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-workload", type=int, default=417)
    ap.add_argument("--seed", type=int, default=50_000)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--workloads", nargs="*", default=None)
    ap.add_argument("--out", default="campaign.json")
    args = ap.parse_args(argv)
    start = time.time()
    stats = run_campaign(
        args.per_workload,
        args.seed,
        args.steps,
        strict=False,
        names=args.workloads,
        progress=True,
    )
    report = {
        "tilecraft": tc.__file__,
        "seed": args.seed,
        "per_workload": args.per_workload,
        "steps_per_sequence": args.steps,
        "workloads": {n: {"sizes": list(WORKLOADS[n].sizes)} for n in args.workloads or WORKLOADS},
        "step_kinds": [s.__name__ for s in STEPS],
        "missing_primitives": [n for n in NEW_PRIMITIVES if not hasattr(Schedule, n)],
        "seconds": round(time.time() - start, 1),
        **stats.as_dict(),
    }
    with open(args.out, "w") as fh:
        json.dump(report, fh, indent=1, default=str)
    summary = {k: v for k, v in report.items() if k not in ("examples", "workloads")}
    sys.stdout.write(json.dumps(summary, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
