"""Traced, handle-level primitives over the pure block/buffer builders.

The pure functions of :mod:`.compute_location`, :mod:`.cache` and :mod:`.reduction` take and
return PrimFuncs (blocks by name, loops by Var) and raise ScheduleError on a broken
requirement. Each traced primitive here resolves its handles (stale ones raise
ScheduleError), calls the builder, commits the result and returns new blocks as handles;
its arguments were already checked against its annotations by ``@primitive``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any

from ...ir import SCOPES, IterKind, PrimFunc
from .. import _tree
from ..arguments import BUFFER_SPEC, LOCATION, NONNEG_INT, POSITIVE_INT, IndexMapArg, OneOf
from ..instruction import primitive
from ..state import INLINE, ROOT, BlockRV, LoopRV, ScheduleState
from . import cache as _cache
from . import compute_location as _location
from . import reduction as _reduction
from .index_map import IndexMap

Scope = Annotated[str, OneOf(SCOPES)]
BufferSpec = Annotated[tuple[str, int], BUFFER_SPEC]


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
    name = state.block_name(block)
    if loop.special == ROOT:
        return
    if loop.special == INLINE:
        inline = _location.reverse_compute_inline if reverse else _location.compute_inline
        state.commit(inline(state.func, name))
        return
    var = state.loop_var(loop)
    move = _location.reverse_compute_at if reverse else _location.compute_at
    state.commit(move(state.func, name, var, preserve_unit_loops, index))


@primitive("compute_at", inputs=("block", "loop"))
def compute_at(
    state: ScheduleState,
    block: BlockRV,
    loop: Annotated[LoopRV, LOCATION],
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
    loop: Annotated[LoopRV, LOCATION],
    preserve_unit_loops: bool = False,
    index: int = -1,
) -> None:
    """Move consumer ``block`` under ``loop`` (see compute_location.reverse_compute_at)."""
    _move(state, block, loop, preserve_unit_loops, index, reverse=True)


@primitive("compute_inline", inputs=("block",))
def compute_inline(state: ScheduleState, block: BlockRV) -> None:
    """Inline producer ``block`` into its consumers (see compute_location.compute_inline)."""
    name = state.block_name(block)
    state.commit(_location.compute_inline(state.func, name))


@primitive("reverse_compute_inline", inputs=("block",))
def reverse_compute_inline(state: ScheduleState, block: BlockRV) -> None:
    """Inline consumer ``block`` into its producer (see compute_location)."""
    name = state.block_name(block)
    state.commit(_location.reverse_compute_inline(state.func, name))


@primitive("cache_read", inputs=("block", "consumer_blocks"), outputs="one")
def cache_read(
    state: ScheduleState,
    block: BlockRV,
    read_buffer_index: int,
    storage_scope: Scope,
    consumer_blocks: Sequence[BlockRV] | None = None,
) -> BlockRV:
    """Stage a buffer ``block`` reads through a new ``storage_scope`` buffer (see cache.py)."""
    name = state.block_name(block)
    consumers = None if consumer_blocks is None else [state.block_name(b) for b in consumer_blocks]
    result = _cache.cache_read(state.func, name, read_buffer_index, storage_scope, consumers)
    return _commit_block(state, result)


@primitive("cache_write", inputs=("block",), outputs="one")
def cache_write(
    state: ScheduleState, block: BlockRV, write_buffer_index: int, storage_scope: Scope
) -> BlockRV:
    """Compute ``block`` into a new ``storage_scope`` buffer, then copy out (see cache.py)."""
    name = state.block_name(block)
    result = _cache.cache_write(state.func, name, write_buffer_index, storage_scope)
    return _commit_block(state, result)


@primitive("set_scope", inputs=("block",))
def set_scope(
    state: ScheduleState, block: BlockRV, buffer_index: int, storage_scope: Scope
) -> None:
    """Change the storage scope of a buffer ``block`` writes (see cache.py)."""
    name = state.block_name(block)
    state.commit(_cache.set_scope(state.func, name, buffer_index, storage_scope))


@primitive("storage_align", inputs=("block",))
def storage_align(
    state: ScheduleState,
    block: BlockRV,
    buffer_index: int,
    axis: int,
    factor: Annotated[int, POSITIVE_INT],
    offset: Annotated[int, NONNEG_INT],
) -> None:
    """Pad a buffer's stride on ``axis`` to ``factor * k + offset`` (see cache.py)."""
    name = state.block_name(block)
    state.commit(_cache.storage_align(state.func, name, buffer_index, axis, factor, offset))


@primitive("transform_layout", inputs=("block",))
def transform_layout(
    state: ScheduleState,
    block: BlockRV,
    buffer: BufferSpec,
    index_map: Annotated[IndexMap | Callable[..., Any], IndexMapArg()],
) -> None:
    """Re-layout a buffer of ``block`` with ``index_map`` (see cache.py).

    A callable ``index_map`` is turned into an :class:`IndexMap` before the call is recorded.
    """
    name = state.block_name(block)
    imap = as_index_map(index_map)
    state.commit(_cache.transform_layout(state.func, name, buffer, imap))


def as_index_map(value: IndexMap | Callable[..., Any]) -> IndexMap:
    """An IndexMap from an IndexMap or a callable ``lambda i, j: (j, i)``."""
    if isinstance(value, IndexMap):
        return value
    return IndexMap.from_func(value)


@primitive("reindex", inputs=("block",), outputs="one")
def reindex(state: ScheduleState, block: BlockRV, buffer: BufferSpec) -> BlockRV:
    """Stage an access of ``block`` through a buffer indexed by its iterators (see cache.py)."""
    name = state.block_name(block)
    return _commit_block(state, _cache.reindex(state.func, name, buffer))


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
