"""Schedule state: the current PrimFunc, the handles (random variables) and the trace.

Handles are small objects. A :class:`BlockRV` names a block (names are unique in a PrimFunc),
a :class:`LoopRV` holds the identity of a loop's ``loop_var``; IR rewrites keep the Var objects
of untouched loops, so handles stay valid for free. A handle is *stale* when its target no
longer exists; resolving it raises :class:`~tilecraft.errors.ScheduleError`. An
:class:`ExprRV` is an ``int`` produced by a sampling instruction: usable anywhere an int is,
and recognised by identity when recorded in the trace.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import ScheduleError
from ..ir import Block, BlockRealize, For, PrimFunc, Var
from . import _tree

if TYPE_CHECKING:
    from .trace import Trace

_ids = itertools.count()


class BlockRV:
    """Handle of a block, by name (resolved with :meth:`ScheduleState.get_block`)."""

    __slots__ = ("_gen", "name")

    def __init__(self, name: str, gen: int = 0) -> None:
        self.name = name
        self._gen = gen

    def __repr__(self) -> str:
        return f"BlockRV({self.name!r})"


ROOT = "root"
INLINE = "inline"


class LoopRV:
    """Handle of a loop, by the identity of its ``loop_var``.

    Two special handles come from :func:`sample_compute_location`: ``LoopRV.root()`` (keep the
    block where it is) and ``LoopRV.inline()`` (inline the block).
    """

    __slots__ = ("special", "var")

    def __init__(self, var: Var | None, special: str | None = None) -> None:
        self.var = var
        self.special = special

    @staticmethod
    def root() -> LoopRV:
        """The handle meaning "the root scope" (compute_at onto it is a no-op)."""
        return LoopRV(None, ROOT)

    @staticmethod
    def inline() -> LoopRV:
        """The handle meaning "inline the block" (compute_at onto it inlines)."""
        return LoopRV(None, INLINE)

    def __repr__(self) -> str:
        if self.var is None:
            return f"LoopRV(<{self.special}>)"
        return f"LoopRV({self.var.name!r})"


class ExprRV(int):
    """An integer produced by a sampling instruction; traced by identity."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"ExprRV({int(self)})"


RV = BlockRV | LoopRV | ExprRV


class ScheduleState:
    """Current function, handle bookkeeping, random state and trace of one schedule.

    A primitive reads ``state.func``, checks, builds a new PrimFunc and calls :meth:`commit`;
    on error it raises before committing, so the state is unchanged.
    """

    def __init__(self, func: PrimFunc, seed: int | None = None) -> None:
        from .trace import Trace

        self.func = func
        # name -> generation; bumped when a block name disappears so stale handles are caught
        self.block_gen: dict[str, int] = {}
        self.rng = random.Random(
            seed if seed is not None else random.SystemRandom().getrandbits(63)
        )
        self.trace: Trace = Trace()
        self.primitive = "schedule"  # the primitive now running (for error messages)
        self.depth = 0  # nesting of traced primitives; only depth 0 records

    # -- handles ----------------------------------------------------------------------------
    def block_rv(self, name: str) -> BlockRV:
        """A fresh handle of block ``name`` (which must exist)."""
        if not _tree.has_block(self.func, name):
            raise self.error(
                f'no block named "{name}"',
                requires="the block exists in the function",
                hint=f"blocks are {_tree.names_of(_tree.block_names(self.func))}",
            )
        return BlockRV(name, self.block_gen.get(name, 0))

    def loop_rv(self, var: Var) -> LoopRV:
        """A handle of the loop whose variable is ``var``."""
        return LoopRV(var)

    def block_name(self, rv: BlockRV) -> str:
        """The name of the block ``rv`` refers to; ScheduleError when stale."""
        if not isinstance(rv, BlockRV):
            raise self.error(f"expected a block handle, got {type(rv).__name__}")
        if rv._gen != self.block_gen.get(rv.name, 0) or not _tree.has_block(self.func, rv.name):
            raise self.error(
                f'block handle "{rv.name}" is stale',
                requires="the handle refers to a block that still exists",
                hint="take a fresh handle with get_block after primitives that remove blocks",
            )
        return rv.name

    def loop_var(self, rv: LoopRV) -> Var:
        """The loop variable ``rv`` refers to; ScheduleError when stale or special."""
        if not isinstance(rv, LoopRV):
            raise self.error(f"expected a loop handle, got {type(rv).__name__}")
        if rv.var is None:
            raise self.error(
                f"the {rv.special} location handle is not a loop",
                hint="only compute_at/reverse_compute_at accept it",
            )
        if not _tree.has_loop(self.func, rv.var):
            raise self.error(
                f'loop handle "{rv.var.name}" is stale',
                requires="the handle refers to a loop that still exists",
                hint="primitives such as split/fuse replace loops; use the handles they return",
            )
        return rv.var

    def get_block(self, rv: BlockRV) -> BlockRealize:
        """The BlockRealize ``rv`` refers to."""
        return _tree.find_block(self.func, self.block_name(rv))[0]

    def get_loop(self, rv: LoopRV) -> For:
        """The For ``rv`` refers to."""
        return _tree.find_loop(self.func, self.loop_var(rv))

    def get(self, rv: BlockRV | LoopRV | int) -> Block | For | int:
        """The IR node (Block / For) or integer value a handle refers to."""
        if isinstance(rv, BlockRV):
            return self.get_block(rv).block
        if isinstance(rv, LoopRV):
            return self.get_loop(rv)
        if isinstance(rv, int):
            return int(rv)
        raise self.error(f"expected a handle, got {type(rv).__name__}")

    # -- commit -----------------------------------------------------------------------------
    def commit(self, new_func: PrimFunc) -> None:
        """Make ``new_func`` current; block names that disappeared invalidate their handles."""
        if new_func is self.func:
            return
        old_names = _tree.index(self.func).blocks
        new_names = _tree.index(new_func).blocks
        for name in old_names:
            if name not in new_names:
                self.block_gen[name] = self.block_gen.get(name, 0) + 1
        self.func = new_func

    # -- errors -----------------------------------------------------------------------------
    def error(
        self,
        short: str,
        *,
        requires: str = "",
        fragment: str = "",
        hint: str = "",
        locations: Sequence[str] = (),
    ) -> ScheduleError:
        """A ScheduleError naming the running primitive."""
        return ScheduleError(
            self.primitive,
            short,
            requires=requires,
            fragment=fragment,
            hint=hint,
            locations=locations,
        )

    def copy(self) -> ScheduleState:
        """An independent copy: same function, handles, random state and trace."""
        new = ScheduleState.__new__(ScheduleState)
        new.func = self.func
        new.block_gen = dict(self.block_gen)
        new.rng = random.Random()
        new.rng.setstate(self.rng.getstate())
        new.trace = self.trace.copy()
        new.primitive = "schedule"
        new.depth = 0
        return new
