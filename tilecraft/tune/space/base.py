"""Design spaces: where candidates come from.

A space turns the unscheduled function into schedules whose traces record every sampling
decision (``sample_perfect_tile``, ``sample_categorical``, ``sample_compute_location``), so a
search strategy can draw new decisions and replay them. Two ways to give one:

* :class:`ScheduleFnSpace` wraps a schedule function ``fn(sch)`` that applies primitives to
  a fresh, seeded schedule (returning None, the schedule, or several schedules);
* :class:`RuleSpace` wraps any object with ``apply(func, target, tunable)`` returning a
  Schedule, a list of them, or something else (None, a ``Decline``) when it does not apply:
  the shape of :class:`tilecraft.rules.ScheduleRule`, called with ``tunable=True``.

The spaces are data: the decisions live in the trace, not in Python state.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from ...errors import ScheduleError, TuneError
from ...ir import PrimFunc
from ...schedule import Schedule, Trace
from ...target import Target

ScheduleFn = Callable[[Schedule], "Schedule | Sequence[Schedule] | None"]


@runtime_checkable
class TunableRule(Protocol):
    """Anything with a rule's ``apply(func, target, tunable)``."""

    def apply(self, func: PrimFunc, target: Target, tunable: bool) -> object:
        """A Schedule, a list of Schedules, or something else when the rule does not apply."""


class SpaceGenerator(ABC):
    """Produces sampled schedules of a function (the design space's sketches)."""

    name = "space"

    @abstractmethod
    def generate(self, func: PrimFunc, target: Target, seed: int) -> list[Schedule]:
        """Schedules of ``func`` sampled with ``seed``; empty when the space does not apply.

        Raises
        ------
        ScheduleError
            When sampling produced an invalid schedule (the caller draws again).
        """


def _schedules(value: object, where: str) -> list[Schedule]:
    if isinstance(value, Schedule):
        return [value]
    if isinstance(value, Sequence) and all(isinstance(s, Schedule) for s in value):
        return list(value)
    raise TuneError(f"{where}: expected None, a Schedule or a list of Schedules, got {value!r}")


class ScheduleFnSpace(SpaceGenerator):
    """The space of a schedule function.

    Parameters
    ----------
    fn
        ``fn(sch)`` schedules ``sch`` (a fresh schedule of the function, seeded by the
        search) and returns None (``sch`` is the result), a Schedule, or a list of them.
    name
        Shown in logs (default: the function's name).
    """

    def __init__(self, fn: ScheduleFn, name: str | None = None) -> None:
        if not callable(fn):
            raise TuneError(f"ScheduleFnSpace: expected a callable, got {fn!r}")
        self.fn = fn
        self.name = name or str(getattr(fn, "__name__", "schedule_fn"))

    def generate(self, func: PrimFunc, target: Target, seed: int) -> list[Schedule]:
        """Run the function on a fresh schedule seeded with ``seed``."""
        sch = Schedule(func, seed=seed)
        out = self.fn(sch)
        return [sch] if out is None else _schedules(out, f"schedule function {self.name}")


def resampled(func: PrimFunc, trace: Trace, seed: int) -> Schedule:
    """``trace`` replayed on a fresh schedule of ``func`` with every decision drawn anew.

    Raises
    ------
    ScheduleError
        When a new decision does not fit (the caller draws again).
    """
    cleared = trace
    for index in trace.sampling_indices():
        cleared = cleared.with_decision(index, None)
    sch = Schedule(func, seed=seed)
    cleared.apply_to_schedule(sch)
    return sch


class RuleSpace(SpaceGenerator):
    """The space of a schedule rule applied with ``tunable=True``.

    The rule gives the structure; its sampling decisions are drawn again from the search's
    seed (by replaying its trace), so tuning with a rule is reproducible whatever seed the
    rule used inside.

    Parameters
    ----------
    rule
        An object with ``apply(func, target, tunable)``.
    name
        Shown in logs (default: the rule's ``name`` or class name).
    """

    def __init__(self, rule: TunableRule, name: str | None = None) -> None:
        if not isinstance(rule, TunableRule):
            raise TuneError(f"RuleSpace: expected an object with apply(), got {rule!r}")
        self.rule = rule
        self.name = name or str(getattr(rule, "name", type(rule).__name__))

    def generate(self, func: PrimFunc, target: Target, seed: int) -> list[Schedule]:
        """Apply the rule, then re-draw each result's decisions from ``seed``."""
        out = self.rule.apply(func, target, True)
        if not isinstance(out, Schedule | list | tuple):
            return []  # None or a Decline: the rule does not apply to this function
        found = _schedules(out, f"rule {self.name}")
        result: list[Schedule] = []
        for i, sch in enumerate(found):
            try:
                result.append(resampled(func, sch.trace, seed + i))
            except ScheduleError:
                result.append(sch)  # keep the rule's own sample when a re-draw does not fit
        return result


class UnionSpace(SpaceGenerator):
    """The sketches of several spaces together (a space that does not apply adds none).

    Parameters
    ----------
    spaces
        The spaces, in order.
    name
        Shown in logs.
    """

    def __init__(self, spaces: Sequence[SpaceGenerator], name: str = "union") -> None:
        bad = [sp for sp in spaces if not isinstance(sp, SpaceGenerator)]
        if bad:
            raise TuneError(f"UnionSpace: expected SpaceGenerator objects, got {bad[0]!r}")
        self.spaces = list(spaces)
        self.name = name

    def generate(self, func: PrimFunc, target: Target, seed: int) -> list[Schedule]:
        """Every space's sketches, each space seeded from ``seed``."""
        return [s for i, sp in enumerate(self.spaces) for s in sp.generate(func, target, seed + i)]


SpaceLike = SpaceGenerator | TunableRule | ScheduleFn


def as_space(space: SpaceLike) -> SpaceGenerator:
    """A SpaceGenerator from a space, a rule or a schedule function."""
    if isinstance(space, SpaceGenerator):
        return space
    if isinstance(space, TunableRule):
        return RuleSpace(space)
    if callable(space):
        return ScheduleFnSpace(space)
    raise TuneError(
        f"space: expected a SpaceGenerator, a rule or a schedule function, got {space!r}"
    )
