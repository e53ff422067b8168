"""The contract of a schedule rule: look at one PrimFunc for one target, schedule it or decline.

A rule's :meth:`ScheduleRule.apply` returns

* a :class:`~tilecraft.schedule.Schedule` of the function (the rule took it),
* a list of Schedules (several candidates; a tuner with ``tunable=True`` explores them),
* a :class:`Decline` saying why the rule does not apply (shown by ``explain``), or
* ``None``, a decline without a reason (accepted so plain functions work as rules).

Rules use the public Schedule API only, so every result carries a replayable trace. A rule that
meets a pattern it does not handle returns a Decline; it never raises for it.

A rule implements only its schedule: :meth:`ScheduleRule.apply` is a template that first
declines what no rule may touch (an argument that is not a PrimFunc, a target the rule is not
for, a function already scheduled: :func:`already_scheduled`), then resolves the rule's
per-target numbers (the ``config`` given at construction, else ``Config.for_target(target)``)
and calls :meth:`ScheduleRule.schedule`::

    @dataclass(frozen=True)
    class TransposeConfig:
        tile: int = 32

        @classmethod
        def for_target(cls, target: Target) -> TransposeConfig:
            return cls(tile=32 if target.is_gpu else 16)

    class Transpose(GPURule):
        Config = TransposeConfig

        def schedule(self, func, target, config, tunable):
            sch = Schedule(func)             # unscheduled, a GPU target, config.tile set
            ...
            return sch                       # or Decline("why not")
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

from ..ir import PrimFunc, scheduled_by
from ..schedule import Schedule
from ..target import Target
from .common import non_serial_loop


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


def already_scheduled(func: PrimFunc) -> str | None:
    """Why a rule must leave ``func`` alone; None when it may schedule it.

    ``"marked tc.scheduled = 'database'"`` when it carries the one "scheduled" mark
    (:mod:`tilecraft.ir.scheduled`), ``"loop i0 is not serial"`` when a loop is already
    parallel, vectorized, unrolled or thread-bound.
    """
    by = scheduled_by(func)
    if by is not None:
        return f"marked tc.scheduled = {by!r}"
    loop = non_serial_loop(func.body)
    if loop is not None:
        return f"loop {loop.loop_var.name} is not serial"
    return None


class ScheduleRule:
    """Base of rule-based default scheduling rules.

    A subclass implements :meth:`schedule` (the base :meth:`apply` does the common checks and
    resolves the config; see the module docstring), sets :attr:`Config` when it has per-target
    numbers and, when it only makes sense on some targets, overrides
    :meth:`is_target_available`. The rule's :attr:`name` (its class name unless given) is what
    ``ApplyDefaultSchedule`` records in the function's mark, ``tc.scheduled = "rule:<name>"``
    (and in ``tc.schedule_rule``).

    Parameters
    ----------
    config
        Fixed numbers, an instance of the rule's ``Config``; None: ``Config.for_target(target)``
        at apply time.

    Raises
    ------
    TypeError
        When ``config`` is not an instance of the rule's ``Config``.
    """

    name: str = ""
    Config: ClassVar[Any] = None
    """The class of the rule's numbers, with ``for_target(target)``; None: it has none."""

    def __init__(self, config: object = None) -> None:
        if not self.name:
            self.name = type(self).__name__
        kind = self.Config
        if config is not None and isinstance(kind, type) and not isinstance(config, kind):
            raise TypeError(
                f"{type(self).__name__}: argument 'config': expected a {kind.__qualname__}, "
                f"got {type(config).__name__}"
            )
        self.config = config

    def apply(self, func: PrimFunc, target: Target, tunable: bool = False) -> RuleResult:
        """Schedule ``func`` for ``target``, or decline.

        Declines an argument that is not a PrimFunc, a target the rule is not for
        (:meth:`is_target_available`) and a function already scheduled
        (:func:`already_scheduled`; see :meth:`when_scheduled`); else calls
        :meth:`schedule` with the config for ``target`` (:meth:`config_for`).

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
        if not isinstance(func, PrimFunc):
            return Decline(f"not a PrimFunc: {type(func).__name__}")
        if not isinstance(target, Target) or not self.is_target_available(target):
            return Decline(self.unavailable_reason(target))
        why = already_scheduled(func)
        if why is not None:
            return self.when_scheduled(func, why)
        return self.schedule(func, target, self.config_for(target), tunable)

    def schedule(self, func: PrimFunc, target: Target, config: Any, tunable: bool) -> RuleResult:
        """The rule's own work: schedule ``func`` (unscheduled, for an available target).

        Parameters
        ----------
        func
            An unscheduled PrimFunc.
        target
            The target, one :meth:`is_target_available` accepts.
        config
            The rule's numbers for ``target``: an instance of the rule's own ``Config`` (each
            rule annotates its own type), None for a rule without one.
        tunable
            See :meth:`apply`.

        Returns
        -------
        Schedule, list of Schedule, Decline or None
            See the module docstring.
        """
        raise NotImplementedError(f"{type(self).__name__}.schedule")

    def config_for(self, target: Target) -> object:
        """The ``config`` given at construction, else ``Config.for_target(target)`` (None for
        a rule without ``Config``)."""
        if self.config is not None:
            return self.config
        if self.Config is None:
            return None
        return self.Config.for_target(target)

    def when_scheduled(self, func: PrimFunc, reason: str) -> RuleResult:
        """What :meth:`apply` returns for a function already scheduled (default: a Decline
        ``"already scheduled: <reason>"``)."""
        return Decline(f"already scheduled: {reason}")

    def unavailable_reason(self, target: object) -> str:
        """The Decline reason for a target the rule is not for."""
        return f"rule {self.name} does not apply to the target {target}"

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
            The rule's name (recorded in the ``tc.scheduled`` mark and shown by ``explain``).
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
        super().__init__()
        self.fn = fn
        self.target_kinds = target_kinds
        self.__doc__ = fn.__doc__

    def schedule(self, func: PrimFunc, target: Target, config: None, tunable: bool) -> RuleResult:
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

    def unavailable_reason(self, target: object) -> str:
        """``"a CPU rule; the target is <target>"``."""
        return f"a CPU rule; the target is {target}"


class GPURule(ScheduleRule):
    """A rule for GPU (CUDA) targets."""

    def is_target_available(self, target: Target) -> bool:
        """True for CUDA targets."""
        return target.is_gpu

    def unavailable_reason(self, target: object) -> str:
        """``"a GPU rule; the target is <target>"``."""
        return f"a GPU rule; the target is {target}"
