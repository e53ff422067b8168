"""The table of ATen operator converters, keyed by overload name (``aten::add.Tensor``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._context import Context

Handler = Callable[[Context, Any], Any]

HANDLERS: dict[str, Handler] = {}


def handles(*names: str) -> Callable[[Handler], Handler]:
    """Register the decorated converter for the ATen overloads ``names``."""

    def deco(fn: Handler) -> Handler:
        for n in names:
            HANDLERS[n] = fn
        return fn

    return deco
