"""Buffer-layout primitives: set_scope, storage_align, transform_layout and reindex.

Each primitive takes the schedule state and handles, checks every requirement first
(``check_*`` raise ScheduleError naming the primitive), builds the new function with pure
helpers and commits it.

``storage_align`` records its request in the block annotation ``"buffer_dim_align"``: a tuple
of ``(write_buffer_index, axis, factor, offset)`` entries that lowering applies when it
allocates the buffer (stride of ``axis`` padded so that ``stride % factor == offset``).

``transform_layout`` only rewrites buffers allocated in the function: a parameter's layout is
the caller's contract, so it is rejected (transform the layout in the graph instead).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from ...arith import Analyzer
from ...ir import (
    Block,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Expr,
    IterKind,
    IterVar,
    Mutator,
    Stmt,
    Var,
    collect_vars,
    substitute,
)
from .. import _tree
from ..arguments import BUFFER_SPEC, NONNEG_INT, POSITIVE_INT, IndexMapArg
from ..instruction import primitive
from ..state import BlockRV, ScheduleState
from ._blockutil import (
    BufferMutator,
    access_indices,
    add_alloc,
    block_of,
    blocks_accessing,
    bounds_to_region,
    fragment,
    fresh_buffer_name,
    fresh_var_names,
    nest_for,
    point_region,
    prune_alignment,
    replace_buffers,
)
from ._cache_common import (
    check_alignment_agrees,
    check_alone_in_nest,
    check_buffer_index,
    check_intermediate,
    check_scope,
    insert_after,
    top_level_child,
)
from .cache import Scope
from .index_map import IndexMap, bound_index, simplify_index

BufferSpec = Annotated[tuple[str, int], BUFFER_SPEC]
"""A ``("read" | "write", index)`` buffer argument."""

# ------------------------------------------------------------------------------------------


@primitive("set_scope", inputs=("block",))
def set_scope(
    state: ScheduleState, block: BlockRV, buffer_index: int, storage_scope: Scope
) -> None:
    """Change the storage scope of the intermediate buffer ``block`` writes at ``buffer_index``.

    Requires: (1) the block is not the root; (2) the index selects one of its writes; (3) the
    scope is known; (4) the buffer is allocated in the function, not a parameter.

    Rewrite: every use of ``B`` (scope global) refers to ``B`` with the new scope.
    """
    func = state.func
    realize, _ = block_of(state, block)
    buf = check_buffer_index(state, realize.block, buffer_index, write=True)
    check_scope(state, storage_scope)
    check_intermediate(state, func, realize.block, buf)
    if buf.scope == storage_scope:
        return
    new = buf.update(scope=storage_scope)
    state.commit(func.update(body=replace_buffers(func.body, {buf: new})))


@primitive("storage_align", inputs=("block",))
def storage_align(
    state: ScheduleState,
    block: BlockRV,
    buffer_index: int,
    axis: int,
    factor: Annotated[int, POSITIVE_INT],
    offset: Annotated[int, NONNEG_INT],
) -> None:
    """Ask lowering to pad ``axis`` of a written buffer so its stride % factor == offset.

    Requires: (1) the block is not the root; (2) the index selects one of its writes; (3) the
    buffer is an intermediate; (4) ``-ndim <= axis < ndim``; (5) ``factor > 0`` and
    ``0 <= offset < factor``; (6) no other request on the buffer's axis (another block's, or
    another write index's) asks for a different factor/offset.

    Rewrite: the block gains (or updates) annotation ``buffer_dim_align`` with the entry
    ``(buffer_index, axis, factor, offset)`` (axis normalised to be non-negative).
    """
    func = state.func
    realize, _ = block_of(state, block)
    blk = realize.block
    buf = check_buffer_index(state, blk, buffer_index, write=True)
    check_intermediate(state, func, blk, buf)
    if not -buf.ndim <= axis < buf.ndim:
        raise state.error(
            f"argument 'axis': {axis} is out of range for the {buf.ndim}-d buffer \"{buf.name}\"",
            requires="-ndim <= axis < ndim",
            locations=[blk.name],
        )
    if factor <= 0 or not 0 <= offset < factor:
        raise state.error(
            f"arguments 'factor'/'offset': expected factor > 0 and 0 <= offset < factor, "
            f"got factor={factor}, offset={offset}",
            requires="factor > 0, 0 <= offset < factor",
            locations=[blk.name],
        )
    axis %= buf.ndim
    check_alignment_agrees(state, func, realize, buffer_index, axis, (factor, offset))
    old = blk.annotations.get("buffer_dim_align", ())
    assert isinstance(old, tuple)
    entries = [e for e in old if not (isinstance(e, tuple) and e[:2] == (buffer_index, axis))]
    entries.append((buffer_index, axis, factor, offset))
    new_blk = blk.update(
        annotations=blk.annotations.with_item("buffer_dim_align", tuple(sorted(entries)))
    )
    state.commit(_tree.replace_stmt(func, realize, realize.update(block=new_blk)))


@primitive("storage_swizzle", inputs=("block",))
def storage_swizzle(state: ScheduleState, block: BlockRV, buffer_index: int) -> None:
    """Ask lowering to store a written buffer's rows XOR-swizzled in 16-byte chunks.

    Requires: (1) the block is not the root; (2) the index selects one of its writes; (3) the
    buffer is an intermediate of two dimensions or more. (Lowering requires the allocated
    rows, the last axis, to be a power-of-two number of 16-byte chunks.)

    Rewrite: the block gains (or extends) annotation ``buffer_swizzle`` with ``buffer_index``;
    lowering stores chunk ``c`` of row ``r`` at chunk ``c ^ f(r)``
    (:mod:`tilecraft.lower.swizzle_layout`). Meaning is unchanged, only the layout.
    """
    func = state.func
    realize, _ = block_of(state, block)
    blk = realize.block
    buf = check_buffer_index(state, blk, buffer_index, write=True)
    check_intermediate(state, func, blk, buf)
    if buf.ndim < 2:
        raise state.error(
            f'buffer "{buf.name}" has {buf.ndim} dimension(s); a swizzle permutes the chunks '
            "of rows: it needs two or more",
            requires="ndim >= 2",
            locations=[blk.name],
        )
    old = blk.annotations.get("buffer_swizzle", ())
    assert isinstance(old, tuple)
    entries = tuple(sorted({*(i for i in old if type(i) is int), buffer_index}))
    new_blk = blk.update(annotations=blk.annotations.with_item("buffer_swizzle", entries))
    state.commit(_tree.replace_stmt(func, realize, realize.update(block=new_blk)))


# ------------------------------------------------------------------------------------------


def _pick_buffer(state: ScheduleState, blk: Block, buffer: tuple[str, int]) -> Buffer:
    kind, index = buffer
    if kind not in ("read", "write"):
        raise state.error(
            f"argument 'buffer': expected ('read' | 'write', index), got {buffer!r}",
            requires="a (kind, index) pair",
            locations=[blk.name],
        )
    return check_buffer_index(state, blk, index, write=kind == "write")


class _Relayout(BufferMutator):
    """Rewrite every access and region of one buffer through an index map."""

    def __init__(self, old: Buffer, new: Buffer, imap: IndexMap) -> None:
        super().__init__([old])
        self.old, self.new, self.imap = old, new, imap
        self.buffer_map[id(old)] = new

    def visit_BufferLoad(self, node: BufferLoad) -> Expr:  # noqa: N802
        if node.buffer is not self.old:
            out: Expr = self.generic_visit(node)
            return out
        idx = tuple(self.visit(i) for i in node.indices)
        return BufferLoad(self.new, self.imap.map_indices(idx))

    def visit_BufferStore(self, node: BufferStore) -> Stmt:  # noqa: N802
        if node.buffer is not self.old:
            out: Stmt = self.generic_visit(node)
            return out
        idx = tuple(self.visit(i) for i in node.indices)
        return BufferStore(self.new, self.visit(node.value), self.imap.map_indices(idx))

    def visit_BufferRegion(self, node: BufferRegion) -> BufferRegion:  # noqa: N802
        if node.buffer is not self.old:
            out: BufferRegion = self.generic_visit(node)
            return out
        dom = dict(
            zip(self.imap.initial_indices, (self.visit(r) for r in node.region), strict=False)
        )
        ranges = []
        for f in self.imap.final_indices:
            b = bound_index(f, dom)
            if b is None:
                return BufferRegion.full(self.new)
            ranges.append(bounds_to_region([b])[0])
        return BufferRegion(self.new, tuple(ranges))


@primitive("transform_layout", inputs=("block",))
def transform_layout(
    state: ScheduleState,
    block: BlockRV,
    buffer: BufferSpec,
    index_map: Annotated[IndexMap | Callable[..., Any], IndexMapArg()],
) -> None:
    """Store an intermediate buffer in a new layout given by ``index_map``.

    Requires: (1) the block is not the root; (2) ``buffer`` is ``("read" | "write", index)``
    selecting one of its regions; (3) the buffer is allocated in the function (parameters
    keep the caller's layout); (4) the map takes ``ndim`` indices and is a recognised
    bijection (permutation / split / fusion) on the buffer's shape.

    Rewrite: ``B`` of shape ``(m, n)`` becomes ``B`` of shape ``index_map.map_shape((m, n))``;
    every ``B[i, j]`` becomes ``B[index_map(i, j)]`` and every region is mapped;
    ``storage_align`` requests on ``B`` (made for the old layout) are dropped. A callable
    ``index_map`` is turned into an :class:`IndexMap` before the call is recorded.
    """
    func = state.func
    index_map = as_index_map(index_map)
    realize, _ = block_of(state, block)
    buf = _pick_buffer(state, realize.block, buffer)
    check_intermediate(state, func, realize.block, buf)
    if index_map.ndim_in != buf.ndim:
        raise state.error(
            f'index map takes {index_map.ndim_in} indices but "{buf.name}" has '
            f"{buf.ndim} dimensions",
            requires="the map's arity equals the buffer's rank",
            locations=[realize.block.name],
        )
    index_map.inverse(buf.shape)
    new = buf.update(shape=index_map.map_shape(buf.shape))
    body = _Relayout(buf, new, index_map).visit(func.body)
    state.commit(prune_alignment(func.update(body=body), dropped=new))


def as_index_map(value: IndexMap | Callable[..., Any]) -> IndexMap:
    """An IndexMap from an IndexMap or a callable ``lambda i, j: (j, i)``."""
    if isinstance(value, IndexMap):
        return value
    return IndexMap.from_func(value)


@primitive("reindex", inputs=("block",), outputs="one")
def reindex(state: ScheduleState, block: BlockRV, buffer: BufferSpec) -> BlockRV:
    """Stage a buffer access of ``block`` through a buffer indexed by its iterators.

    Requires: (1) the block is not the root; (2) ``buffer`` selects one of its regions;
    (3) every access of the buffer in the block uses the same indices, which only use block
    iterators; (4) the block does not both read and write the buffer; (5) no other block
    accessing the buffer shares the block's outermost loop nest.

    Rewrite (read ``A[vi + vk]`` in a block with iterators vi, vk)::

        (new block "A_reindex" before)  A_reindex[v0, v1] = A[v0 + v1]
        ... A[vi + vk] ...        ->    ... A_reindex[vi, vk] ...

    For a write, the block stores to ``B_reindex`` and a copy block after it writes ``B``.
    Returns the new block.
    """
    func = state.func
    realize, _ = block_of(state, block)
    blk = realize.block
    buf = _pick_buffer(state, blk, buffer)
    idx = check_uniform_access(state, blk, buf)
    if any(r.buffer is buf for r in blk.reads) and any(r.buffer is buf for r in blk.writes):
        raise state.error(
            f'block "{blk.name}" both reads and writes "{buf.name}"',
            requires="the reindexed buffer is only read, or only written, by the block",
            fragment=fragment(blk),
            hint="reindex a buffer the block only reads (or only writes)",
            locations=[blk.name],
        )
    top0, _ = top_level_child(func, realize)
    check_alone_in_nest(
        state,
        top0,
        realize,
        buf,
        blocks_accessing(func, buf, write=True) + blocks_accessing(func, buf, write=False),
    )
    used = {id(v) for i in idx for v in collect_vars(i)}
    ivs = [iv for iv in blk.iter_vars if id(iv.var) in used]
    shape = tuple(iv.dom.extent for iv in ivs)
    rbuf = Buffer(fresh_buffer_name(func, f"{buf.name}_reindex"), shape, buf.dtype, buf.scope)
    name = _tree.fresh_name(func, rbuf.name)
    names = fresh_var_names(func, [f"v{k}" for k in range(len(ivs))])
    new_vars = [Var(n, iv.var.dtype) for n, iv in zip(names, ivs, strict=False)]
    vmap = {iv.var: nv for iv, nv in zip(ivs, new_vars, strict=False)}
    src_idx = tuple(simplify_index(substitute(i, vmap)) for i in idx)
    _check_copy_in_range(state, blk, buf, src_idx, new_vars, ivs)
    r_idx = tuple(iv.var - iv.dom.min for iv in ivs)
    new_r_idx = tuple(simplify_index(substitute(i, vmap)) for i in r_idx)
    write = buffer[0] == "write"
    copy_ivs = tuple(
        IterVar(nv, iv.dom, IterKind.SPATIAL) for nv, iv in zip(new_vars, ivs, strict=False)
    )
    if write:
        body = BufferStore(buf, BufferLoad(rbuf, new_r_idx), src_idx)
        reads = (BufferRegion(rbuf, point_region(new_r_idx)),)
        writes = (BufferRegion(buf, point_region(src_idx)),)
    else:
        body = BufferStore(rbuf, BufferLoad(buf, src_idx), new_r_idx)
        reads = (BufferRegion(buf, point_region(src_idx)),)
        writes = (BufferRegion(rbuf, point_region(new_r_idx)),)
    copy = Block(name, copy_ivs, reads, writes, body)
    loop_names = fresh_var_names(func, [f"ax{k}" for k in range(len(ivs))])
    nest = nest_for(copy, [None] * len(ivs), loop_names)
    new_blk = _Reindex(buf, rbuf, tuple(simplify_index(i) for i in r_idx)).visit(blk)
    new_realize = realize.update(block=new_blk)
    func = _tree.replace_stmt(func, realize, new_realize)
    top, scope = top_level_child(func, new_realize)
    func = insert_after(func, top, scope, nest, before=not write)
    state.commit(prune_alignment(add_alloc(func, rbuf, func.body)))
    return state.block_rv(name)


def _check_copy_in_range(
    state: ScheduleState,
    blk: Block,
    buf: Buffer,
    src_idx: tuple[Expr, ...],
    new_vars: list[Var],
    ivs: list[IterVar],
) -> None:
    """The copy block runs over the whole iteration domain, unguarded: its access of ``buf``
    must stay inside the buffer there (a block may read out-of-range indices under a
    condition, as a padded convolution does after its padding is inlined)."""
    ana = Analyzer()
    for nv, iv in zip(new_vars, ivs, strict=True):
        ana.bind(nv, iv.dom)
    for k, (index, extent) in enumerate(zip(src_idx, buf.shape, strict=True)):
        if not (ana.can_prove(index >= 0) and ana.can_prove(index < extent)):
            raise state.error(
                f'the copy of "{buf.name}" would access index {k} ({index.script()}) outside '
                f"[0, {extent.script() if isinstance(extent, Expr) else extent}) of the buffer",
                requires="the staged access stays in range over the whole iteration domain "
                "(the copy runs unguarded)",
                fragment=fragment(blk),
                hint="the block reads it only under a condition (padding?): reindex the "
                "padded producer before inlining it",
                locations=[blk.name],
            )


def check_uniform_access(state: ScheduleState, blk: Block, buf: Buffer) -> tuple[Expr, ...]:
    """All accesses of ``buf`` in ``blk`` share indices made of block iterators only."""
    accesses = access_indices(blk.body, buf)
    if blk.init is not None:
        accesses += access_indices(blk.init, buf)
    keys = {tuple(str(simplify_index(i).script()) for i in a) for a in accesses}
    ivars = {id(iv.var) for iv in blk.iter_vars}
    if (
        not accesses
        or len(keys) != 1
        or any(id(v) not in ivars for i in accesses[0] for v in collect_vars(i))
    ):
        raise state.error(
            f'block "{blk.name}" accesses "{buf.name}" with differing or non-iterator indices',
            requires="every access uses the same indices, made of block iterators",
            fragment=fragment(blk),
            locations=[blk.name],
        )
    return accesses[0]


class _Reindex(Mutator):
    """Point every access and region of ``old`` at ``new[idx]``."""

    def __init__(self, old: Buffer, new: Buffer, idx: tuple[Expr, ...]) -> None:
        super().__init__()
        self.old, self.new, self.idx = old, new, idx

    def visit_BufferLoad(self, node: BufferLoad) -> Expr:  # noqa: N802
        node = self.generic_visit(node)
        return BufferLoad(self.new, self.idx) if node.buffer is self.old else node

    def visit_BufferStore(self, node: BufferStore) -> Stmt:  # noqa: N802
        node = self.generic_visit(node)
        if node.buffer is self.old:
            return BufferStore(self.new, node.value, self.idx)
        return node

    def visit_BufferRegion(self, node: BufferRegion) -> BufferRegion:  # noqa: N802
        if node.buffer is self.old:
            return BufferRegion(self.new, point_region(self.idx))
        return node
