"""Argument checks of schedule primitives, derived from their annotations.

Every primitive registered with :func:`~tilecraft.schedule.instruction.primitive` validates
each argument before it runs, with a :class:`Check` taken from the parameter's annotation:
``loop: LoopRV`` accepts only a loop handle, ``factor_axis: int`` an int (not a bool),
``consumer_blocks: Sequence[BlockRV] | None`` a list or tuple of block handles or None.
``Annotated[...]`` refines a type with a value check, for example
``storage_scope: Annotated[str, OneOf(SCOPES)]`` or ``n: Annotated[int, POSITIVE_INT]``;
the check in the annotation replaces the one the type alone would give.

A failed check reads, Exo-style::

    split: argument 'factors': expected a sequence of positive int or None, got 5

The same checks run on a loaded trace (:meth:`Trace.from_json`), so a trace that loads only
holds values its primitives accept.
"""

from __future__ import annotations

import math
import numbers
import reprlib
import types
import typing
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal, Union

from ..errors import ScheduleError
from .handles import BlockRV, ExprRV, Location, LoopRV
from .primitives.index_map import IndexMap

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class RejectedError(Exception):
    """Raised by a :class:`Check` for a value it does not accept (caught by :func:`check_args`).

    Parameters
    ----------
    detail
        Why, when more than "expected X, got Y" is useful.
    """

    def __init__(self, detail: str = "") -> None:
        super().__init__(detail)
        self.detail = detail


class Check:
    """Accepts or rejects one argument value; may normalise it (``np.int64`` -> ``int``).

    Subclasses set :attr:`noun` (what is expected, without an article, such as
    ``"positive int"``) and implement :meth:`__call__`.
    """

    noun = "value"

    def __call__(self, value: object) -> object:
        """The accepted (possibly normalised) value; raises :class:`RejectedError` otherwise."""
        raise NotImplementedError

    @property
    def expected(self) -> str:
        """The noun with an article: ``"a positive int"``, ``"an int"``, ``"None"``."""
        return with_article(self.noun)


def with_article(noun: str) -> str:
    """``noun`` preceded by "a" or "an" (nothing for "None" and "one of ...")."""
    if noun.startswith(("None", "one of", "any ")):
        return noun
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


class Anything(Check):
    """Accepts every value (the primitive checks it itself)."""

    noun = "any value"

    def __call__(self, value: object) -> object:
        return value


class IsNone(Check):
    """Accepts only None."""

    noun = "None"

    def __call__(self, value: object) -> object:
        if value is not None:
            raise RejectedError
        return value


class Int(Check):
    """An int (not a bool) in ``[lo, hi]``; other integral numbers become ``int``.

    Parameters
    ----------
    lo, hi
        Inclusive bounds; the defaults are the int64 range.
    noun
        Description shown in messages (default from the bounds).
    """

    def __init__(self, lo: int = INT64_MIN, hi: int = INT64_MAX, noun: str = "") -> None:
        self.lo, self.hi = lo, hi
        if noun:
            self.noun = noun
        elif lo == 1 and hi == INT64_MAX:
            self.noun = "positive int"
        elif lo == 0 and hi == INT64_MAX:
            self.noun = "non-negative int"
        elif (lo, hi) == (INT64_MIN, INT64_MAX):
            self.noun = "int"
        else:
            self.noun = f"int in [{lo}, {hi}]"

    def __call__(self, value: object) -> object:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise RejectedError
        out = value if isinstance(value, int) else int(value)
        if not self.lo <= out <= self.hi:
            raise RejectedError
        return out


class Bool(Check):
    """A bool (``True``/``False``; not ``0``/``1``)."""

    noun = "bool"

    def __call__(self, value: object) -> object:
        if not isinstance(value, bool):
            raise RejectedError
        return value


class Float(Check):
    """A finite real number (int or float, not a bool); ``nonneg`` requires ``>= 0``."""

    def __init__(self, nonneg: bool = False) -> None:
        self.nonneg = nonneg
        self.noun = "finite non-negative number" if nonneg else "finite number"

    def __call__(self, value: object) -> object:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise RejectedError
        out = value if isinstance(value, int | float) else float(value)
        if isinstance(out, int) and not INT64_MIN <= out <= INT64_MAX:
            raise RejectedError  # an int this large is no weight or attribute value
        if not math.isfinite(out) or (self.nonneg and out < 0):
            raise RejectedError
        return out


class Str(Check):
    """A str; ``nonempty`` rejects ``""``."""

    def __init__(self, nonempty: bool = False) -> None:
        self.nonempty = nonempty
        self.noun = "non-empty str" if nonempty else "str"

    def __call__(self, value: object) -> object:
        if not isinstance(value, str) or (self.nonempty and not value):
            raise RejectedError
        return value


class OneOf(Check):
    """One of a fixed set of values (storage scopes, thread tags)."""

    def __init__(self, choices: Sequence[object]) -> None:
        self.choices = tuple(choices)
        self.noun = f"one of {list(self.choices)}"

    def __call__(self, value: object) -> object:
        if isinstance(value, bool) or value not in self.choices:
            raise RejectedError
        return value


class Handle(Check):
    """A handle of one type; a loop location handle (root/inline) only when ``locations``."""

    def __init__(self, cls: type, *, locations: bool = False) -> None:
        self.cls = cls
        self.locations = locations
        self.noun = cls.__name__

    def __call__(self, value: object) -> object:
        if not isinstance(value, self.cls):
            raise RejectedError
        located = isinstance(value, LoopRV) and value.special in (Location.ROOT, Location.INLINE)
        if located and not self.locations:
            raise RejectedError("a root/inline location handle names no loop")
        return value


class AnyOf(Check):
    """The first of ``checks`` that accepts the value."""

    def __init__(self, *checks: Check) -> None:
        self.checks = checks
        self.noun = " or ".join(c.noun for c in checks)

    def __call__(self, value: object) -> object:
        details = []
        for c in self.checks:
            try:
                return c(value)
            except RejectedError as e:
                if e.detail:
                    details.append(e.detail)
        raise RejectedError("; ".join(details))


class SeqOf(Check):
    """A list or tuple (not a str) whose items pass ``item``, with at least ``min_len`` items.

    Items normalised by ``item`` are replaced in a list copy; otherwise the value is kept as
    is (handles inside keep their identity, which the trace relies on).
    """

    def __init__(self, item: Check, min_len: int = 0) -> None:
        self.item = item
        self.min_len = min_len
        what = "non-empty sequence" if min_len == 1 else "sequence"
        if min_len > 1:
            what = f"sequence of at least {min_len}"
        self.noun = f"{what} of {item.noun}"

    def __call__(self, value: object) -> object:
        if not isinstance(value, list | tuple) or len(value) < self.min_len:
            raise RejectedError
        out = [self.item(v) for v in value]
        if all(a is b for a, b in zip(out, value, strict=True)):
            return value
        return out


class TupleOf(Check):
    """A fixed-length list or tuple; item ``k`` passes ``items[k]``. Returns a tuple."""

    def __init__(self, *items: Check, noun: str = "") -> None:
        self.items = items
        self.noun = noun or "(" + ", ".join(c.noun for c in items) + ") pair"

    def __call__(self, value: object) -> object:
        if not isinstance(value, list | tuple) or len(value) != len(self.items):
            raise RejectedError
        return tuple(c(v) for c, v in zip(self.items, value, strict=True))


class IsCallable(Check):
    """Any callable."""

    noun = "callable"

    def __call__(self, value: object) -> object:
        if not callable(value):
            raise RejectedError
        return value


class IndexMapArg(Check):
    """An :class:`IndexMap`, or a callable such as ``lambda i, j: (j, i)`` turned into one."""

    noun = "IndexMap or a callable of index variables"

    def __call__(self, value: object) -> object:
        if not isinstance(value, IndexMap) and not callable(value):
            raise RejectedError
        try:
            return value.checked() if isinstance(value, IndexMap) else IndexMap.from_func(value)
        except ScheduleError as e:
            raise RejectedError(e.short) from e


POSITIVE_INT = Int(1)
"""An int >= 1."""
NONNEG_INT = Int(0)
"""An int >= 0."""


# ------------------------------------------------------------------------------------------
# from annotations
_SIMPLE: dict[object, Check] = {
    int: Int(),
    bool: Bool(),
    float: Float(),
    str: Str(),
    type(None): IsNone(),
    None: IsNone(),
    object: Anything(),
    Any: Anything(),
}


def from_annotation(hint: object) -> Check:
    """The :class:`Check` an annotation stands for (``Annotated`` metadata wins).

    Raises
    ------
    TypeError
        When the annotation has no check (a registration bug, found at import time).
    """
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        for meta in args[1:]:
            if isinstance(meta, Check):
                return meta
        return from_annotation(args[0])
    if hint in _SIMPLE:
        return _SIMPLE[hint]
    if hint in (BlockRV, LoopRV, ExprRV):
        assert isinstance(hint, type)
        return Handle(hint)
    if origin in (Union, types.UnionType):
        return AnyOf(*(from_annotation(a) for a in args))
    if origin is Literal:
        return OneOf(args)
    if origin in (list, Sequence, tuple) and args:
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            return TupleOf(*(from_annotation(a) for a in args))
        return SeqOf(from_annotation(args[0]))
    if origin is Callable or hint is Callable:
        return IsCallable()
    if isinstance(hint, type):
        if hint is IndexMap:
            return IndexMapArg()
        return _InstanceOf(hint)
    raise TypeError(f"no argument check for annotation {hint!r}")


class _InstanceOf(Check):
    """An instance of a class (fallback for annotations without a dedicated check)."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.noun = cls.__name__

    def __call__(self, value: object) -> object:
        if not isinstance(value, self.cls):
            raise RejectedError
        return value


_REPR = reprlib.Repr()
_REPR.maxstring = 60
_REPR.maxother = 60
_REPR.maxlist = _REPR.maxtuple = 8


def show(value: object) -> str:
    """A short, safe ``repr`` of ``value`` for messages."""
    return _REPR.repr(value)


def check_value(check: Check, value: object, name: str, position: int | None = None) -> object:
    """``check(value)``, or :class:`RejectedError` whose detail is the whole message
    (``argument 'x': expected ..., got ...``)."""
    try:
        return check(value)
    except RejectedError as e:
        where = "" if position is None else f" (item {position})"
        text = f"argument '{name}'{where}: expected {check.expected}, got {show(value)}"
        if e.detail:
            text += f": {e.detail}"
        raise RejectedError(text) from None


ArgSpec = tuple[str, Check, bool]
"""``(parameter name, check, is *args)``."""


def check_args(primitive: str, specs: Sequence[ArgSpec], arguments: dict[str, Any]) -> None:
    """Check (and normalise in place) the bound ``arguments`` of ``primitive``.

    Raises
    ------
    ScheduleError
        Naming the primitive and the first rejected argument.
    """
    try:
        normalise_args(specs, arguments)
    except RejectedError as e:
        raise ScheduleError(primitive, e.detail) from None


def normalise_args(specs: Sequence[ArgSpec], arguments: dict[str, Any]) -> None:
    """Check and normalise ``arguments`` in place; :class:`RejectedError` with the message."""
    for name, check, star in specs:
        if name not in arguments:
            continue
        value = arguments[name]
        if star:
            if not isinstance(value, tuple):  # only from a malformed trace: calls pass tuples
                raise RejectedError(
                    f"argument '{name}': expected a sequence of {check.noun}, got {show(value)}"
                )
            arguments[name] = tuple(
                check_value(check, v, name, position=k) for k, v in enumerate(value)
            )
        else:
            arguments[name] = check_value(check, value, name)


# ------------------------------------------------------------------------------------------
# checks shared by several primitives
class AnnotationValue(Check):
    """A bool, int (int64), finite float or str, or a list/tuple of them."""

    noun = "bool, int, float, str or a list of those"
    _item = AnyOf(Bool(), Int(), Float(), Str())

    def __call__(self, value: object) -> object:
        if isinstance(value, list | tuple):
            for v in value:
                self._item(v)
        else:
            self._item(value)
        return value


SPLIT_FACTORS = SeqOf(AnyOf(POSITIVE_INT, IsNone()))
"""Split factors: positive ints (sampled ones included) or None."""
BUFFER_SPEC = TupleOf(OneOf(("read", "write")), Int(), noun="('read' | 'write', index) pair")
"""Which buffer of a block: ``("read", k)`` or ``("write", k)``."""
LOCATION = Handle(LoopRV, locations=True)
"""A loop handle, or a root/inline location handle from ``sample_compute_location``."""
