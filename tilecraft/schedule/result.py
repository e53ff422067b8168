"""The outcome of :meth:`Schedule.try_ <tilecraft.schedule.Schedule.try_>`.

A primitive may return ``None`` on success (``reorder``, ``compute_at``), so ``None`` cannot
also mean "it failed". :class:`TryResult` keeps the two apart: it is truthy only on success,
holds the primitive's return value (``None`` included) in :attr:`TryResult.value`, and the
:class:`~tilecraft.errors.ScheduleError` of a failure in :attr:`TryResult.error`.

Examples
--------
>>> parts = sch.try_(sch.split, loop, [None, 8])
>>> if parts:                      # success (even when the value is None)
...     outer, inner = parts.value
... else:
...     print(parts.error.short)   # why it failed; the schedule is unchanged
>>> inner = sch.try_(sch.split, loop, [None, 8]).value_or(None)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from ..errors import ScheduleError

_T = TypeVar("_T")
_D = TypeVar("_D")

_NO_VALUE: object = object()


@dataclass(frozen=True, slots=True, eq=False)
class TryResult(Generic[_T]):
    """Success with a value, or failure with the ScheduleError that undid the call.

    Build one with :meth:`success` or :meth:`failure`. ``bool(result)`` is ``result.ok``.

    Attributes
    ----------
    error
        The error of a failed call; None on success.
    """

    _value: _T | object
    error: ScheduleError | None

    @staticmethod
    def success(value: _D) -> TryResult[_D]:
        """The result of a call that returned ``value`` (which may be None)."""
        return TryResult(value, None)

    @staticmethod
    def failure(error: ScheduleError) -> TryResult[_D]:
        """The result of a call that raised ``error`` (and was undone)."""
        if not isinstance(error, ScheduleError):
            raise TypeError(f"TryResult.failure needs a ScheduleError, got {type(error).__name__}")
        return TryResult(_NO_VALUE, error)

    @property
    def ok(self) -> bool:
        """Whether the call succeeded."""
        return self.error is None

    def __bool__(self) -> bool:
        return self.error is None

    @property
    def value(self) -> _T:
        """The call's return value; on a failure, raises the call's ScheduleError again."""
        if self.error is not None:
            raise self.error
        return self._value  # type: ignore[return-value]

    def value_or(self, default: _D) -> _T | _D:
        """The call's return value on success, ``default`` on failure."""
        if self.error is not None:
            return default
        return self._value  # type: ignore[return-value]

    def __repr__(self) -> str:
        if self.error is not None:
            return f"TryResult.failure({self.error.primitive}: {self.error.short})"
        return f"TryResult.success({self._value!r})"
