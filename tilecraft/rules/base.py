"""The contract of a schedule rule: look at one PrimFunc for one target, schedule it or decline.

A rule's :meth:`ScheduleRule.apply` returns

* a :class:`~tilecraft.schedule.Schedule` of the function (the rule took it),
* a list of Schedules (several candidates; a tuner with ``tunable=True`` explores them),
* a :class:`Decline` saying why the rule does not apply (shown by ``explain``), or
* ``None``, a decline without a reason (accepted so plain functions work as rules).

Rules use the public Schedule API only, so every result carries a replayable trace. A rule that
meets a pattern it does not handle returns a Decline; it never raises for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

from ..ir import PrimFunc
from ..schedule import Schedule
from ..target import Target


@dataclass(frozen=True)
class Decline:
    """A rule's refusal to schedule a function, with the reason.

    Attributes
    ----------
    reason
        One line for a person reading the explain report ("needs exactly one reduction block").
    detail
        Optional longer text (a traceback when the refusal comes from a rule's own bug).
    """

    reason: str
    detail: str = ""

    def __str__(self) -> str:
        return self.reason


RuleResult: TypeAlias = Schedule | list[Schedule] | Decline | None
RuleFunction: TypeAlias = Callable[[PrimFunc, Target, bool], RuleResult]


class ScheduleRule:
    """Base of rule-based default scheduling rules.

    Subclasses override :meth:`apply` and, when they only make sense on some targets,
    :meth:`is_target_available`. The rule's :attr:`name` (its class name unless given) is what
    ``ApplyDefaultSchedule`` records in the function attribute ``tc.schedule_rule``.
    """

    name: str = ""

    def __init__(self) -> None:
        if not self.name:
            self.name = type(self).__name__

    def apply(self, func: PrimFunc, target: Target, tunable: bool) -> RuleResult:
        """Schedule ``func`` for ``target``, or decline.

        Parameters
        ----------
        func
            An unscheduled PrimFunc.
        target
            The target to schedule for.
        tunable
            When True the rule may return several candidate schedules, or schedules whose
            decisions come from sampling instructions, for a tuner to explore.

        Returns
        -------
        Schedule, list of Schedule, Decline or None
            See the module docstring.
        """
        raise NotImplementedError(f"{type(self).__name__}.apply")

    def is_target_available(self, target: Target) -> bool:
        """Whether the rule can schedule for ``target`` at all (default: every target)."""
        return True

    @staticmethod
    def from_callable(
        name: str, *, target_kinds: tuple[str, ...] | None = None
    ) -> Callable[[RuleFunction], ScheduleRule]:
        """Turn a function ``fn(func, target, tunable)`` into a rule instance named ``name``.

        Parameters
        ----------
        name
            The rule's name (recorded in ``tc.schedule_rule`` and shown by ``explain``).
        target_kinds
            Target kinds (``"cpu"``, ``"cuda"``) the rule applies to; None: every target.

        Examples
        --------
        >>> @ScheduleRule.from_callable("MyTileAndBind")
        ... def my_rule(func, target, tunable):
        ...     return None
        >>> my_rule.name
        'MyTileAndBind'
        """

        def wrap(fn: RuleFunction) -> ScheduleRule:
            return _CallableRule(name, fn, target_kinds)

        return wrap

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class _CallableRule(ScheduleRule):
    """A rule made by :meth:`ScheduleRule.from_callable`."""

    def __init__(self, name: str, fn: RuleFunction, target_kinds: tuple[str, ...] | None) -> None:
        self.name = name
        self.fn = fn
        self.target_kinds = target_kinds
        self.__doc__ = fn.__doc__

    def apply(self, func: PrimFunc, target: Target, tunable: bool) -> RuleResult:
        """Call the wrapped function."""
        return self.fn(func, target, tunable)

    def is_target_available(self, target: Target) -> bool:
        """True when no kinds were given or the target's kind is one of them."""
        return self.target_kinds is None or target.kind in self.target_kinds


class CPURule(ScheduleRule):
    """A rule for CPU targets."""

    def is_target_available(self, target: Target) -> bool:
        """True for CPU targets."""
        return target.kind == "cpu"


class GPURule(ScheduleRule):
    """A rule for GPU (CUDA) targets."""

    def is_target_available(self, target: Target) -> bool:
        """True for CUDA targets."""
        return target.is_gpu
