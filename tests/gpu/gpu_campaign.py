"""Random GPU-schedule campaign: the truthful emulator and the GPU lowering against the
schedule's serial meaning (not a test module; tests/gpu/test_gpu_campaign.py runs it).

Case ``seed`` draws a workload and a template from ``random.Random(seed)``
(``gpu_campaign_templates.py``), schedules the workload with random parameters and checks:

1. the scheduled function, GPU-lowered and run under ``emulate="racecheck"``, equals the
   unscheduled function (run on the CPU) on random inputs;
2. a ``RaceCheckError`` is a *race* finding, unless the serial meaning (``emulate="serial"``)
   differs too (then the schedule itself changed the meaning: a *serial* finding); a wrong
   result likewise is a *mismatch* finding (emulation or lowering wrong) or a *serial* one;
3. a template that lets several threads store the same shared elements (a cooperative fetch
   leaving a thread axis out) must get exactly that race report (*expected*); no report is a
   *missed* finding;
4. only tilecraft errors leave the build: a ``LowerError``/``BuildError``/``CodegenError`` is a
   *refusal*, counted by message; any other exception is a *raw* finding, a crashing or hanging
   child a *crash*. Each case's build and run happen in a forked child for that reason.

A template refused by a primitive (``ScheduleError``) is counted, not a finding. Findings keep
the case seed, the workload, the trace (``sch.trace.as_python()``) and the message; a case is
reproduced by its seed alone::

    PYTHONPATH=<tree> python tests/gpu/gpu_campaign.py --cases 400 --seed 0 --out gpu.json
    PYTHONPATH=<tree> python tests/gpu/gpu_campaign.py --case 123 --verbose
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

from gpu_campaign_templates import TEMPLATES, WORKLOADS, Workload

import tilecraft as tc
from tilecraft.errors import (
    EmulationError,
    RaceCheckError,
    RaceKind,
    ScheduleError,
    TilecraftError,
)
from tilecraft.ir import PrimFunc
from tilecraft.schedule import Schedule
from tilecraft.testing import check_numeric
from tilecraft.testing import run_forked as tc_run_forked

TARGET = tc.Target("cuda -arch=sm_80")
FINDINGS = ("race", "missed", "mismatch", "serial", "emulation", "raw", "crash")


@dataclass
class Case:
    """One drawn case: the workload, the template's name, and the schedule (None when a
    primitive refused; ``error`` then says which and why)."""

    seed: int
    work: Workload
    template: str
    sch: Schedule | None
    error: str = ""
    redundant: bool = False  # a cooperative fetch leaves a thread axis out (see templates)

    def reproducer(self) -> str:
        """Seed, workload, runtime sizes and the trace as Python."""
        trace = self.sch.trace.as_python() if self.sch is not None else ""
        return (f"case {self.seed}: {self.work.spec} sizes={self.work.sizes} "
                f"template={self.template}\n{trace}")  # fmt: skip


@dataclass
class Stats:
    """What a campaign saw; ``examples`` keeps the first few findings of each kind."""

    cases: int = 0
    scheduled: int = 0
    schedule_errors: int = 0
    emulated: int = 0
    passed: int = 0
    expected_races: int = 0
    refusals: int = 0
    findings: Counter[str] = field(default_factory=Counter)
    by_template: Counter[str] = field(default_factory=Counter)
    passed_by_template: Counter[str] = field(default_factory=Counter)
    schedule_error_kinds: Counter[str] = field(default_factory=Counter)
    refusal_kinds: Counter[str] = field(default_factory=Counter)
    finding_kinds: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    seconds: float = 0.0

    def note(self, kind: str, key: str, text: str) -> None:
        """Record a finding (the first 3 of each distinct message)."""
        self.findings[kind] += 1
        self.finding_kinds[f"{kind}: {key}"] += 1
        found = self.examples.setdefault(f"{kind}: {key}", [])
        if len(found) < 3:
            found.append(text[-8000:])

    def as_dict(self) -> dict[str, Any]:
        """JSON-able summary (counters as plain dicts, most common first)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = dict(value.most_common()) if isinstance(value, Counter) else value
        return out


def _key(text: str) -> str:
    """A message with its numbers and quoted names blanked, to count kinds of messages."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    first = re.sub(r"'[^']*'|\"[^\"]*\"", "'_'", first)
    return re.sub(r"\d+", "N", first)[:160]


# ------------------------------------------------------------------------------------------
# drawing a case
def draw(seed: int) -> Case:
    """The case of ``seed``: workload, template, and the schedule (or the refusal)."""
    rng = random.Random(seed)
    kind = rng.choice(sorted(WORKLOADS))
    work = WORKLOADS[kind](rng, rng.random() < 0.4)
    template = rng.choice(TEMPLATES[work.kind])
    sch = Schedule(work.func, seed=seed)
    try:
        redundant = template(sch, rng)
    except ScheduleError as e:
        return Case(seed, work, template.__name__, None, f"{e.primitive}: {_key(e.short)}")
    return Case(seed, work, template.__name__, sch, redundant=redundant)


# ------------------------------------------------------------------------------------------
# judging a schedule (in a forked child)
def _compare(func: PrimFunc, ref: PrimFunc, sizes: dict[str, int], mode: str) -> str:
    """Empty when ``func`` run in ``mode`` equals ``ref`` (on the CPU) on random inputs, else
    the mismatch."""
    try:
        check_numeric(func, ref, emulate_gpu=mode, target=TARGET, shape_vars=sizes or None)
    except AssertionError as e:
        if not str(e).startswith(("output ", "check_numeric:")):
            raise
        return str(e)
    return ""


def judge(case: Case) -> tuple[str, str, str]:
    """(verdict, key, detail) of a scheduled case: ``ok``, ``expected`` (the race report a
    redundant cooperative fetch must get), ``refused`` or a finding kind."""
    assert case.sch is not None
    func, ref, sizes = case.sch.func, case.work.func, case.work.sizes
    try:
        try:
            wrong = _compare(func, ref, sizes, "racecheck")
        except RaceCheckError as e:
            serial = _compare(func, ref, sizes, "serial")
            if serial:
                return "serial", "race report, serial meaning wrong", f"{e}\n{serial}"
            same = "both stored the same value" in str(e)
            if same and case.redundant and e.kind is RaceKind.CONFLICT:
                return "expected", "", ""
            return "race", f"{e.kind.value}{' (same value)' * same} in {e.buffer}", str(e)
        if case.redundant:
            return "missed", "redundant shared stores not reported", wrong
        if not wrong:
            return "ok", "", ""
        serial = _compare(func, ref, sizes, "serial")
        if serial:
            return "serial", "serial meaning wrong", serial
        return "mismatch", "racecheck result wrong, serial right", wrong
    except EmulationError as e:
        return "emulation", _key(str(e)), str(e)
    except TilecraftError as e:
        return "refused", f"{type(e).__name__}: {_key(str(e))}", str(e)
    except Exception as e:  # noqa: BLE001 - a raw exception is a finding, counted
        return "raw", f"{type(e).__name__}", traceback.format_exc()


def run_forked(fn: Callable[[], tuple[str, str, str]], timeout: float) -> tuple[str, str, str]:
    """``fn()`` in a forked child: its verdict, or a finding saying how the child failed."""
    got = tc_run_forked(fn, timeout)
    if got.failure is None:
        assert got.value is not None
        return got.value
    if got.failure == "raised":
        return ("raw", got.detail.split(":", 1)[0], got.detail)
    return ("crash", "hang (timeout)" if got.failure == "hang" else got.failure, got.detail)


# ------------------------------------------------------------------------------------------
# the campaign
def run_case(seed: int, stats: Stats, *, fork: bool = True, timeout: float = 120.0) -> str:
    """Draw, schedule and judge case ``seed``, counting it in ``stats``; the verdict."""
    case = draw(seed)
    stats.cases += 1
    stats.by_template[case.template] += 1
    if case.sch is None:
        stats.schedule_errors += 1
        stats.schedule_error_kinds[f"{case.template}: {case.error}"] += 1
        return "schedule_error"
    stats.scheduled += 1
    verdict, key, detail = run_forked(lambda: judge(case), timeout) if fork else judge(case)
    if verdict == "refused":
        stats.refusals += 1
        stats.refusal_kinds[f"{case.template}: {key}"] += 1
        return verdict
    stats.emulated += 1
    if verdict == "expected":
        stats.expected_races += 1
        return verdict
    if verdict == "ok":
        stats.passed += 1
        stats.passed_by_template[case.template] += 1
        return verdict
    stats.note(verdict, key, f"{case.reproducer()}\n--- {verdict}: {detail}")
    return verdict


def run_campaign(
    cases: int, base_seed: int, *, fork: bool = True, budget_s: float | None = None,
    progress: bool = False,
) -> Stats:  # fmt: skip
    """Run cases ``base_seed .. base_seed + cases - 1`` (stopping early past ``budget_s``)."""
    stats = Stats()
    start = time.time()
    for k in range(cases):
        run_case(base_seed + k, stats, fork=fork)
        if progress and (k + 1) % 25 == 0:
            sys.stderr.write(
                f"{k + 1} cases, {stats.emulated} emulated, findings "
                f"{dict(stats.findings)}, {time.time() - start:.0f} s\n"
            )
            sys.stderr.flush()
        if budget_s is not None and time.time() - start > budget_s:
            break
    stats.seconds = round(time.time() - start, 1)
    return stats


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run a campaign (or one case) and print the figures as JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget", type=float, default=None, help="stop after this many seconds")
    ap.add_argument("--case", type=int, default=None, help="run this one case, unforked")
    ap.add_argument("--out", default=None, help="also write the figures and findings here")
    args = ap.parse_args(argv)
    if args.case is not None:
        case = draw(args.case)
        sys.stdout.write(case.reproducer() + f"\n{case.error}\n")
        if case.sch is not None:
            sys.stdout.write(f"{case.sch.func.script()}\n{judge(case)}\n")
        return 0
    stats = run_campaign(args.cases, args.seed, budget_s=args.budget, progress=True)
    report = {"tilecraft": tc.__file__, "seed": args.seed, **stats.as_dict()}
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(report, fh, indent=1, default=str)
    summary = {k: v for k, v in report.items() if k != "examples"}
    sys.stdout.write(json.dumps(summary, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
