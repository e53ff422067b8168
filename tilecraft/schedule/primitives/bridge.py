"""Traced, handle-level reduction primitives over the pure builders of :mod:`.reduction`.

The pure functions of :mod:`.reduction` take and return PrimFuncs (blocks by name, loops by
Var) and raise ScheduleError on a broken requirement. Each traced primitive here resolves its
handles (stale ones raise ScheduleError), calls the builder, commits the result and returns
new blocks as handles.
"""

from __future__ import annotations

from ...ir import IterKind, PrimFunc
from .. import _tree
from ..instruction import primitive
from ..state import BlockRV, LoopRV, ScheduleState
from . import reduction as _reduction


def _commit_block(state: ScheduleState, result: tuple[PrimFunc, str]) -> BlockRV:
    func, name = result
    state.commit(func)
    return state.block_rv(name)


@primitive("rfactor", inputs=("loop",), outputs="one")
def rfactor(state: ScheduleState, loop: LoopRV, factor_axis: int = 0) -> BlockRV:
    """Factor the reduction over ``loop`` into an rf block (see reduction.py).

    The block is the one reduction block under the loop.
    """
    var = state.loop_var(loop)
    block = _reduction_block_under(state, loop)
    return _commit_block(state, _reduction.rfactor(state.func, block, var, factor_axis))


@primitive("decompose_reduction", inputs=("block", "loop"), outputs="one")
def decompose_reduction(state: ScheduleState, block: BlockRV, loop: LoopRV) -> BlockRV:
    """Split ``block``'s init into its own block above ``loop`` (see reduction.py)."""
    name = state.block_name(block)
    var = state.loop_var(loop)
    return _commit_block(state, _reduction.decompose_reduction(state.func, name, var))


def _reduction_block_under(state: ScheduleState, loop: LoopRV) -> str:
    node = state.get_loop(loop)
    found = [
        br.block.name
        for br in _tree.blocks_under(node.body)
        if any(iv.kind is IterKind.REDUCE for iv in br.block.iter_vars)
    ]
    if len(found) != 1:
        raise state.error(
            f'loop "{node.loop_var.name}" has {len(found)} reduction blocks under it',
            requires="rfactor needs exactly one reduction block under the loop",
            fragment=_tree.outline(node, {id(node): "<- loop"}),
        )
    return found[0]
