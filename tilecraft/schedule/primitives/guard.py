"""The ``guard`` primitive: run a block only at the loop iterations a bound allows.

A schedule that knows some instances of a block are not needed (a causal attention's key
blocks above the diagonal) says so with ``guard``: the block's predicate gains ``lo <= hi``,
two integer expressions of enclosing loops, and the lowered loop nest skips those instances
(:class:`tilecraft.lower.HoistInvariantGuards` moves a condition that does not use the inner
loops above them, so a skipped tile costs one test).

What ``guard`` checks is the form: the loops enclose the block, the bound maps them to two
integers, the block has no init (an init skipped with every update would leave its output
unset). That the skipped instances are not needed is the caller's claim, which no block-local
analysis can prove (it depends on values, e.g. a weight that is exactly 0 where a mask hides
a key): the caller guards a producer and its consumers alike, so no consumer reads what a
skipped producer instance would have written, and a skipped reduction update would have
combined its identity. The test harness checks the claim: the scheduled function must
compute what the unscheduled one does on random inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any

from ...ir import LE, And, Expr, Var, cast, substitute
from .. import _tree
from ..arguments import IndexMapArg
from ..instruction import primitive
from ..state import BlockRV, LoopRV, ScheduleState
from ._blockutil import block_of
from .index_map import IndexMap
from .layout import as_index_map
from .loop import is_const


@primitive("guard", inputs=("block", "loops"))
def guard(
    state: ScheduleState,
    block: BlockRV,
    loops: Sequence[LoopRV],
    bound: Annotated[IndexMap | Callable[..., Any], IndexMapArg()],
) -> None:
    """Run ``block`` only where ``lo <= hi``, ``(lo, hi) = bound(*loops)``.

    Requires: (1) the block is not the root and has no init (decompose the reduction
    first); (2) every loop encloses the block; (3) ``bound`` takes one index per loop and
    gives two. The caller asserts that the skipped instances are not needed (module
    docstring).
    Rewrite: the block's predicate ``p`` becomes ``p and lo <= hi`` (its loop variables).
    """
    index_map = as_index_map(bound)
    realize, path = block_of(state, block)
    name = realize.block.name
    if realize.block.init is not None:
        raise state.error(
            f'block "{name}" has an init',
            requires="a block without init: skipping every update would skip the init too",
            hint="decompose_reduction first",
            locations=[name],
        )
    above = {id(f.loop_var) for f in _tree.loops_in_path(path)}
    loop_vars = [state.loop_var(lp) for lp in loops]
    outside = [v.name for v in loop_vars if id(v) not in above]
    if outside:
        raise state.error(
            f'loops {outside} do not enclose block "{name}"',
            requires="the bound reads loops above the block",
            locations=[name, *outside],
        )
    if len(index_map.initial_indices) != len(loop_vars) or len(index_map.final_indices) != 2:
        raise state.error(
            f"argument 'bound': expected a map of {len(loop_vars)} indices to 2, got "
            f"{len(index_map.initial_indices)} to {len(index_map.final_indices)}",
            locations=[name],
        )
    lo, hi = _on_loops(index_map, loop_vars)
    cond: Expr = LE(lo, hi)
    pred = cond if is_const(realize.predicate, 1) else And(realize.predicate, cond)
    state.commit(_tree.replace_stmt(state.func, realize, realize.update(predicate=pred)))


def _on_loops(index_map: IndexMap, loop_vars: Sequence[Var]) -> tuple[Expr, Expr]:
    """The map's two outputs with its indices replaced by the loop variables."""
    dt = loop_vars[0].dtype if loop_vars else index_map.final_indices[0].dtype
    vmap: dict[Var, Expr] = {
        iv: (lv if lv.dtype == iv.dtype else cast(lv, iv.dtype))
        for iv, lv in zip(index_map.initial_indices, loop_vars, strict=True)
    }
    lo, hi = (substitute(e, vmap) for e in index_map.final_indices)
    return (lo if lo.dtype == dt else cast(lo, dt)), (hi if hi.dtype == dt else cast(hi, dt))
