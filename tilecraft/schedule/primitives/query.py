"""Instructions that leave the function as it is: the queries (``get_block``, ``get_loops``,
``get_child_blocks``, ``get_producers``, ``get_consumers``) and the ``enter_postproc`` marker.

Queries are traced so that replay can map the handles they return; they are *pure*, so
:meth:`Trace.simplified` drops one whose outputs nothing uses.
"""

from __future__ import annotations

from .. import _tree
from ..instruction import ENTER_POSTPROC, primitive
from ..state import BlockRV, LoopRV, ScheduleState


@primitive("get_block", outputs="one", pure=True)
def get_block(state: ScheduleState, name: str) -> BlockRV:
    """The handle of block ``name``; requires the block to exist."""
    return state.block_rv(name)


@primitive("get_loops", inputs=("block",), outputs="many", pure=True)
def get_loops(state: ScheduleState, block: BlockRV) -> list[LoopRV]:
    """Handles of the loops above ``block`` up to its scope block, outermost first."""
    name = state.block_name(block)
    return [LoopRV(f.loop_var) for f in _tree.loops_above(state.func, name)]


@primitive("get_child_blocks", inputs=("block_or_loop",), outputs="many", pure=True)
def get_child_blocks(state: ScheduleState, block_or_loop: BlockRV | LoopRV) -> list[BlockRV]:
    """Handles of the blocks directly under a block or loop, in program order."""
    node = (
        state.get_block(block_or_loop)
        if isinstance(block_or_loop, BlockRV)
        else state.get_loop(block_or_loop)
    )
    return [state.block_rv(br.block.name) for br in _tree.child_blocks(node)]


@primitive("get_producers", inputs=("block",), outputs="many", pure=True)
def get_producers(state: ScheduleState, block: BlockRV) -> list[BlockRV]:
    """Blocks in the same scope writing a buffer ``block`` reads, in program order."""
    name = state.block_name(block)
    return [state.block_rv(n) for n in _tree.producers(state.func, name)]


@primitive("get_consumers", inputs=("block",), outputs="many", pure=True)
def get_consumers(state: ScheduleState, block: BlockRV) -> list[BlockRV]:
    """Blocks in the same scope reading a buffer ``block`` writes, in program order."""
    name = state.block_name(block)
    return [state.block_rv(n) for n in _tree.consumers(state.func, name)]


@primitive(ENTER_POSTPROC)
def enter_postproc(state: ScheduleState) -> None:
    """Mark the start of postprocessing in the trace (the function does not change).

    ``Trace.apply_to_schedule(..., remove_postproc=True)`` stops at this marker and
    ``Trace.simplified(remove_postproc=True)`` drops it and everything after it.
    """
