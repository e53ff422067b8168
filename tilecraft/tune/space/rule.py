"""Search rules: how a :class:`~.post_order_apply.PostOrderApply` space schedules one block.

A search rule looks at one block of a schedule and returns the schedules it makes of it: the
schedule itself when the rule does not apply, one schedule when it applies one way, several
(copies) when it forks the space into sketches. Whatever the rule leaves to the search is a
sampling instruction (``sample_perfect_tile``, ``sample_categorical``,
``sample_compute_location``), so traces of the space replay with new decisions and the
mutators change them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from ...ir import Block, BlockRealize, IntImm, IterKind, Var
from ...schedule import BlockRV, LoopRV, Schedule
from ...target import Target


class SearchRule(ABC):
    """Schedules one block of a design space (module docstring)."""

    name = "search_rule"

    @abstractmethod
    def apply(self, sch: Schedule, block: BlockRV, target: Target) -> list[Schedule]:
        """The schedules made of ``sch`` for ``block`` (``[sch]``: the rule does not apply).

        A rule never raises on a block it cannot handle: every primitive goes through
        ``Schedule.try_`` or is checked first, so the space applies to any function.
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def block_of(sch: Schedule, block: BlockRV) -> Block:
    """The block node of ``block``."""
    node = sch.get(block)
    assert isinstance(node, Block)
    return node


def is_reduction(block: Block) -> bool:
    """True when ``block`` has a reduction iterator."""
    return any(iv.kind is IterKind.REDUCE for iv in block.iter_vars)


def is_spatial(block: Block) -> bool:
    """True when every iterator of ``block`` is spatial."""
    return all(iv.kind is IterKind.SPATIAL for iv in block.iter_vars)


def is_root(sch: Schedule, block: BlockRV) -> bool:
    """True for the function's root block."""
    body = sch.func.body
    return isinstance(body, BlockRealize) and block_of(sch, block) is body.block


def writes_output(sch: Schedule, block: BlockRV) -> bool:
    """True when ``block`` writes a parameter of the function."""
    params = {id(b) for b in sch.func.buffer_params}
    return any(id(w.buffer) in params for w in block_of(sch, block).writes)


def simple_loops(sch: Schedule, block: BlockRV) -> list[LoopRV] | None:
    """The block's loops when they bind its iterators one to one, in order, with constant
    extents and nothing else above it (the shape a tiling rule needs); else None."""
    realize = sch.get_realize(block)
    loops = sch.get_loops(block)
    ivs = realize.block.iter_vars
    if len(loops) != len(ivs) or not _true(realize.predicate):
        return None
    for lp, iv, value in zip(loops, ivs, realize.iter_values, strict=True):
        node = sch.get(lp)
        extent = getattr(node, "extent", None)
        if not isinstance(extent, IntImm) or not isinstance(value, Var):
            return None
        if value is not getattr(node, "loop_var", None):
            return None
        if iv.kind not in (IterKind.SPATIAL, IterKind.REDUCE):
            return None
    return loops


def _true(pred: object) -> bool:
    return isinstance(pred, IntImm) and pred.value == 1


def extent_product(sch: Schedule, loops: list[LoopRV]) -> int:
    """The product of the constant extents of ``loops``."""
    total = 1
    for lp in loops:
        extent = getattr(sch.get(lp), "extent", None)
        total *= extent.value if isinstance(extent, IntImm) else 1
    return total
