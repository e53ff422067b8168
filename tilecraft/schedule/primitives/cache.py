"""Buffer primitives: cache_read, cache_write, set_scope, storage_align, transform_layout,
reindex.

All functions are pure (PrimFunc in, new PrimFunc out). New buffers are allocated at the
root block; new copy blocks are placed in their own loop nest at the scope level, right after
the producer (cache_read) or the block (cache_write), and are meant to be localized with
compute_at / reverse_compute_at.

``storage_align`` records its request in the block annotation ``"buffer_dim_align"``: a tuple
of ``(write_buffer_index, axis, factor, offset)`` entries that lowering applies when it
allocates the buffer (stride of ``axis`` padded so that ``stride % factor == offset``).

``transform_layout`` only rewrites buffers allocated in the function: a parameter's layout is
the caller's contract, so it is rejected (transform the layout in the graph instead).
"""

from __future__ import annotations

from ...arith import Analyzer
from ...errors import ScheduleError
from ...ir import (
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Expr,
    IterKind,
    IterVar,
    Mutator,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
    collect_vars,
)
from .. import _tree
from ._blockutil import (
    access_indices,
    add_alloc,
    blocks_accessing,
    bounds_to_region,
    fragment,
    fresh_buffer_name,
    fresh_var_names,
    get_block,
    nest_for,
    point_region,
    prune_alignment,
    replace_buffers,
)
from ._cache_chain import cache_read_in_nest, shares_nest
from ._cache_common import check_alignment_agrees as check_alignment_agrees
from ._cache_common import check_alone_in_nest as check_alone_in_nest
from ._cache_common import check_buffer_index as check_buffer_index
from ._cache_common import check_intermediate as check_intermediate
from ._cache_common import check_scope as check_scope
from ._cache_common import copy_nest, insert_after, top_level_child, whole_written_region
from .index_map import IndexMap, bound_index, simplify_index

# ------------------------------------------------------------------------------------------


def cache_write(
    func: PrimFunc, block: str, write_buffer_index: int, storage_scope: str
) -> tuple[PrimFunc, str]:
    """Make ``block`` write a new ``storage_scope`` buffer and copy it back afterwards.

    Requires: (1) the block is not the root; (2) ``write_buffer_index`` selects one of its
    writes; (3) the scope is known; (4) the block is the only writer of that buffer.

    Rewrite::

        C[vi, vj] = ...         ->   C_local[vi, vj] = ...
                                     C[v0, v1] = C_local[v0, v1]  # new block "C_local"

    Returns the new function and the name of the copy block.
    """
    prim = "cache_write"
    realize, _ = get_block(func, block, prim)
    buf = check_buffer_index(prim, realize.block, write_buffer_index, write=True)
    check_scope(prim, storage_scope)
    check_only_writer(prim, func, realize, buf)
    cache = Buffer(
        fresh_buffer_name(func, f"{buf.name}_{storage_scope.replace('.', '_')}"),
        buf.shape,
        buf.dtype,
        storage_scope,
    )
    name = _tree.fresh_name(func, cache.name)
    region = whole_written_region(func, buf)
    top0, _ = top_level_child(func, realize)
    check_alone_in_nest(prim, top0, realize, buf, blocks_accessing(func, buf, write=False))
    new_realize = realize.update(block=replace_buffers(realize.block, {buf: cache}))
    func = _tree.replace_stmt(func, realize, new_realize)
    top, scope = top_level_child(func, new_realize)
    nest = copy_nest(func, name, cache, buf, region)
    func = insert_after(func, top, scope, nest)
    return prune_alignment(add_alloc(func, cache, func.body)), name


def check_only_writer(prim: str, func: PrimFunc, realize: BlockRealize, buf: Buffer) -> None:
    """``realize`` is the only block writing ``buf``."""
    others = [r.block.name for r in blocks_accessing(func, buf, write=True) if r is not realize]
    if others:
        raise ScheduleError(
            prim,
            f'buffer "{buf.name}" is also written by {_tree.names_of(others)}',
            requires=f'"{realize.block.name}" is the only writer of the buffer',
            hint="cache before decompose_reduction",
            locations=[realize.block.name, *others],
        )


def cache_read(
    func: PrimFunc,
    block: str,
    read_buffer_index: int,
    storage_scope: str,
    consumer_blocks: list[str] | None = None,
) -> tuple[PrimFunc, str]:
    """Copy a buffer ``block`` reads into a new ``storage_scope`` buffer and read that.

    Requires: (1) the block is not the root; (2) ``read_buffer_index`` selects one of its
    reads; (3) the scope is known; (4) every name in ``consumer_blocks`` is a block reading the
    buffer; (5) the buffer has at most one writer in the function.

    Rewrite: a block ``"A_shared"`` (``A_shared[v] = A[v]`` over the whole buffer) is placed
    after the buffer's producer (at the start of the function for a parameter); ``block`` and
    the chosen consumers (default: every reader) read ``A_shared`` instead. When chosen readers
    share the producer's loop nest (it was moved by ``compute_at``), the copy goes inside that
    nest instead (see :mod:`._cache_chain`).

    Returns the new function and the name of the copy block.
    """
    prim = "cache_read"
    realize, _ = get_block(func, block, prim)
    buf = check_buffer_index(prim, realize.block, read_buffer_index, write=False)
    check_scope(prim, storage_scope)
    writers = blocks_accessing(func, buf, write=True)
    readers = [
        r for r in blocks_accessing(func, buf, write=False) if all(r is not w for w in writers)
    ]
    chosen = check_consumers(prim, func, block, buf, readers, consumer_blocks)
    if len(writers) > 1:
        raise ScheduleError(
            prim,
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
        func = cache_read_in_nest(prim, func, writers[0], chosen, buf, cache, name)
        return add_alloc(func, cache, func.body), name
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
            raise ScheduleError(prim, "the function has no root block")
        body = root.block.body
        first = body.stmts[0] if isinstance(body, SeqStmt) else body
        func = insert_after(func, first, root, nest, before=True)
    func = _tree.replace_stmts(func, mapping)
    return add_alloc(func, cache, func.body), name


def check_consumers(
    prim: str,
    func: PrimFunc,
    block: str,
    buf: Buffer,
    readers: list[BlockRealize],
    consumer_blocks: list[str] | None,
) -> list[BlockRealize]:
    """Resolve ``consumer_blocks`` into realizes that read ``buf``."""
    if consumer_blocks is None:
        return readers
    by_name = {r.block.name: r for r in readers}
    bad = [n for n in consumer_blocks if n not in by_name]
    if bad:
        raise ScheduleError(
            prim,
            f'{_tree.names_of(bad)} do not read "{buf.name}"',
            requires="every consumer block reads the cached buffer",
            locations=bad,
        )
    names = list(dict.fromkeys([block, *consumer_blocks]))
    return [by_name[n] for n in names]


# ------------------------------------------------------------------------------------------


def set_scope(func: PrimFunc, block: str, buffer_index: int, storage_scope: str) -> PrimFunc:
    """Change the storage scope of the intermediate buffer ``block`` writes at ``buffer_index``.

    Requires: (1) the block is not the root; (2) the index selects one of its writes; (3) the
    scope is known; (4) the buffer is allocated in the function, not a parameter.

    Rewrite: every use of ``B`` (scope global) refers to ``B`` with the new scope.
    """
    prim = "set_scope"
    realize, _ = get_block(func, block, prim)
    buf = check_buffer_index(prim, realize.block, buffer_index, write=True)
    check_scope(prim, storage_scope)
    check_intermediate(prim, func, realize.block, buf)
    if buf.scope == storage_scope:
        return func
    new = buf.update(scope=storage_scope)
    body = replace_buffers(func.body, {buf: new})
    return func.update(body=body)


def storage_align(
    func: PrimFunc, block: str, buffer_index: int, axis: int, factor: int, offset: int
) -> PrimFunc:
    """Ask lowering to pad ``axis`` of a written buffer so its stride % factor == offset.

    Requires: (1) the block is not the root; (2) the index selects one of its writes; (3) the
    buffer is an intermediate; (4) ``-ndim <= axis < ndim``; (5) ``factor > 0`` and
    ``0 <= offset < factor``; (6) no other request on the buffer's axis (another block's, or
    another write index's) asks for a different factor/offset.

    Rewrite: the block gains (or updates) annotation ``buffer_dim_align`` with the entry
    ``(buffer_index, axis, factor, offset)`` (axis normalised to be non-negative).
    """
    prim = "storage_align"
    realize, _ = get_block(func, block, prim)
    blk = realize.block
    buf = check_buffer_index(prim, blk, buffer_index, write=True)
    check_intermediate(prim, func, blk, buf)
    if not -buf.ndim <= axis < buf.ndim:
        raise ScheduleError(
            prim,
            f"argument 'axis': {axis} is out of range for the {buf.ndim}-d buffer \"{buf.name}\"",
            requires="-ndim <= axis < ndim",
            locations=[blk.name],
        )
    if factor <= 0 or not 0 <= offset < factor:
        raise ScheduleError(
            prim,
            f"arguments 'factor'/'offset': expected factor > 0 and 0 <= offset < factor, "
            f"got factor={factor}, offset={offset}",
            requires="factor > 0, 0 <= offset < factor",
            locations=[blk.name],
        )
    axis %= buf.ndim
    check_alignment_agrees(prim, func, realize, buffer_index, axis, (factor, offset))
    old = blk.annotations.get("buffer_dim_align", ())
    assert isinstance(old, tuple)
    entries = [e for e in old if not (isinstance(e, tuple) and e[:2] == (buffer_index, axis))]
    entries.append((buffer_index, axis, factor, offset))
    new_blk = blk.update(
        annotations=blk.annotations.with_item("buffer_dim_align", tuple(sorted(entries)))
    )
    return _tree.replace_stmt(func, realize, realize.update(block=new_blk))


# ------------------------------------------------------------------------------------------


def _pick_buffer(prim: str, blk: Block, buffer: tuple[str, int]) -> Buffer:
    kind, index = buffer
    if kind not in ("read", "write"):
        raise ScheduleError(
            prim,
            f"argument 'buffer': expected ('read' | 'write', index), got {buffer!r}",
            requires="a (kind, index) pair",
            locations=[blk.name],
        )
    return check_buffer_index(prim, blk, index, write=kind == "write")


class _Relayout(Mutator):
    """Rewrite every access and region of one buffer through an index map."""

    def __init__(self, old: Buffer, new: Buffer, imap: IndexMap) -> None:
        super().__init__()
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


def transform_layout(
    func: PrimFunc, block: str, buffer: tuple[str, int], index_map: IndexMap
) -> PrimFunc:
    """Store an intermediate buffer in a new layout given by ``index_map``.

    Requires: (1) the block is not the root; (2) ``buffer`` is ``("read" | "write", index)``
    selecting one of its regions; (3) the buffer is allocated in the function (parameters
    keep the caller's layout); (4) the map takes ``ndim`` indices and is a recognised
    bijection (permutation / split / fusion) on the buffer's shape.

    Rewrite: ``B`` of shape ``(m, n)`` becomes ``B`` of shape ``index_map.map_shape((m, n))``;
    every ``B[i, j]`` becomes ``B[index_map(i, j)]`` and every region is mapped;
    ``storage_align`` requests on ``B`` (made for the old layout) are dropped.
    """
    prim = "transform_layout"
    realize, _ = get_block(func, block, prim)
    buf = _pick_buffer(prim, realize.block, buffer)
    check_intermediate(prim, func, realize.block, buf)
    if index_map.ndim_in != buf.ndim:
        raise ScheduleError(
            prim,
            f'index map takes {index_map.ndim_in} indices but "{buf.name}" has '
            f"{buf.ndim} dimensions",
            requires="the map's arity equals the buffer's rank",
            locations=[block],
        )
    index_map.inverse(buf.shape)
    new = buf.update(shape=index_map.map_shape(buf.shape))
    body = _Relayout(buf, new, index_map).visit(func.body)
    return prune_alignment(func.update(body=body), dropped=new)


def reindex(func: PrimFunc, block: str, buffer: tuple[str, int]) -> tuple[PrimFunc, str]:
    """Stage a buffer access of ``block`` through a buffer indexed by its iterators.

    Requires: (1) the block is not the root; (2) ``buffer`` selects one of its regions;
    (3) every access of the buffer in the block uses the same indices, which only use block
    iterators; (4) the block does not both read and write the buffer; (5) no other block
    accessing the buffer shares the block's outermost loop nest.

    Rewrite (read ``A[vi + vk]`` in a block with iterators vi, vk)::

        (new block "A_reindex" before)  A_reindex[v0, v1] = A[v0 + v1]
        ... A[vi + vk] ...        ->    ... A_reindex[vi, vk] ...

    For a write, the block stores to ``B_reindex`` and a copy block after it writes ``B``.
    Returns the new function and the name of the new block.
    """
    prim = "reindex"
    realize, _ = get_block(func, block, prim)
    blk = realize.block
    buf = _pick_buffer(prim, blk, buffer)
    idx = check_uniform_access(prim, blk, buf)
    if any(r.buffer is buf for r in blk.reads) and any(r.buffer is buf for r in blk.writes):
        raise ScheduleError(
            prim,
            f'block "{blk.name}" both reads and writes "{buf.name}"',
            requires="the reindexed buffer is only read, or only written, by the block",
            fragment=fragment(blk),
            hint="reindex a buffer the block only reads (or only writes)",
            locations=[blk.name],
        )
    top0, _ = top_level_child(func, realize)
    check_alone_in_nest(
        prim,
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
    from ...ir import substitute

    src_idx = tuple(simplify_index(substitute(i, vmap)) for i in idx)
    _check_copy_in_range(prim, blk, buf, src_idx, new_vars, ivs)
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
    return prune_alignment(add_alloc(func, rbuf, func.body)), name


def _check_copy_in_range(
    prim: str,
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
            raise ScheduleError(
                prim,
                f'the copy of "{buf.name}" would access index {k} ({index.script()}) outside '
                f"[0, {extent.script() if isinstance(extent, Expr) else extent}) of the buffer",
                requires="the staged access stays in range over the whole iteration domain "
                "(the copy runs unguarded)",
                fragment=fragment(blk),
                hint="the block reads it only under a condition (padding?): reindex the "
                "padded producer before inlining it",
                locations=[blk.name],
            )


def check_uniform_access(prim: str, blk: Block, buf: Buffer) -> tuple[Expr, ...]:
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
        raise ScheduleError(
            prim,
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
