"""Traced, handle-level wrappers of the pure block/buffer primitives.

The pure functions of :mod:`.compute_location`, :mod:`.cache` and :mod:`.reduction` take and
return PrimFuncs (blocks by name, loops by Var). Here each one becomes an instruction: handles
are resolved, the pure function runs (raising ScheduleError on a broken requirement), the
result is committed and new blocks come back as handles. Modules are imported on first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

from ...ir import PrimFunc
from ..instruction import primitive
from ..state import INLINE, ROOT, BlockRV, LoopRV, ScheduleState


def _pure(module: str, name: str) -> Callable[..., Any]:
    mod = importlib.import_module(f"tilecraft.schedule.primitives.{module}")
    fn: Callable[..., Any] = getattr(mod, name)
    return fn


def _commit_block(state: ScheduleState, result: tuple[PrimFunc, str]) -> BlockRV:
    func, name = result
    state.commit(func)
    return state.block_rv(name)


def _move(
    state: ScheduleState,
    block: BlockRV,
    loop: LoopRV,
    preserve_unit_loops: bool,
    index: int,
    *,
    reverse: bool,
) -> None:
    """Shared body of (reverse_)compute_at: root handles keep, inline handles inline."""
    prefix = "reverse_" if reverse else ""
    name = state.block_name(block)
    if isinstance(loop, LoopRV) and loop.special == ROOT:
        return
    if isinstance(loop, LoopRV) and loop.special == INLINE:
        state.commit(_pure("compute_location", f"{prefix}compute_inline")(state.func, name))
        return
    var = state.loop_var(loop)
    fn = _pure("compute_location", f"{prefix}compute_at")
    state.commit(fn(state.func, name, var, preserve_unit_loops, index))


@primitive("compute_at", inputs=("block", "loop"))
def compute_at(
    state: ScheduleState,
    block: BlockRV,
    loop: LoopRV,
    preserve_unit_loops: bool = False,
    index: int = -1,
) -> None:
    """Move producer ``block`` under ``loop`` (see compute_location.compute_at).

    A root location handle (from sample_compute_location) leaves the block where it is; an
    inline handle inlines it.
    """
    _move(state, block, loop, preserve_unit_loops, index, reverse=False)


@primitive("reverse_compute_at", inputs=("block", "loop"))
def reverse_compute_at(
    state: ScheduleState,
    block: BlockRV,
    loop: LoopRV,
    preserve_unit_loops: bool = False,
    index: int = -1,
) -> None:
    """Move consumer ``block`` under ``loop`` (see compute_location.reverse_compute_at)."""
    _move(state, block, loop, preserve_unit_loops, index, reverse=True)


@primitive("compute_inline", inputs=("block",))
def compute_inline(state: ScheduleState, block: BlockRV) -> None:
    """Inline producer ``block`` into its consumers (see compute_location.compute_inline)."""
    name = state.block_name(block)
    state.commit(_pure("compute_location", "compute_inline")(state.func, name))


@primitive("reverse_compute_inline", inputs=("block",))
def reverse_compute_inline(state: ScheduleState, block: BlockRV) -> None:
    """Inline consumer ``block`` into its producer (see compute_location)."""
    name = state.block_name(block)
    state.commit(_pure("compute_location", "reverse_compute_inline")(state.func, name))


@primitive("cache_read", inputs=("block", "consumer_blocks"), outputs="one")
def cache_read(
    state: ScheduleState,
    block: BlockRV,
    read_buffer_index: int,
    storage_scope: str,
    consumer_blocks: Sequence[BlockRV] | None = None,
) -> BlockRV:
    """Stage a buffer ``block`` reads through a new ``storage_scope`` buffer (see cache.py)."""
    name = state.block_name(block)
    consumers = None if consumer_blocks is None else [state.block_name(b) for b in consumer_blocks]
    fn = _pure("cache", "cache_read")
    return _commit_block(state, fn(state.func, name, read_buffer_index, storage_scope, consumers))


@primitive("cache_write", inputs=("block",), outputs="one")
def cache_write(
    state: ScheduleState, block: BlockRV, write_buffer_index: int, storage_scope: str
) -> BlockRV:
    """Compute ``block`` into a new ``storage_scope`` buffer, then copy out (see cache.py)."""
    name = state.block_name(block)
    fn = _pure("cache", "cache_write")
    return _commit_block(state, fn(state.func, name, write_buffer_index, storage_scope))


@primitive("set_scope", inputs=("block",))
def set_scope(state: ScheduleState, block: BlockRV, buffer_index: int, storage_scope: str) -> None:
    """Change the storage scope of a buffer ``block`` writes (see cache.py)."""
    name = state.block_name(block)
    state.commit(_pure("cache", "set_scope")(state.func, name, buffer_index, storage_scope))


@primitive("storage_align", inputs=("block",))
def storage_align(
    state: ScheduleState, block: BlockRV, buffer_index: int, axis: int, factor: int, offset: int
) -> None:
    """Pad a buffer's stride on ``axis`` to ``factor * k + offset`` (see cache.py)."""
    name = state.block_name(block)
    fn = _pure("cache", "storage_align")
    state.commit(fn(state.func, name, buffer_index, axis, factor, offset))


@primitive("transform_layout", inputs=("block",))
def transform_layout(
    state: ScheduleState, block: BlockRV, buffer: tuple[str, int], index_map: Any
) -> None:
    """Re-layout a buffer of ``block`` with ``index_map`` (see cache.py)."""
    name = state.block_name(block)
    if not (isinstance(buffer, Sequence) and len(buffer) == 2):
        raise state.error(f"argument 'buffer': expected ('read' | 'write', index), got {buffer!r}")
    imap = as_index_map(index_map)
    fn = _pure("cache", "transform_layout")
    state.commit(fn(state.func, name, (str(buffer[0]), int(buffer[1])), imap))


def as_index_map(value: Any) -> Any:
    """An IndexMap from an IndexMap or a callable ``lambda i, j: (j, i)``."""
    index_map = importlib.import_module("tilecraft.schedule.primitives.index_map").IndexMap
    if isinstance(value, index_map):
        return value
    return index_map.from_func(value)


@primitive("reindex", inputs=("block",), outputs="one")
def reindex(state: ScheduleState, block: BlockRV, buffer: tuple[str, int]) -> BlockRV:
    """Stage an access of ``block`` through a buffer indexed by its iterators (see cache.py)."""
    name = state.block_name(block)
    if not (isinstance(buffer, Sequence) and len(buffer) == 2):
        raise state.error(f"argument 'buffer': expected ('read' | 'write', index), got {buffer!r}")
    fn = _pure("cache", "reindex")
    return _commit_block(state, fn(state.func, name, (str(buffer[0]), int(buffer[1]))))


@primitive("rfactor", inputs=("loop",), outputs="one")
def rfactor(state: ScheduleState, loop: LoopRV, factor_axis: int = 0) -> BlockRV:
    """Factor the reduction over ``loop`` into an rf block (see reduction.py).

    The block is the one reduction block under the loop.
    """
    var = state.loop_var(loop)
    block = _reduction_block_under(state, loop)
    fn = _pure("reduction", "rfactor")
    return _commit_block(state, fn(state.func, block, var, factor_axis))


@primitive("decompose_reduction", inputs=("block", "loop"), outputs="one")
def decompose_reduction(state: ScheduleState, block: BlockRV, loop: LoopRV) -> BlockRV:
    """Split ``block``'s init into its own block above ``loop`` (see reduction.py)."""
    name = state.block_name(block)
    var = state.loop_var(loop)
    fn = _pure("reduction", "decompose_reduction")
    return _commit_block(state, fn(state.func, name, var))


def _reduction_block_under(state: ScheduleState, loop: LoopRV) -> str:
    from ...ir import IterKind
    from .. import _tree

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
