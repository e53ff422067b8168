"""Cache primitives: cache_read and cache_write.

Each primitive takes the schedule state and handles, checks every requirement first
(``check_*`` raise ScheduleError naming the primitive), builds the new function with pure
helpers and commits it. New buffers are allocated at the root block; new copy blocks are
placed in their own loop nest at the scope level, right after the producer (cache_read) or
the block (cache_write), and are meant to be localized with compute_at / reverse_compute_at.
The buffer-layout primitives live in :mod:`.layout`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from ...ir import SCOPES, BlockRealize, Buffer, BufferRegion, PrimFunc, SeqStmt, Stmt
from .. import _tree
from ..arguments import OneOf
from ..instruction import primitive
from ..state import BlockRV, ScheduleState
from ._blockutil import (
    add_alloc,
    block_of,
    blocks_accessing,
    fresh_buffer_name,
    prune_alignment,
    replace_buffers,
)
from ._cache_chain import cache_read_in_nest, shares_nest
from ._cache_common import (
    check_alone_in_nest,
    check_buffer_index,
    check_scope,
    copy_nest,
    insert_after,
    top_level_child,
    whole_written_region,
)

Scope = Annotated[str, OneOf(SCOPES)]
"""A storage scope argument (checked against :data:`tilecraft.ir.SCOPES`)."""

# ------------------------------------------------------------------------------------------


@primitive("cache_write", inputs=("block",), outputs="one")
def cache_write(
    state: ScheduleState, block: BlockRV, write_buffer_index: int, storage_scope: Scope
) -> BlockRV:
    """Make ``block`` write a new ``storage_scope`` buffer and copy it back afterwards.

    Requires: (1) the block is not the root; (2) ``write_buffer_index`` selects one of its
    writes; (3) the scope is known; (4) the block is the only writer of that buffer.

    Rewrite::

        C[vi, vj] = ...         ->   C_local[vi, vj] = ...
                                     C[v0, v1] = C_local[v0, v1]  # new block "C_local"

    Returns the copy block.
    """
    func = state.func
    realize, _ = block_of(state, block)
    buf = check_buffer_index(state, realize.block, write_buffer_index, write=True)
    check_scope(state, storage_scope)
    check_only_writer(state, func, realize, buf)
    cache = Buffer(
        fresh_buffer_name(func, f"{buf.name}_{storage_scope.replace('.', '_')}"),
        buf.shape,
        buf.dtype,
        storage_scope,
    )
    name = _tree.fresh_name(func, cache.name)
    region = whole_written_region(func, buf)
    top0, _ = top_level_child(func, realize)
    check_alone_in_nest(state, top0, realize, buf, blocks_accessing(func, buf, write=False))
    new_realize = realize.update(block=replace_buffers(realize.block, {buf: cache}))
    func = _tree.replace_stmt(func, realize, new_realize)
    top, scope = top_level_child(func, new_realize)
    nest = copy_nest(func, name, cache, buf, region)
    func = insert_after(func, top, scope, nest)
    state.commit(prune_alignment(add_alloc(func, cache, func.body)))
    return state.block_rv(name)


def check_only_writer(
    state: ScheduleState, func: PrimFunc, realize: BlockRealize, buf: Buffer
) -> None:
    """``realize`` is the only block writing ``buf``."""
    others = [r.block.name for r in blocks_accessing(func, buf, write=True) if r is not realize]
    if others:
        raise state.error(
            f'buffer "{buf.name}" is also written by {_tree.names_of(others)}',
            requires=f'"{realize.block.name}" is the only writer of the buffer',
            hint="cache before decompose_reduction",
            locations=[realize.block.name, *others],
        )


@primitive("cache_read", inputs=("block", "consumer_blocks"), outputs="one")
def cache_read(
    state: ScheduleState,
    block: BlockRV,
    read_buffer_index: int,
    storage_scope: Scope,
    consumer_blocks: Sequence[BlockRV] | None = None,
) -> BlockRV:
    """Copy a buffer ``block`` reads into a new ``storage_scope`` buffer and read that.

    Requires: (1) the block is not the root; (2) ``read_buffer_index`` selects one of its
    reads; (3) the scope is known; (4) every name in ``consumer_blocks`` is a block reading the
    buffer; (5) the buffer has at most one writer in the function.

    Rewrite: a block ``"A_shared"`` (``A_shared[v] = A[v]`` over the whole buffer) is placed
    after the buffer's producer (at the start of the function for a parameter); ``block`` and
    the chosen consumers (default: every reader) read ``A_shared`` instead. When chosen readers
    share the producer's loop nest (it was moved by ``compute_at``), the copy goes inside that
    nest instead (see :mod:`._cache_chain`).

    Returns the copy block.
    """
    func = state.func
    realize, _ = block_of(state, block)
    buf = check_buffer_index(state, realize.block, read_buffer_index, write=False)
    check_scope(state, storage_scope)
    writers = blocks_accessing(func, buf, write=True)
    readers = [
        r for r in blocks_accessing(func, buf, write=False) if all(r is not w for w in writers)
    ]
    chosen = check_consumers(state, realize, buf, readers, consumer_blocks)
    if len(writers) > 1:
        raise state.error(
            f'buffer "{buf.name}" has {len(writers)} writers',
            requires="the cached buffer has at most one writer",
            locations=[r.block.name for r in writers],
        )
    nested = False
    if writers:
        top0, _ = top_level_child(func, writers[0])
        nested = shares_nest(top0, writers[0], chosen)
    cache = Buffer(
        fresh_buffer_name(func, f"{buf.name}_{storage_scope.replace('.', '_')}"),
        buf.shape,
        buf.dtype,
        storage_scope,
    )
    name = _tree.fresh_name(func, cache.name)
    if nested:  # a cache chain: the copy goes inside the nest the producer shares
        func = cache_read_in_nest(state, func, writers[0], chosen, buf, cache, name)
        state.commit(add_alloc(func, cache, func.body))
        return state.block_rv(name)
    region = whole_written_region(func, buf) if writers else BufferRegion.full(buf).region
    mapping: dict[int, Stmt | None] = {
        id(r): r.update(block=replace_buffers(r.block, {buf: cache})) for r in chosen
    }
    nest = copy_nest(func, name, buf, cache, region)
    if writers:
        top, scope = top_level_child(func, writers[0])
        func = insert_after(func, top, scope, nest)
    else:
        root = _tree.root_block(func)
        if root is None:
            raise state.error("the function has no root block")
        body = root.block.body
        first = body.stmts[0] if isinstance(body, SeqStmt) else body
        func = insert_after(func, first, root, nest, before=True)
    func = _tree.replace_stmts(func, mapping)
    state.commit(add_alloc(func, cache, func.body))
    return state.block_rv(name)


def check_consumers(
    state: ScheduleState,
    realize: BlockRealize,
    buf: Buffer,
    readers: list[BlockRealize],
    consumer_blocks: Sequence[BlockRV] | None,
) -> list[BlockRealize]:
    """Resolve ``consumer_blocks`` into realizes that read ``buf`` (``realize`` first)."""
    if consumer_blocks is None:
        return readers
    consumers = [state.block_name(b) for b in consumer_blocks]
    by_name = {r.block.name: r for r in readers}
    bad = [n for n in consumers if n not in by_name]
    if bad:
        raise state.error(
            f'{_tree.names_of(bad)} do not read "{buf.name}"',
            requires="every consumer block reads the cached buffer",
            locations=bad,
        )
    names = list(dict.fromkeys([realize.block.name, *consumers]))
    return [by_name[n] for n in names]
