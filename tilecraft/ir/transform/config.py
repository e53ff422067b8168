"""The registry of pass configuration keys that :class:`~.PassContext` accepts.

A pass that reads a setting from ``PassContext.current().config`` registers the key once, at
import time of the module that reads it, with its type, default and a one-line description::

    UNROLL_LIMIT = register_pass_config("lower.unroll_limit", int, 16, "max loop extent unrolled")

``PassContext(config={...})`` rejects a key nobody registered (a typo would otherwise be
ignored silently: the pass would run with its default and nobody would notice) and a value of
the wrong type, with an :class:`~tilecraft.errors.IRError` that lists the close matches.
Keys are dotted identifiers (``"<layer>.<setting>"``). A key is registered by the module that
reads it, so that module must be imported before a context naming the key is built.
"""

from __future__ import annotations

import difflib
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ...errors import IRError

_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


@dataclass(frozen=True)
class ConfigOption:
    """A registered configuration key.

    Attributes
    ----------
    name
        The dotted key (``"lower.unroll_limit"``).
    value_type
        The accepted type, or a tuple of accepted types (``bool`` is not accepted as ``int``).
    default
        The value a pass sees when a context does not set the key.
    doc
        One line saying what the setting does.
    """

    name: str
    value_type: type | tuple[type, ...]
    default: object
    doc: str

    def accepts(self, value: object) -> bool:
        """True if ``value`` has the registered type."""
        types = self.value_type if isinstance(self.value_type, tuple) else (self.value_type,)
        if isinstance(value, bool) and bool not in types:
            return False
        return isinstance(value, types)

    def type_name(self) -> str:
        """The accepted type(s) as text (``int``, ``int | str``)."""
        types = self.value_type if isinstance(self.value_type, tuple) else (self.value_type,)
        return " | ".join(t.__name__ for t in types)


_REGISTRY: dict[str, ConfigOption] = {}
_LOCK = threading.Lock()


def register_pass_config(
    name: str, value_type: type | tuple[type, ...], default: object, doc: str
) -> ConfigOption:
    """Register a configuration key; registering the same key again identically is a no-op.

    Parameters
    ----------
    name
        A dotted identifier, ``"<layer>.<setting>"``.
    value_type
        The type (or tuple of types) values must have.
    default
        The value when a context does not set the key; must have ``value_type``.
    doc
        One line describing the setting.

    Returns
    -------
    ConfigOption
        The registered option.

    Raises
    ------
    IRError
        For a malformed name, a default of the wrong type, or a key already registered with
        a different type, default or description.
    """
    if not isinstance(name, str) or not _KEY_RE.fullmatch(name):
        raise IRError(f"register_pass_config: key must be a dotted identifier, got {name!r}")
    types = value_type if isinstance(value_type, tuple) else (value_type,)
    if not types or not all(isinstance(t, type) for t in types):
        raise IRError(f"register_pass_config {name}: value_type must be a type or tuple of types")
    option = ConfigOption(name, value_type, default, doc)
    if not option.accepts(default):
        raise IRError(
            f"register_pass_config {name}: default {default!r} is not a {option.type_name()}"
        )
    with _LOCK:
        old = _REGISTRY.get(name)
        if old is not None and old != option:
            raise IRError(f"register_pass_config: key {name!r} is already registered as {old}")
        _REGISTRY[name] = option
    return option


def registered_pass_configs() -> Mapping[str, ConfigOption]:
    """A snapshot of every registered key (read-only)."""
    with _LOCK:
        return MappingProxyType(dict(_REGISTRY))


def lookup_option(name: str) -> ConfigOption:
    """The registered option ``name``; :class:`IRError` naming close matches otherwise."""
    with _LOCK:
        option = _REGISTRY.get(name)
        known = sorted(_REGISTRY)
    if option is not None:
        return option
    close = difflib.get_close_matches(str(name), known, n=3)
    hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
    raise IRError(
        f"PassContext: unknown config key {name!r}{hint} (registered keys: {known}; a key is "
        "registered by the module that reads it, so import that module first)"
    )


def validate_config(config: Mapping[str, object] | None) -> Mapping[str, object]:
    """Check every key is registered and every value has its type; a read-only copy."""
    out: dict[str, object] = {}
    for key, value in (config or {}).items():
        option = lookup_option(key)
        if not option.accepts(value):
            raise IRError(
                f"PassContext: config {key!r} expects a {option.type_name()}, "
                f"got {type(value).__name__} {value!r}"
            )
        out[key] = value
    return MappingProxyType(out)
