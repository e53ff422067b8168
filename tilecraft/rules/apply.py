"""``ApplyDefaultSchedule``: schedule every unscheduled PrimFunc of a module with ordered rules.

A pure ``IRModule => IRModule`` pass. For each PrimFunc, in module order:

1. **Skip it when it is already scheduled** (:func:`scheduled_reason`): it carries the
   ``tc.scheduled`` mark (:mod:`tilecraft.ir.scheduled`: set by this pass as
   ``rule:<Name>``, by ``ApplyDatabase`` as ``database``, by a dispatch pass, or by a person
   with ``tc.ir.mark_scheduled(func, "hand")``; the older ``tc.schedule_rule`` and
   ``tc.is_scheduled`` attributes count too), it was lowered (``tc.lowered``), or its body
   already has a loop that is not serial (parallel, vectorized, unrolled or thread-bound):
   someone scheduled it. A hand schedule made only of serial loop rewrites is not
   recognised; mark it ``hand``.
2. **Pick the target**: the function's ``target`` attribute (a target string) when present,
   else the current target (``with tc.Target(...):``); no target is a ``TargetError``.
3. **Try the rules in order**, skipping those whose ``is_target_available`` is false. The
   first rule returning a Schedule (or a non-empty list of them: the default path takes the
   *first* candidate; the others are for a tuner) wins; its function replaces the original,
   marked ``tc.scheduled = "rule:<Name>"`` and with ``tc.schedule_rule`` set to the rule's
   name. A rule returning ``None`` or a
   :class:`~tilecraft.rules.Decline`, or raising :class:`~tilecraft.errors.ScheduleError`
   (a primitive or an analysis helper rejecting what the rule asked), declines with that
   reason. Any other exception is the rule's own bug: by default it becomes a decline
   carrying the traceback, logged as a warning on the ``"tilecraft"`` logger, and the next
   rule is tried; with ``strict=True`` it raises :class:`RuleError`. A rule never brings the
   pass down otherwise. A function no rule takes stays as it was.

The input module is never changed (modules and functions are immutable; the pass builds a new
module). ``ApplyDefaultSchedule`` has ``transform_module(mod)`` and ``__call__(mod)``, the
shape of ``tilecraft.ir.transform.ModulePass``: once that exists, derive from it (only the base
class in the ``class`` line changes).
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import IRError, ScheduleError, TilecraftError
from ..ir import IRModule, PrimFunc
from ..ir.scheduled import LEGACY_HAND_ATTR, LEGACY_RULE_ATTR, by_rule, mark_scheduled, scheduled_by
from ..ir.transform import ModulePass
from ..schedule import Schedule
from ..target import Target, TargetError
from .base import Decline, ScheduleRule
from .common import non_serial_loop

SCHEDULE_RULE_ATTR = LEGACY_RULE_ATTR
"""Function attribute naming the rule that scheduled the function (beside ``tc.scheduled``)."""
IS_SCHEDULED_ATTR = LEGACY_HAND_ATTR
"""Older attribute marking a function scheduled by hand; prefer ``mark_scheduled(f, "hand")``."""
LOWERED_ATTR = "tc.lowered"
"""Function attribute set by lowering (see ``tilecraft.lower.pipeline``)."""
TARGET_ATTR = "target"
"""Function attribute holding a target string; it overrides the current target."""

logger = logging.getLogger("tilecraft")


class RuleError(TilecraftError):
    """A rule raised something other than ScheduleError, or returned something invalid.

    Raised by ``ApplyDefaultSchedule(..., strict=True)``; the rule's own exception is the
    ``__cause__``.
    """


@dataclass(frozen=True)
class RuleOutcome:
    """What happened when the rules were tried on one function.

    Attributes
    ----------
    rule
        Name of the rule that took the function; None when none did.
    schedule
        That rule's schedule (the first candidate of a list); None when no rule took it.
    declines
        ``(rule name, Decline)`` for every rule tried before (all tried rules when none took
        it), in order.
    unavailable
        Names of the rules skipped because they do not apply to the target.
    """

    rule: str | None
    schedule: Schedule | None
    declines: tuple[tuple[str, Decline], ...]
    unavailable: tuple[str, ...]


def scheduled_reason(func: PrimFunc) -> str | None:
    """Why ``func`` counts as already scheduled (module docstring); None when it does not.

    Parameters
    ----------
    func
        The function to look at.

    Returns
    -------
    str or None
        ``"tc.scheduled = 'rule:Matmul'"`` (or another mark), ``"lowered"`` or
        ``"has a parallel loop 'i0'"``; None for an unscheduled function.

    Raises
    ------
    IRError
        When the function's ``tc.scheduled`` attribute is not a valid mark.
    """
    by = scheduled_by(func)
    if by is not None:
        return f"tc.scheduled = {by!r}"
    if func.attrs.get(LOWERED_ATTR):
        return "lowered"
    loop = non_serial_loop(func.body)
    if loop is not None:
        return f"has a {loop.kind.value} loop {loop.loop_var.name!r}"
    return None


def is_scheduled(func: PrimFunc) -> bool:
    """Whether ``func`` counts as already scheduled (see :func:`scheduled_reason`)."""
    return scheduled_reason(func) is not None


def function_target(func: PrimFunc, default: Target | None = None) -> Target:
    """The target to schedule ``func`` for: its ``target`` attribute, else ``default``, else the
    current target.

    Raises
    ------
    TargetError
        When the attribute is not a valid target string, or there is no target at all.
    """
    spec = func.attrs.get(TARGET_ATTR)
    if spec is not None:
        if not isinstance(spec, str):
            raise TargetError(
                f"function {func.name}: attribute {TARGET_ATTR!r} must be a target string, "
                f"got {spec!r}"
            )
        return Target(spec)
    target = default or Target.current()
    if target is None:
        raise TargetError(
            f"no target to schedule function {func.name!r} for: give it a {TARGET_ATTR!r} "
            "attribute or run the pass inside `with tc.Target(...):`"
        )
    return target


def _bug(rule: ScheduleRule, func: PrimFunc, what: str, strict: bool, cause: Exception) -> Decline:
    """A decline for a rule's own bug, or RuleError under strict."""
    message = f"rule {rule.name!r} {what} on function {func.name!r}"
    if strict:
        raise RuleError(message) from cause
    detail = "".join(traceback.format_exception(type(cause), cause, cause.__traceback__))
    logger.warning("%s; the rule is skipped for this function\n%s", message, detail)
    return Decline(f"rule bug: {what}", detail=detail)


def _call_rule(
    rule: ScheduleRule, func: PrimFunc, target: Target, tunable: bool, strict: bool
) -> Schedule | Decline:
    """Run one rule: its schedule (the first of a list), or a decline saying why not."""
    try:
        result = rule.apply(func, target, tunable)
    except ScheduleError as e:
        return Decline(f"{e.primitive}: {e.short}", detail=str(e))
    except Exception as e:  # noqa: BLE001 -- a rule's bug must not bring the pass down
        return _bug(rule, func, f"raised {type(e).__name__}: {e}", strict, e)
    if isinstance(result, Schedule):
        return result
    if isinstance(result, Decline):
        return result
    if result is None:
        return Decline("declined (no reason given)")
    if isinstance(result, list) and all(isinstance(s, Schedule) for s in result):
        return result[0] if result else Decline("returned no candidate schedules")
    bad = TypeError(f"expected Schedule, list of Schedule, Decline or None, got {result!r}")
    return _bug(rule, func, f"returned a {type(result).__name__}", strict, bad)


def try_rules(
    func: PrimFunc,
    rules: Sequence[ScheduleRule],
    target: Target,
    *,
    strict: bool = False,
    tunable: bool = False,
) -> RuleOutcome:
    """Try ``rules`` in order on ``func`` for ``target``; the first acceptance wins.

    Parameters
    ----------
    func
        An unscheduled PrimFunc.
    rules
        The rules, most specific first.
    target
        The target.
    strict
        Raise :class:`RuleError` when a rule has a bug instead of declining for it.
    tunable
        Passed to each rule's ``apply``.

    Returns
    -------
    RuleOutcome
        The winner (if any), its schedule, the declines before it, the unavailable rules.
    """
    declines: list[tuple[str, Decline]] = []
    unavailable: list[str] = []
    for rule in rules:
        if not rule.is_target_available(target):
            unavailable.append(rule.name)
            continue
        got = _call_rule(rule, func, target, tunable, strict)
        if isinstance(got, Schedule):
            return RuleOutcome(rule.name, got, tuple(declines), tuple(unavailable))
        declines.append((rule.name, got))
    return RuleOutcome(None, None, tuple(declines), tuple(unavailable))


def _check_rules(rules: Sequence[object]) -> tuple[ScheduleRule, ...]:
    for n, rule in enumerate(rules):
        if not isinstance(rule, ScheduleRule):
            hint = " (from_callable already returns an instance: do not call it)"
            raise TypeError(
                f"ApplyDefaultSchedule: argument {n} must be a ScheduleRule, got "
                f"{type(rule).__name__}{hint if callable(rule) else ''}"
            )
        try:  # the name becomes the mark "rule:<Name>": check it before any function
            by_rule(rule.name)
        except IRError as e:
            raise RuleError(f"ApplyDefaultSchedule: rule {n} has an unusable name: {e}") from e
    return tuple(rules)  # type: ignore[arg-type]


class ApplyDefaultSchedule(ModulePass):
    """Schedule each unscheduled PrimFunc with the first rule that takes it (module docstring).

    Parameters
    ----------
    *rules
        Rule instances, most specific first (``Fallback`` last).
    strict
        When True, a rule's bug (an exception other than ScheduleError, or an invalid return
        value) raises :class:`RuleError` instead of becoming a logged decline. Tests use it.

    Examples
    --------
    >>> with tc.Target("cpu"):
    ...     mod = ApplyDefaultSchedule(cpu.Matmul(), cpu.GEMV())(mod)
    >>> mod["fused_matmul_add_relu"].attrs["tc.schedule_rule"]
    'GEMV'
    """

    def __init__(self, *rules: ScheduleRule, strict: bool = False) -> None:
        self.rules = _check_rules(rules)
        self.strict = strict

    def transform_module(self, mod: IRModule) -> IRModule:
        """The module with every unscheduled PrimFunc scheduled where a rule takes it.

        Parameters
        ----------
        mod
            The module; it is not changed.

        Returns
        -------
        IRModule
            A new module (``mod`` itself when nothing was scheduled).

        Raises
        ------
        TargetError
            When a function to schedule has no target (see :func:`function_target`).
        RuleError
            Under ``strict=True``, when a rule has a bug.
        """
        if not isinstance(mod, IRModule):
            raise TypeError(f"ApplyDefaultSchedule: expected an IRModule, got {type(mod).__name__}")
        out = mod
        for name, func in mod.prim_funcs():
            if is_scheduled(func):
                continue
            outcome = try_rules(func, self.rules, function_target(func), strict=self.strict)
            if outcome.schedule is not None:
                assert outcome.rule is not None
                new = outcome.schedule.func.with_attr(SCHEDULE_RULE_ATTR, outcome.rule)
                out = out.with_function(name, mark_scheduled(new, by_rule(outcome.rule)))
        return out

    def __repr__(self) -> str:
        names = ", ".join(r.name for r in self.rules)
        return f"ApplyDefaultSchedule({names}{', strict=True' if self.strict else ''})"
