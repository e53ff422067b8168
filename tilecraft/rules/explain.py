"""``explain``: which rule takes each kernel, why every earlier rule declined, and what it costs.

``explain(mod, rules, target)`` runs the same decision as
:class:`~tilecraft.rules.ApplyDefaultSchedule` on every PrimFunc (without keeping the
schedules) and reports, per function, the rule that took it and each earlier rule's
:class:`~tilecraft.rules.Decline` reason. Functions already scheduled are listed with the rule
(or mark) that scheduled them; each row's ``scheduled_by`` says whether a tuning record
(``"database"``: explain the module after :class:`~tilecraft.tune.ApplyDatabase`, or the
executable's ``mod`` from ``tc.compile(..., database=db)``) or a rule (``"rule:<Name>"``)
scheduled the function. With ``profile=True`` the scheduled module is built with
``tc.build`` and timed on random inputs. Kernels are timed the way the forward runs them: each
graph function is run whole, with per-kernel timing (around each kernel call inside the
forward, in C for the native executor), and a kernel's time is the median over those runs;
the forward's own time, measured without per-kernel timing, is reported beside the sum of the
kernel times (``forward_s``). A module without graph functions, and a kernel no graph function
calls, has its kernels timed alone with ``lib.time_evaluator``. A kernel's *share* is its time
times the number of calls the module's graph functions make to it (1 when no graph function
calls kernels), over the sum of those. A kernel left to the ``Fallback`` rule, or to no rule,
that takes more than :data:`FLAG_SHARE` of the total is flagged: it is the place to write a
rule or to tune.

The report prints as a plain-text table (``print(report)``) and is a plain dict with
:meth:`ExplainReport.to_dict`.
"""

from __future__ import annotations

import enum
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..graph.build import build
from ..graph.ir import CallTIR, Function, OpCall, graph_functions
from ..ir import Buffer, DataType, Expr, IRModule, PrimFunc, Var, scheduled_by
from ..ir.scheduled import BY_DATABASE, RULE_PREFIX
from ..lower.merge_specializations import (
    SPECIALIZATION_OF_ATTR,
    SPECIALIZATIONS_ATTR,
    specializations,
)
from ..runtime.arguments import eval_shape_expr
from ..target import Target, as_target
from .apply import (
    SCHEDULE_RULE_ATTR,
    RuleError,
    function_target,
    scheduled_reason,
    try_rules,
)
from .base import ScheduleRule

FLAG_SHARE = 0.10
"""Share of the total time above which a Fallback (or unscheduled) kernel is flagged."""
FALLBACK_RULE = "Fallback"
PROFILED_FORWARDS = 20
"""Forwards run with per-kernel timing (at least; ``repeat`` when larger) per graph function."""


class Status(enum.Enum):
    """What happened to one function."""

    SCHEDULED = "scheduled"
    ALREADY_SCHEDULED = "already scheduled"
    UNSCHEDULED = "no rule took it"


@dataclass(frozen=True)
class FunctionReport:
    """One row of the report.

    Attributes
    ----------
    name
        The PrimFunc's name.
    status
        Scheduled now, scheduled before, or taken by no rule.
    rule
        The rule that took it (for an already scheduled function: the rule its
        ``tc.scheduled`` mark names, or None when a rule did not schedule it).
    declines
        ``(rule, reason)`` for every rule tried before the one that took it.
    unavailable
        Rules skipped because they do not apply to the target.
    note
        Why it counts as already scheduled, else empty.
    calls
        Calls per run of the module's graph functions (1 when there are none).
    time_s, share
        Measured seconds per call and share of the total (``profile=True`` only).
    flagged
        A Fallback or unscheduled kernel with a share above :data:`FLAG_SHARE`.
    scheduled_by
        Who scheduled it: ``"database"`` (a tuning record), ``"rule:<Name>"``, or another
        ``tc.scheduled`` mark; None when nothing did.
    """

    name: str
    status: Status
    rule: str | None
    declines: tuple[tuple[str, str], ...]
    unavailable: tuple[str, ...] = ()
    note: str = ""
    calls: int = 1
    time_s: float | None = None
    share: float | None = None
    flagged: bool = False
    scheduled_by: str | None = None

    def to_dict(self) -> dict[str, object]:
        """A plain dict (JSON-friendly)."""
        return {
            "name": self.name,
            "status": self.status.value,
            "rule": self.rule,
            "declines": [{"rule": r, "reason": why} for r, why in self.declines],
            "unavailable": list(self.unavailable),
            "note": self.note,
            "calls": self.calls,
            "time_s": self.time_s,
            "share": self.share,
            "flagged": self.flagged,
            "scheduled_by": self.scheduled_by,
        }


@dataclass(frozen=True)
class ExplainReport:
    """The report of :func:`explain`: one :class:`FunctionReport` per PrimFunc, module order.

    ``total_s`` is the sum of the kernels' times weighted by their calls; ``forward_s`` the
    measured time of one run of the module's graph functions (None without them).
    """

    target: str
    functions: tuple[FunctionReport, ...]
    total_s: float | None = None
    forward_s: float | None = None

    def __getitem__(self, name: str) -> FunctionReport:
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(f"explain report has no function {name!r}")

    def to_dict(self) -> dict[str, object]:
        """``{"target", "total_s", "forward_s", "functions": {name: row dict}}``."""
        return {
            "target": self.target,
            "total_s": self.total_s,
            "forward_s": self.forward_s,
            "functions": {f.name: f.to_dict() for f in self.functions},
        }

    def table(self) -> str:
        """The report as a plain-text table, declines listed under each function."""
        profiled = self.total_s is not None
        width = max([8, *(len(f.name) for f in self.functions)]) + 2
        head = f"{'function':<{width}}{'rule':<20}"
        head += f"{'calls':>6}{'time (us)':>12}{'share':>8}" if profiled else ""
        lines = [f"target: {self.target}", head, "-" * len(head)]
        for f in self.functions:
            rule = f.rule or "-"
            if f.status is Status.ALREADY_SCHEDULED:
                rule = f"{rule} (before)" if f.rule else "(scheduled before)"
                rule = "record (database)" if f.scheduled_by == BY_DATABASE else rule
            row = f"{f.name:<{width}}{rule:<20}"
            if profiled:
                t = "-" if f.time_s is None else f"{f.time_s * 1e6:.1f}"
                s = "-" if f.share is None else f"{f.share:.0%}"
                row += f"{f.calls:>6}{t:>12}{s:>8}"
            flag = f"  <-- FLAG: {f.rule or 'unscheduled'} kernel over {FLAG_SHARE:.0%}"
            lines.append(row + (flag if f.flagged else ""))
            lines.extend(f"    {r}: declined: {why}" for r, why in f.declines)
            if f.note:
                lines.append(f"    ({f.note})")
        if profiled:
            assert self.total_s is not None
            lines.append(f"{'total':<{width}}{'(kernels)':<20}{'':>6}{self.total_s * 1e6:>12.1f}")
            if self.forward_s is not None:
                forward = f"{self.forward_s * 1e6:>12.1f}"
                lines.append(f"{'forward':<{width}}{'(whole, measured)':<20}{'':>6}{forward}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def _call_counts(mod: IRModule) -> dict[str, int] | None:
    """Calls of each PrimFunc from the module's graph functions; None when it has none."""
    graphs = graph_functions(mod)
    if not graphs:
        return None
    counts: dict[str, int] = {}
    for _, g in graphs:
        for b in g.bindings:
            if isinstance(b.value, CallTIR):
                counts[b.value.func] = counts.get(b.value.func, 0) + 1
    return counts


def _check_legalized(mod: IRModule) -> None:
    """Refuse a module of graph functions calling operators but holding no PrimFunc yet."""
    if any(True for _ in mod.prim_funcs()):
        return
    ops = sorted(
        {b.value.op for _, g in graph_functions(mod) for b in g.bindings
         if isinstance(b.value, OpCall)}
    )  # fmt: skip
    if ops:
        raise RuleError(
            "explain: the module has no PrimFuncs yet, only graph functions calling operators "
            f'({", ".join(ops)}): run the graph pipeline first, e.g. `with tc.Target("cpu"): '
            'mod = tc.graph.get_pipeline("default")(mod)` (what tc.compile runs; "zero" '
            "without the weight-layout and constant folding passes), and explain the result"
        )


def _decide(
    name: str, func: PrimFunc, rules: Sequence[ScheduleRule], target: Target | None
) -> tuple[FunctionReport, PrimFunc]:
    """The report row of one function and the function to time."""
    reason = scheduled_reason(func)
    if reason is not None:
        by = scheduled_by(func) or ""
        rule = by.removeprefix(RULE_PREFIX) if by.startswith(RULE_PREFIX) else None
        row = FunctionReport(
            name, Status.ALREADY_SCHEDULED, rule, (), note=f"scheduled: {reason}",
            scheduled_by=by or None,
        )  # fmt: skip
        return row, func
    outcome = try_rules(func, rules, function_target(func, target))
    declines = tuple((r, d.reason) for r, d in outcome.declines)
    if outcome.schedule is None:
        row = FunctionReport(name, Status.UNSCHEDULED, None, declines, outcome.unavailable)
        return row, func
    row = FunctionReport(
        name, Status.SCHEDULED, outcome.rule, declines, outcome.unavailable,
        scheduled_by=RULE_PREFIX + outcome.rule if outcome.rule else None,
    )  # fmt: skip
    return row, outcome.schedule.func.with_attr(SCHEDULE_RULE_ATTR, outcome.rule)


def _note_specialization(row: FunctionReport, func: PrimFunc, mod: IRModule) -> FunctionReport:
    """``row`` with a note on the size-specialised variants it has or is one of."""
    general = func.attrs.get(SPECIALIZATION_OF_ATTR)
    if isinstance(general, str):
        owner = mod.functions.get(general)
        listed = specializations(owner) if isinstance(owner, PrimFunc) else []
        fixed = [f"{v} = {val}" for v, val, n in listed if n == row.name]
        what = f"variant of {general}" + (f" at {fixed[0]}" if fixed else "")
        text = f"{what}: a branch of {general}'s kernel"
    elif SPECIALIZATIONS_ATTR in func.attrs:
        cases = [f"{v} = {val}: {n}" for v, val, n in specializations(func)]
        text = "branches to its variants (" + "; ".join(cases) + ")"
    else:
        return row
    return replace(row, note=f"{row.note}; {text}" if row.note else text)


def _random_array(dt: DataType, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Uniform values in [-1, 1) for floats (bfloat16 aside), zeros otherwise."""
    if dt.is_float and dt.code.value != "bfloat":
        out: np.ndarray = rng.uniform(-1, 1, size=shape).astype(dt.numpy_name())
        return out
    return np.zeros(shape, dtype=dt.numpy_name())


def _shape(dims: Sequence[Expr], env: dict[int, int]) -> tuple[int, ...]:
    """Static extents under ``env``; unknown ones are 1."""
    return tuple(max(eval_shape_expr(e, env) or 1, 0) for e in dims)


def _random_args(func: PrimFunc, shape_vars: Mapping[str, int], seed: int) -> list[object]:
    """Random inputs (zeros for non-floats) for every parameter; unknown extents are 1."""
    rng = np.random.default_rng(seed)
    env: dict[int, int] = {}
    for p in func.params:
        for v in [p] if isinstance(p, Var) else p.shape_vars():
            env.setdefault(id(v), int(shape_vars.get(v.name, 1)))
    args: list[object] = []
    for p in func.params:
        if isinstance(p, Var):
            args.append(env[id(p)])
            continue
        assert isinstance(p, Buffer)
        args.append(_random_array(p.dtype, _shape(p.shape, env), rng))
    return args


def _graph_args(func: Function, shape_vars: Mapping[str, int], seed: int) -> list[np.ndarray]:
    """Random arrays for a graph function's parameters; unknown extents are 1."""
    rng = np.random.default_rng(seed)
    env: dict[int, int] = {}
    for p in func.params:
        for d in p.type.shape:
            if isinstance(d, Var):
                env.setdefault(id(d), int(shape_vars.get(d.name, 1)))
    return [_random_array(p.type.dtype, _shape(p.type.shape, env), rng) for p in func.params]


def _time_alone(
    lib: Any, names: Sequence[str], funcs: Mapping[str, PrimFunc],
    shape_vars: Mapping[str, int], repeat: int,
) -> dict[str, float]:  # fmt: skip
    """Seconds per call of each kernel in ``names``, called alone on random inputs."""
    times = {}
    for name in names:
        args = _random_args(funcs[name], shape_vars, seed=0)
        # a variant is a branch of its general function's kernel: called with its shapes
        kernel = str(funcs[name].attrs.get(SPECIALIZATION_OF_ATTR, name))
        timer = lib.time_evaluator(kernel, number=1, repeat=repeat, min_repeat_ms=2.0)
        times[name] = float(timer(*args).median)
    return times


def _time_forwards(
    exe: Any, shape_vars: Mapping[str, int], repeat: int
) -> tuple[dict[str, float], float]:
    """Per kernel, the median seconds per call inside whole forwards; and the forwards' time.

    Every graph function of ``exe`` runs, after a warm-up, :data:`PROFILED_FORWARDS` (or
    ``repeat``) rounds of one forward with per-kernel timing and one timed whole without it,
    so both see the same warm caches and the same machine load.
    """
    samples: dict[str, list[float]] = {}
    forward = 0.0
    for name, graph in exe.functions.items():
        args = _graph_args(graph.func, shape_vars, seed=0)
        run_whole = exe[name]
        exe.profile(name, *args)  # warm-up: plans and allocates the workspace
        run_whole(*args)
        whole = []
        for _ in range(max(repeat, PROFILED_FORWARDS)):
            per_kernel: dict[str, list[float]] = {}
            for kernel, seconds in exe.profile(name, *args):
                per_kernel.setdefault(kernel, []).append(seconds)
            for kernel, secs in per_kernel.items():
                samples.setdefault(kernel, []).append(sum(secs) / len(secs))
            start = time.perf_counter()
            run_whole(*args)
            whole.append(time.perf_counter() - start)
        forward += statistics.median(whole)
    return {k: statistics.median(v) for k, v in samples.items()}, forward


def _profile(
    rows: list[FunctionReport],
    mod: IRModule,
    funcs: dict[str, PrimFunc],
    target: Target,
    shape_vars: Mapping[str, int],
    repeat: int,
) -> tuple[list[FunctionReport], float, float | None]:
    """Time every function; fill in calls, time, share and the flag. Also the totals."""
    calls = _call_counts(mod)
    forward: float | None = None
    if calls is None:
        lib = build(IRModule(funcs), target)
        times = _time_alone(lib, list(funcs), funcs, shape_vars, repeat)
    else:
        exe = build(IRModule({**mod.functions, **funcs}, mod.attrs), target)
        measured, forward = _time_forwards(exe, shape_vars, repeat)
        times = {n: t for n, t in measured.items() if n in funcs}
        alone = [n for n in funcs if n not in times]  # no forward calls them
        times.update(_time_alone(exe, alone, funcs, shape_vars, repeat))
    weights = {n: (calls.get(n, 0) if calls is not None else 1) for n in funcs}
    total = sum(times[n] * weights[n] for n in funcs)
    out = []
    for row in rows:
        share = times[row.name] * weights[row.name] / total if total > 0 else 0.0
        weak = row.rule in (FALLBACK_RULE, None) and row.status is not Status.ALREADY_SCHEDULED
        flag = weak and share > FLAG_SHARE
        out.append(replace(row, calls=weights[row.name], time_s=times[row.name], share=share,
                           flagged=flag))  # fmt: skip
    return out, total, forward


def explain(
    mod: IRModule,
    rules: Sequence[ScheduleRule],
    target: Target | str | None = None,
    profile: bool = False,
    *,
    shape_vars: Mapping[str, int] | None = None,
    repeat: int = 5,
) -> ExplainReport:
    """Report, per PrimFunc, the rule that takes it and why each earlier rule declined.

    Parameters
    ----------
    mod
        The module (not changed).
    rules
        The rules, in the order ``ApplyDefaultSchedule`` would try them.
    target
        The target (a function's ``target`` attribute still wins); None: the current target.
    profile
        Also build the scheduled module, time each kernel (inside whole runs of the graph
        functions, when the module has them) and compute its share; time the forward too.
    shape_vars
        Values of symbolic extents for profiling, by name (others are 1).
    repeat
        Timing repeats per kernel and forward (the median is reported).

    Returns
    -------
    ExplainReport
        ``print(report)`` shows the table; ``report.to_dict()`` is a plain dict.

    Raises
    ------
    TargetError
        When there is no target.
    RuleError
        When ``mod`` comes straight from an export (graph functions calling operators, no
        PrimFuncs): run ``tc.graph.get_pipeline("default")`` (or ``"zero"``) first.
    """
    _check_legalized(mod)
    tgt = as_target(target) if target is not None else Target.current()
    rows: list[FunctionReport] = []
    funcs: dict[str, PrimFunc] = {}
    for name, func in mod.prim_funcs():
        row, scheduled = _decide(name, func, rules, tgt)
        rows.append(_note_specialization(row, func, mod))
        funcs[name] = scheduled
    shown = str(tgt) if tgt is not None else "from function attributes"
    if not profile or not funcs:
        return ExplainReport(shown, tuple(rows))
    build_target = tgt or function_target(next(iter(funcs.values())))
    timed, total, forward = _profile(rows, mod, funcs, build_target, shape_vars or {}, repeat)
    return ExplainReport(shown, tuple(timed), total, forward)
