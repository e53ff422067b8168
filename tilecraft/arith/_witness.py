"""Witnesses for the bounds checks of ``tc.ir.verify``: iterations that provably go out of range.

A claim "``D >= 0`` at some iteration" is accepted only with a witness. Each loop variable
around the access takes its first or last value, whichever does not decrease ``D`` (decided by
the caller's analyzer, which knows the loop ranges; undecided means no witness). Writing ``F``
for the variables left (sizes, scalar parameters, data-dependent values) and ``H(F)`` for
"every loop around the access has at least one iteration at the witness", the witness stands
only when

1. for every ``F`` with ``H(F)``, the guards hold at the witness and ``D >= 0`` there — proved
   by a fresh :class:`~tilecraft.arith.Analyzer` that knows only that sizes are non-negative
   (no loop ranges, no assumptions from the walk), and
2. some concrete ``F`` satisfies ``H``, the guards and ``D >= 0`` (evaluated), so the claim is
   not vacuous.

So the access goes out of range on every input that runs its loops at all; a function that is
wrong only for some sizes (``A[i]`` for ``i < n`` on a buffer of ``m`` elements) is not
reported.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import TilecraftError
from ..ir import And, Expr, IntImm, Range, Var, collect_vars, substitute
from .analyzer import Analyzer
from .evaluate import evaluate

_TRIAL_VALUES = (1, 2, 3, 4, 5, 7, 8, 16, 32, 64, 128, 1024)
_RANDOM_TRIALS = 24
ANALYSIS_ERRORS = (TilecraftError, ArithmeticError, RecursionError)


@dataclass(frozen=True)
class Loop:
    """A loop around the access: ``var`` in ``[min, min + extent)`` (in loop space)."""

    var: Var
    min: Expr
    extent: Expr


@dataclass(frozen=True)
class Witness:
    """Loop values (expressions of the free variables) and one concrete free assignment."""

    loops: tuple[tuple[Var, Expr], ...]
    example: Mapping[Var, int]

    def values(self) -> dict[Var, int]:
        """Every loop variable and free variable as a concrete integer."""
        env: dict[Var, int] = dict(self.example)
        for var, value in self.loops:
            env[var] = int(evaluate(value, env))
        return env

    def describe(self) -> str:
        """``at i = 127, k = 0 (with n = 1)``."""
        env = self.values()
        at = ", ".join(f"{v.name} = {env[v]}" for v, _ in self.loops) or "every iteration"
        free = ", ".join(f"{v.name} = {n}" for v, n in self.example.items())
        return f"at {at}" + (f" (with {free})" if free else "")


def same_dtype(a: Expr, b: Expr) -> tuple[Expr, Expr]:
    """``a`` and ``b`` as one integer dtype (the wider, int64 when they differ)."""
    if a.dtype == b.dtype:
        return a, b
    from ..ir import cast

    return cast(a, "int64"), cast(b, "int64")


def proves(ana: Analyzer, cond: Expr) -> bool:
    """``ana.can_prove(cond)``; False when the analysis cannot handle the expression."""
    try:
        return ana.can_prove(cond)
    except ANALYSIS_ERRORS:
        return False


def direction(ana: Analyzer, d: Expr, var: Var) -> int | None:
    """+1 if ``d`` never decreases as ``var`` grows, -1 if it never increases, else None."""
    try:
        step = substitute(d, {var: var + 1})
        a, b = same_dtype(step, d)
        delta = ana.simplify(a - b)
    except ANALYSIS_ERRORS:
        return None
    zero = IntImm(delta.dtype, 0)
    if proves(ana, delta >= zero):
        return 1
    if proves(ana, delta <= zero):
        return -1
    return None


def find_witness(
    ana: Analyzer,
    d: Expr,
    loops: Sequence[Loop],
    guards: Sequence[Expr],
    sizes: Sequence[Var],
) -> Witness | None:
    """An iteration where ``d >= 0`` (see the module docstring), or None."""
    used = {id(v) for v in collect_vars(d)}
    point: dict[Var, Expr] = {}
    extents: list[Expr] = []
    try:
        for loop in loops:
            lo = substitute(loop.min, point)
            ext = substitute(loop.extent, point)
            value = lo
            if id(loop.var) in used:
                way = direction(ana, d, loop.var)
                if way is None:
                    return None
                if way > 0:
                    value = lo + ext - IntImm(ext.dtype, 1)
            point[loop.var] = value
            extents.append(ext)
        dw = substitute(d, point)
        gw = [substitute(g, point) for g in guards]
    except ANALYSIS_ERRORS:
        return None
    holds = [dw >= IntImm(dw.dtype, 0), *gw]
    hyps = [e >= IntImm(e.dtype, 1) for e in extents]
    if not _proved_for_all(holds, hyps, sizes):
        return None
    example = _example(holds, hyps)
    if example is None:
        return None
    return Witness(tuple(point.items()), example)


def _proved_for_all(holds: list[Expr], hyps: list[Expr], sizes: Sequence[Var]) -> bool:
    """Every ``holds`` is provable assuming ``hyps`` and non-negative ``sizes``."""
    free = {id(v) for e in (*holds, *hyps) for v in collect_vars(e)}
    if not free:
        return True  # decided by evaluation in _example
    ana = Analyzer()
    for v in sizes:
        if id(v) in free:
            ana.bind(v, Range(IntImm(v.dtype, 0), IntImm(v.dtype, 2 ** (v.dtype.bits - 1) - 1)))
    hyp: Expr | None = None
    for h in hyps:
        hyp = h if hyp is None else And(hyp, h)
    try:
        if hyp is None:
            return all(proves(ana, c) for c in holds)
        with ana.constraint(hyp):
            return all(proves(ana, c) for c in holds)
    except ANALYSIS_ERRORS:
        return False


def _example(holds: list[Expr], hyps: list[Expr]) -> dict[Var, int] | None:
    """A concrete assignment of the free variables under which everything evaluates true."""
    conds = [*hyps, *holds]
    free: dict[int, Var] = {}
    for c in conds:
        for v in collect_vars(c):
            free.setdefault(id(v), v)
    names = list(free.values())
    rng = random.Random(0)
    trials = [dict.fromkeys(names, c) for c in _TRIAL_VALUES] if names else [{}]
    if names:
        trials += [{v: rng.choice(_TRIAL_VALUES) for v in names} for _ in range(_RANDOM_TRIALS)]
    for env in trials:
        try:
            if all(evaluate(c, env) for c in conds):
                return env
        except ANALYSIS_ERRORS:
            return None  # data-dependent (a load) or otherwise not evaluable
    return None
