"""The one "scheduled" mark: the function attribute ``tc.scheduled`` names who scheduled it.

Every pass that schedules functions (the default rules, the tuning database, library dispatch)
reads the mark through :func:`scheduled_by` / :func:`is_scheduled`, leaves a marked function
alone, and marks what it schedules with :func:`mark_scheduled`. So the passes compose in any
order: the first one to schedule a function owns it.

The values (anything else is an :class:`~tilecraft.errors.IRError`, on writing and reading):

* ``"rule:<Name>"`` -- a rule of ``ApplyDefaultSchedule`` (``"rule:GEMV"``, see :func:`by_rule`);
* ``"database"`` -- a record of a tuning database (``ApplyDatabase``);
* ``"dispatch:<library>"`` -- a call into a vendor library (see :func:`by_dispatch`);
* ``"hand"`` -- a person: mark a hand-written schedule with
  ``mark_scheduled(sch.func, "hand")`` so no pass schedules it again.

Functions written before the mark existed carry older attributes; they are read here, and
only here, as the mark they meant: ``tc.schedule_rule = "<Name>"`` as ``"rule:<Name>"``,
``tc.tuned`` (true) as ``"database"`` and ``tc.is_scheduled`` (true) as ``"hand"``.

The mark describes the function's history, not its meaning: workload keys and structural
hashes used to look up tuning records ignore it.
"""

from __future__ import annotations

from ..errors import IRError
from .function import PrimFunc

SCHEDULED_ATTR = "tc.scheduled"
"""The function attribute holding the mark."""
BY_DATABASE = "database"
"""Mark of a function scheduled from a tuning database record."""
BY_HAND = "hand"
"""Mark of a function scheduled by hand."""
RULE_PREFIX = "rule:"
"""Prefix of the mark of a function scheduled by a rule (followed by the rule's name)."""
DISPATCH_PREFIX = "dispatch:"
"""Prefix of the mark of a function dispatched to a library (followed by its name)."""
RECORD_ATTR = "tc.record"
"""The tuning record a database-scheduled function was replayed from:
``<workload hash>:<sha256 of the record's trace JSON>`` (exported libraries list it)."""

LEGACY_RULE_ATTR = "tc.schedule_rule"
"""Older attribute naming the rule that scheduled a function; read as ``rule:<Name>``."""
LEGACY_TUNED_ATTR = "tc.tuned"
"""Older attribute of a function scheduled from a database; read as ``database``."""
LEGACY_HAND_ATTR = "tc.is_scheduled"
"""Older attribute of a function scheduled by hand; read as ``hand``."""


def _valid_name(name: str) -> bool:
    """A rule or library name: non-empty, printable, without whitespace."""
    return bool(name) and name.isprintable() and not any(c.isspace() for c in name)


def check_scheduled_by(by: object) -> str:
    """``by`` itself when it is a valid mark value; else an IRError saying what is accepted.

    Parameters
    ----------
    by
        A candidate value of ``tc.scheduled``.

    Returns
    -------
    str
        ``by``.

    Raises
    ------
    IRError
        When ``by`` is not ``"database"``, ``"hand"``, ``"rule:<Name>"`` or
        ``"dispatch:<library>"`` with a non-empty name without whitespace.
    """
    if isinstance(by, str):
        if by in (BY_DATABASE, BY_HAND):
            return by
        for prefix in (RULE_PREFIX, DISPATCH_PREFIX):
            if by.startswith(prefix) and _valid_name(by[len(prefix) :]):
                return by
    raise IRError(
        f"{SCHEDULED_ATTR}: expected 'database', 'hand', 'rule:<Name>' or "
        f"'dispatch:<library>' (a name without spaces), got {by!r}"
    )


def by_rule(name: str) -> str:
    """The mark of a function scheduled by the rule ``name`` (``"rule:<name>"``)."""
    return check_scheduled_by(RULE_PREFIX + name if isinstance(name, str) else name)


def by_dispatch(library: str) -> str:
    """The mark of a function dispatched to ``library`` (``"dispatch:<library>"``)."""
    return check_scheduled_by(DISPATCH_PREFIX + library if isinstance(library, str) else library)


def mark_scheduled(func: PrimFunc, by: str) -> PrimFunc:
    """A copy of ``func`` marked as scheduled by ``by``.

    Parameters
    ----------
    func
        The scheduled function.
    by
        Who scheduled it: ``"rule:<Name>"``, ``"database"``, ``"dispatch:<library>"`` or
        ``"hand"``.

    Returns
    -------
    PrimFunc
        ``func`` with ``attrs["tc.scheduled"] = by``.

    Raises
    ------
    IRError
        When ``func`` is not a PrimFunc or ``by`` is not a valid mark.

    Examples
    --------
    >>> sch = tc.Schedule(func)
    >>> sch.parallel(sch.get_loops(sch.get_block("B"))[0])
    >>> mine = tc.ir.mark_scheduled(sch.func, "hand")   # no pass schedules it again
    >>> tc.ir.scheduled_by(mine)
    'hand'
    """
    if not isinstance(func, PrimFunc):
        raise IRError(f"mark_scheduled: expected a PrimFunc, got {type(func).__name__}")
    return func.with_attr(SCHEDULED_ATTR, check_scheduled_by(by))


def scheduled_by(func: PrimFunc) -> str | None:
    """Who scheduled ``func`` (its mark, or the mark an older attribute meant); None if no one.

    Parameters
    ----------
    func
        The function.

    Returns
    -------
    str or None
        ``"rule:<Name>"``, ``"database"``, ``"dispatch:<library>"``, ``"hand"`` or None.

    Raises
    ------
    IRError
        When the function's ``tc.scheduled`` attribute holds an invalid value.
    """
    attrs = func.attrs
    mark = attrs.get(SCHEDULED_ATTR)
    if mark is not None:
        try:
            return check_scheduled_by(mark)
        except IRError as e:
            raise IRError(f"function {func.name!r}: {e}") from e
    rule = attrs.get(LEGACY_RULE_ATTR)
    if isinstance(rule, str) and _valid_name(rule):
        return RULE_PREFIX + rule
    if attrs.get(LEGACY_TUNED_ATTR):
        return BY_DATABASE
    if attrs.get(LEGACY_HAND_ATTR):
        return BY_HAND
    return None


def is_scheduled(func: PrimFunc) -> bool:
    """Whether ``func`` carries the mark (or an older attribute meaning it): see the module."""
    return scheduled_by(func) is not None
