"""Handles (random variables) of a schedule: :class:`BlockRV`, :class:`LoopRV`, :class:`ExprRV`.

Handles are small objects that name IR without holding it. A :class:`BlockRV` names a block
(names are unique in a PrimFunc), a :class:`LoopRV` holds the identity of a loop's
``loop_var``; IR rewrites keep the Var objects of untouched loops, so handles stay valid for
free. An :class:`ExprRV` is an ``int`` produced by a sampling instruction: usable anywhere an
int is, and recognised by identity when recorded in a trace.

This module depends on nothing else of :mod:`tilecraft.schedule`; the state, the trace and
the instructions all import it.
"""

from __future__ import annotations

from enum import Enum

from ..ir import Var


class BlockRV:
    """Handle of a block, by name (resolved with :meth:`ScheduleState.get_block`)."""

    __slots__ = ("_gen", "name")

    def __init__(self, name: str, gen: int = 0) -> None:
        self.name = name
        self._gen = gen

    def __repr__(self) -> str:
        return f"BlockRV({self.name!r})"


class Location(str, Enum):
    """What a loop handle that names no loop stands for."""

    ROOT = "root"
    """Keep the block at the root scope (``compute_at`` onto it is a no-op)."""
    INLINE = "inline"
    """Inline the block (``compute_at`` onto it inlines)."""
    UNBOUND = "unbound"
    """A placeholder of a loaded trace, bound to a real loop on replay."""


ROOT = Location.ROOT
INLINE = Location.INLINE


class LoopRV:
    """Handle of a loop, by the identity of its ``loop_var``.

    Two location handles come from ``sample_compute_location``: ``LoopRV.root()`` (keep the
    block where it is) and ``LoopRV.inline()`` (inline the block); their ``var`` is None and
    ``special`` says which.
    """

    __slots__ = ("special", "var")

    def __init__(self, var: Var | None, special: Location | None = None) -> None:
        self.var = var
        self.special = special

    @staticmethod
    def root() -> LoopRV:
        """The handle meaning "the root scope" (compute_at onto it is a no-op)."""
        return LoopRV(None, Location.ROOT)

    @staticmethod
    def inline() -> LoopRV:
        """The handle meaning "inline the block" (compute_at onto it inlines)."""
        return LoopRV(None, Location.INLINE)

    def __repr__(self) -> str:
        if self.var is None:
            where = self.special.value if self.special is not None else "none"
            return f"LoopRV(<{where}>)"
        return f"LoopRV({self.var.name!r})"


class ExprRV(int):
    """An integer produced by a sampling instruction; traced by identity."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"ExprRV({int(self)})"


RV = BlockRV | LoopRV | ExprRV
"""Any handle."""

HANDLE_PREFIX: dict[type, str] = {BlockRV: "b", LoopRV: "l", ExprRV: "v"}
"""Name prefix of each handle type in printed and serialised traces."""
