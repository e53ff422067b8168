"""Test helpers for schedules (re-exported by :mod:`tilecraft.testing`)."""

from __future__ import annotations

from ..errors import ScheduleError
from ..ir import IRModule, PrimFunc, structural_equal
from .schedule import Schedule
from .trace import Trace


def verify_trace_roundtrip(sch: Schedule, original: PrimFunc | IRModule) -> Schedule:
    """Check that ``sch``'s trace reproduces ``sch.func`` from ``original``.

    Three replays onto fresh schedules of ``original`` must give a function structurally
    equal to ``sch.func``: the live trace, the trace after a JSON round trip (whose JSON and
    Python text must also be identical to the original's). Returns the JSON-replayed schedule.

    Raises
    ------
    AssertionError
        On any mismatch.
    """
    trace = sch.trace
    live = Schedule(original, func_name=sch.func_name)
    trace.apply_to_schedule(live)
    if not structural_equal(live.func, sch.func):
        raise AssertionError("replaying the trace does not reproduce the scheduled function")
    text = trace.as_json()
    loaded = Trace.from_json(text)
    if loaded.as_json() != text:
        raise AssertionError("trace JSON does not round-trip exactly")
    if loaded.as_python() != trace.as_python():
        raise AssertionError("trace Python text differs after a JSON round trip")
    again = Schedule(original, func_name=sch.func_name)
    loaded.apply_to_schedule(again)
    if not structural_equal(again.func, sch.func):
        raise AssertionError("replaying the JSON trace does not reproduce the scheduled function")
    if again.trace.as_python() != trace.as_python():
        raise AssertionError("the replayed schedule records a different trace")
    return again


def assert_fails_unchanged(
    sch: Schedule, fn_name: str, *args: object, match: str = "", **kwargs: object
) -> ScheduleError:
    """Call ``getattr(sch, fn_name)(*args, **kwargs)``; require a ScheduleError whose text
    contains ``match`` and that the function object and trace are exactly as before."""
    func, n = sch.func, len(sch.trace)
    try:
        getattr(sch, fn_name)(*args, **kwargs)
    except ScheduleError as e:
        if match and match not in str(e):
            raise AssertionError(f"error text lacks {match!r}:\n{e}") from e
        if sch.func is not func or len(sch.trace) != n:
            raise AssertionError(f"{fn_name} failed but changed the schedule") from e
        return e
    raise AssertionError(f"{fn_name} did not raise ScheduleError")
