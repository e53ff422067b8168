"""The base of every IR node and the immutable attribute mapping nodes carry."""

from __future__ import annotations

import dataclasses
import importlib
import math
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar, Union

from ..errors import IRError

AttrValue = Union[bool, int, float, str, None, tuple["AttrValue", ...], "Attrs"]

_N = TypeVar("_N", bound="Node")
# per class: the fields set at construction, in order and as a set
_INIT_FIELDS: dict[type, tuple[tuple[str, ...], frozenset[str]]] = {}


class Node:
    """Base of all IR nodes: frozen dataclasses whose ``==`` is identity.

    Meaning is compared with :func:`tilecraft.ir.structural_equal`; ``update`` returns a copy
    with some fields replaced (or ``self`` when nothing changes).
    """

    __slots__ = ()

    def update(self: _N, **changes: Any) -> _N:
        """Return a copy with ``changes`` applied, or ``self`` if every value is identical."""
        if all(getattr(self, k) is v for k, v in changes.items()):
            return self
        cls = type(self)
        known = _INIT_FIELDS.get(cls)
        if known is None:
            init = [f.name for f in dataclasses.fields(cls) if f.init]  # type: ignore[arg-type]
            known = _INIT_FIELDS[cls] = (tuple(init), frozenset(init))
        names, name_set = known
        # what dataclasses.replace does, without its per-call field scan
        if not changes.keys() <= name_set:
            unknown = sorted(changes.keys() - name_set)
            raise IRError(f"{cls.__name__}.update: no field {unknown[0]!r}")
        kwargs = {n: getattr(self, n) for n in names}
        kwargs.update(changes)
        return cls(**kwargs)

    def script(self) -> str:
        """Render this node as tilecraft script text."""
        # The printer lives in tilecraft.script, a layer above; it is looked up at call time
        # (like a registered hook) so that this layer never imports it.
        printer = importlib.import_module("tilecraft.script.printer")
        return printer.to_script(self)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        try:
            return self.script()
        except Exception:  # noqa: BLE001  repr must never raise
            return f"<{type(self).__name__} at {id(self):#x}>"


def _freeze(value: Any, where: str) -> AttrValue:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v, where) for v in value)
    if isinstance(value, Mapping):
        return Attrs(value)
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _freeze(value.item(), where)
    raise IRError(
        f"{where}: attribute values must be bool, int, float, str, None, lists or dicts of "
        f"those; got {type(value).__name__}"
    )


class Attrs(Mapping[str, AttrValue]):
    """An immutable string-keyed mapping kept in sorted key order (annotations, attrs)."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        pairs: list[tuple[str, AttrValue]] = []
        for key, value in sorted((items or {}).items()):
            if not isinstance(key, str):
                raise IRError(f"Attrs: keys must be strings, got {key!r}")
            if isinstance(value, float) and math.isnan(value):
                raise IRError(f"Attrs: value of {key!r} is NaN")
            pairs.append((key, _freeze(value, f"Attrs[{key!r}]")))
        self._items: tuple[tuple[str, AttrValue], ...] = tuple(pairs)

    def __getitem__(self, key: str) -> AttrValue:
        for k, v in self._items:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return "Attrs({" + ", ".join(f"{k!r}: {v!r}" for k, v in self._items) + "})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Attrs):
            return self._items == other._items
        if isinstance(other, Mapping):
            return self == Attrs(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._items)

    def items_tuple(self) -> tuple[tuple[str, AttrValue], ...]:
        """The (key, value) pairs in sorted key order."""
        return self._items

    def with_item(self, key: str, value: Any) -> Attrs:
        """A copy with ``key`` set to ``value``."""
        d = dict(self._items)
        d[key] = value
        return Attrs(d)

    def without(self, key: str) -> Attrs:
        """A copy without ``key`` (no error when absent)."""
        return Attrs({k: v for k, v in self._items if k != key})

    def to_dict(self) -> dict[str, Any]:
        """A plain ``dict`` copy (nested Attrs become dicts, tuples become lists)."""

        def plain(v: AttrValue) -> Any:
            if isinstance(v, Attrs):
                return v.to_dict()
            if isinstance(v, tuple):
                return [plain(x) for x in v]
            return v

        return {k: plain(v) for k, v in self._items}


def as_attrs(value: Mapping[str, Any] | None) -> Attrs:
    """Coerce a mapping (or None) to :class:`Attrs`."""
    if isinstance(value, Attrs):
        return value
    return Attrs(value)
