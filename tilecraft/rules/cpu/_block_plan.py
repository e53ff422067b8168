"""Checks and block-level steps shared by the vectorizing CPU rules.

* :func:`start`: the common opening of a rule's ``schedule`` — a Schedule of a normalized
  function with blocks (else a :class:`~tilecraft.rules.Decline` with the analysis' reason);
* :func:`inline_spatial`: inline every intermediate block without reduction into its
  consumers, except a costly one (it calls ``exp``, ``cos``... or divides floats) that a
  consumer reads broadcast: inlining it would recompute it for every element of the
  broadcast axis;
* :func:`shared_costly`: the costly intermediate blocks read by several consumers (softmax's
  ``exp``, read by the sum and the result): a rule that keeps them computes each value once;
* :func:`schedule_standalone`: give a block left at the root its own vectorized, parallel nest.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import ScheduleError
from ...ir import Buffer, Div, IterKind, Node, PrimFunc, Var, walk
from ...schedule import BlockRV, Schedule
from ...schedule.analysis import (
    BlockInfo,
    OpPattern,
    block_op_pattern,
    consumers,
    normalize_prim_func,
    read_accesses,
    why_not_normalized,
)
from ..base import Decline
from ..common import block_node, has_call
from ._vector_config import VectorConfig
from ._vector_nest import parallel_outer, schedule_reduction, schedule_spatial


def start(func: PrimFunc) -> tuple[Schedule, list[BlockInfo]] | Decline:
    """A schedule of ``func`` and its blocks, or why a CPU rule cannot look at it.

    ``func`` has passed :meth:`ScheduleRule.apply`'s checks (an unscheduled PrimFunc).
    """
    try:
        sch = Schedule(func)
    except ScheduleError as e:  # a function the Schedule API refuses to hold
        return Decline(f"cannot schedule it: {e.short}")
    infos = normalize_prim_func(sch)
    if infos is None:
        return Decline(f"not normalized: {why_not_normalized(sch)}")
    if not infos:
        return Decline("the function has no blocks")
    return sch, infos


def costly(node: Node) -> bool:
    """Whether ``node`` calls an intrinsic (``exp``...) or divides floats: costly to recompute."""
    if has_call(node):
        return True
    divides = (
        n
        for n in walk(node, prune=lambda n: isinstance(n, Buffer))
        if isinstance(n, Div) and n.dtype.is_float
    )
    return next(divides, None) is not None


def shared_costly(infos: Sequence[BlockInfo]) -> list[str]:
    """Names of the costly intermediate spatial blocks that two or more blocks read."""
    return [
        info.name
        for info in infos
        if not info.is_output
        and info.is_injective()
        and costly(info.block.body)
        and len(consumers(infos, info)) >= 2
    ]


def _broadcast_read(infos: Sequence[BlockInfo], info: BlockInfo) -> bool:
    """Whether a consumer reads ``info``'s output without using all its own iterators."""
    written = {id(w.buffer) for w in info.writes}
    for c in consumers(infos, info):
        own = [it.var for it in c.iters if not it.is_unit]
        for acc in read_accesses(c):
            if id(acc.region.buffer) not in written:
                continue
            used: Sequence[Var] = acc.iters
            if any(all(v is not u for u in used) for v in own):
                return True
    return False


def inline_spatial(
    sch: Schedule, infos: Sequence[BlockInfo], keep: Sequence[str] = ()
) -> list[BlockInfo]:
    """Inline the intermediate spatial blocks of ``infos`` that may be; returns the others.

    A block stays when it writes a function output, is opaque, has a reduction iterator, is
    named in ``keep``, is costly and read broadcast (module docstring), or ``compute_inline``
    refuses it. The returned BlockInfos keep their handles; their loop handles also stay
    valid (inlining removes only the inlined block's own nest).
    """
    left: list[BlockInfo] = []
    for info in infos:
        candidate = (
            not info.is_output
            and info.name not in keep
            and info.is_injective()
            and not info.is_opaque()
            and not (costly(info.block.body) and _broadcast_read(infos, info))
        )
        if candidate and sch.try_(sch.compute_inline, info.block_rv):
            continue
        left.append(info)
    return left


def is_reduction_block(info: BlockInfo) -> bool:
    """Whether the block has a reduction iterator (a reduction of any pattern)."""
    return any(it.is_reduce for it in info.iters)


def schedule_standalone(
    sch: Schedule, cfg: VectorConfig, block: BlockRV, *, transpose_tiles: tuple[int, int] = (0, 0)
) -> None:
    """Vectorize and parallelize a block left at the root on its own nest."""
    node = block_node(sch, block)
    loops = sch.get_loops(block)
    pattern = block_op_pattern(node)
    if pattern is OpPattern.OPAQUE:
        parallel_outer(sch, cfg, block, loops)
        return
    if any(iv.kind is IterKind.REDUCE for iv in node.iter_vars):
        schedule_reduction(sch, cfg, block, loops, standalone=True)
        return
    schedule_spatial(
        sch,
        cfg,
        block,
        loops,
        standalone=True,
        elementwise=pattern is OpPattern.ELEMWISE,
        transpose_tiles=transpose_tiles,
    )
