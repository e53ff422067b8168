"""Shared machinery of compute_at and reverse_compute_at (package-private).

One routine, :func:`move_block`, implements both directions: ``reverse=False`` moves a
producer under a loop of its consumers, ``reverse=True`` a consumer under a loop of its
producers. The checks raise :class:`~tilecraft.errors.ScheduleError` on the first broken
requirement, before anything is built.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from ...ir import (
    Block,
    BlockRealize,
    Buffer,
    For,
    IntImm,
    IterKind,
    PrimFunc,
    Range,
    Stmt,
    relaxed_loop,
)
from .. import _tree
from ..state import BlockRV, LoopRV, ScheduleState
from ._blockutil import (
    block_of,
    blocks_accessing,
    body_items,
    bounds_to_region,
    contains,
    direct_dims,
    fragment,
    fresh_var_names,
    insert_at,
    is_ancestor,
    is_param,
    loop_of,
    loops_between,
    nest_for,
    region_bounds,
    union_bounds,
    var_dom,
)
from ._dataflow import (
    add_predicate,
    check_exact_production,
    check_producers_finish,
    check_reads_within,
    inner_loops,
    shared_outer_conditions,
)
from .index_map import Bounds, const_value


def move_block(
    state: ScheduleState,
    block: BlockRV,
    loop_rv: LoopRV,
    preserve: bool,
    index: int,
    *,
    reverse: bool,
) -> PrimFunc:
    """The function with ``block`` moved under ``loop_rv`` (compute_at, or reverse_compute_at
    if ``reverse``); every requirement is checked first, nothing is committed."""
    func = state.func
    realize, path = block_of(state, block)
    loop, loop_path = loop_of(state, loop_rv)
    name = realize.block.name
    check_loop_not_above(state, realize, path, loop)
    check_same_scope(state, realize, path, loop, loop_path)
    blk = realize.block
    if reverse:
        buffers = [r.buffer for r in blk.reads]
        others = _related(func, blk, buffers, write=True)
    else:
        check_single_intermediate_output(state, func, blk)
        buffers = [blk.writes[0].buffer]
        others = _related(func, blk, buffers, write=False)
    check_rerunnable(state, realize)
    check_related_under_loop(state, func, name, others, loop, reverse=reverse)
    under = _outermost([(r, p) for r, p in others if is_ancestor(p, loop)])
    enclosing = [*_tree.loops_in_path(loop_path), loop]
    if reverse:
        check_producers_finish(state, name, under, enclosing)
        check_exact_production(state, name, under, buffers, loop)
    # compute_at relaxes the region over the enclosing thread loops that share the produced
    # buffer's storage (see tilecraft.ir.thread_scope); reverse_compute_at never does: a
    # consumer reading what other threads produce in the same iteration would read, in the
    # schedule's serial meaning, elements not produced yet
    relax = [] if reverse else [lp for lp in enclosing if relaxed_loop(buffers[0].scope, lp)]
    warn_block_recompute(name, buffers[0], relax)
    bounds_by_buf = demanded_regions(
        state, func, under, buffers, loop, reverse=reverse, relax=relax
    )
    ranges = _iter_ranges(state, blk, bounds_by_buf, reverse=reverse)
    if reverse:
        check_reads_within(state, blk, ranges, bounds_by_buf)
    position = check_position(state, func, loop, blk, [r for r, _ in under], index, reverse=reverse)
    names = fresh_var_names(func, [f"ax{k}" for k in range(len(blk.iter_vars))])
    nest = nest_for(blk, ranges, names, preserve_unit_loops=preserve, outer=var_dom(enclosing))
    if reverse:  # where no producer runs, the consumer must not run either
        nest = add_predicate(nest, shared_outer_conditions(under, inner_loops(under, loop)))
    return _tree.replace_stmts(func, {id(realize): None, id(loop): insert_at(loop, nest, position)})


def warn_block_recompute(name: str, buf: Buffer, relax: Sequence[For]) -> None:
    """Warn when the region ``name`` produces into ``buf`` is relaxed over blockIdx loops:
    every block then computes all of it (right, but that many times the work)."""
    blocks = [lp for lp in relax if (lp.thread or "").startswith("blockIdx")]
    if not blocks:
        return
    count = 1
    for lp in blocks:
        count = count * lp.extent.value if isinstance(lp.extent, IntImm) and count else 0
    if count == 1:
        return
    many = f"{count} blocks" if count else "all blocks"
    tags = ", ".join(sorted({lp.thread or "" for lp in blocks}))
    warnings.warn(
        f"compute_at: every block recomputes all of buffer {buf.name!r} that block {name!r} "
        f"produces: the buffer is {buf.scope} (one copy for the grid), so its region is "
        f"relaxed over {tags} and {many} each compute the whole region (right, but that many "
        "times the work). Remedy: give it a block-private scope first (sch.set_scope(block, "
        "0, 'shared') or 'local'), compute it at a loop outside the blockIdx loops, or "
        "compute_inline it",
        UserWarning,
        stacklevel=4,
    )


def _related(
    func: PrimFunc, blk: Block, buffers: Sequence[Buffer], *, write: bool
) -> list[tuple[BlockRealize, _tree.Path]]:
    """Other blocks writing (``write``) or reading any of ``buffers``, with their paths."""
    out = []
    for node, p in _tree.walk(func.body):
        if not isinstance(node, BlockRealize) or node.block is blk or not p:
            continue
        regions = node.block.writes if write else node.block.reads
        if any(r.buffer is b for r in regions for b in buffers):
            out.append((node, p))
    return out


def _outermost(
    related: list[tuple[BlockRealize, _tree.Path]],
) -> list[tuple[BlockRealize, _tree.Path]]:
    """Drop the blocks nested in another related block: the outer block's regions cover
    theirs, and theirs may use the outer block's iterators, which are not loops."""
    return [(r, p) for r, p in related if not any(is_ancestor(p, o) for o, _ in related)]


def check_rerunnable(state: ScheduleState, realize: BlockRealize) -> None:
    """Running the block again on an element gives the same result: it has an init, or it
    reads no buffer it writes (an update without init would accumulate twice)."""
    blk = realize.block
    written = _tree.buffers_written(blk)
    if blk.init is not None or not any(b is w for b in _tree.buffers_read(blk) for w in written):
        return
    raise state.error(
        f'block "{blk.name}" updates a buffer it reads and has no init',
        requires="the block has an init or reads no buffer it writes (the moved block may "
        "run more than once on an element when the computed region is over-approximated)",
        fragment=fragment(realize),
        hint="move the block before decompose_reduction",
        locations=[blk.name],
    )


def check_loop_not_above(
    state: ScheduleState, realize: BlockRealize, path: _tree.Path, loop: For
) -> None:
    """The target loop must not enclose the block being moved."""
    if is_ancestor(path, loop):
        raise state.error(
            f'block "{realize.block.name}" is already under loop "{loop.loop_var.name}"',
            requires="the target loop is not an ancestor of the block",
            fragment=fragment(loop, {id(loop): "<- target loop"}),
            hint="choose a loop of the consumer (producer) nest",
            locations=[realize.block.name, loop.loop_var.name],
        )


def check_same_scope(
    state: ScheduleState, realize: BlockRealize, path: _tree.Path, loop: For, loop_path: _tree.Path
) -> None:
    """Block and loop must have the same scope block."""
    if _tree.scope_of(path) is not _tree.scope_of(loop_path):
        raise state.error(
            f'block "{realize.block.name}" and loop "{loop.loop_var.name}" are in different scopes',
            requires="the block and the loop share their scope block",
            locations=[realize.block.name, loop.loop_var.name],
        )


def check_single_intermediate_output(state: ScheduleState, func: PrimFunc, blk: Block) -> None:
    """The block writes one buffer, allocated in the function, with no other writer."""
    bufs = _tree.buffers_written(blk)
    if len(bufs) != 1:
        raise state.error(
            f'block "{blk.name}" writes {len(bufs)} buffers',
            requires="the block writes exactly one buffer",
            locations=[blk.name],
        )
    buf = bufs[0]
    if is_param(func, buf):
        raise state.error(
            f'block "{blk.name}" writes the function output "{buf.name}"',
            requires="the block writes an intermediate buffer (not a parameter)",
            hint="cache_write the block first, then compute_at the copy or this block",
            locations=[blk.name],
        )
    writers = [r.block.name for r in blocks_accessing(func, buf, write=True) if r.block is not blk]
    if writers:
        raise state.error(
            f'buffer "{buf.name}" has other writers {_tree.names_of(writers)}',
            requires="the block is the only writer of its output",
            hint="decompose_reduction after compute_at, not before",
            locations=[blk.name],
        )


def check_related_under_loop(
    state: ScheduleState,
    func: PrimFunc,
    name: str,
    others: Sequence[tuple[BlockRealize, _tree.Path]],
    loop: For,
    *,
    reverse: bool,
) -> None:
    """Every consumer (producer) exists and lies under the target loop."""
    role = "producer" if reverse else "consumer"
    if not others:
        raise state.error(
            f'block "{name}" has no {role}s',
            requires=f"the block has at least one {role}",
            locations=[name],
        )
    outside = [r.block.name for r, p in others if not is_ancestor(p, loop)]
    if outside:
        raise state.error(
            f'block "{name}" cannot move under loop "{loop.loop_var.name}"',
            requires=f'every {role} of "{name}" lies under the target loop; '
            f"{_tree.names_of(outside)} do not",
            fragment=fragment(loop, {id(loop): "<- target loop"}),
            hint=f"move {_tree.names_of(outside)} under the loop first, or choose a loop above",
            locations=[name, loop.loop_var.name, *outside],
        )


def demanded_regions(
    state: ScheduleState,
    func: PrimFunc,
    under: Sequence[tuple[BlockRealize, _tree.Path]],
    buffers: Sequence[Buffer],
    loop: For,
    *,
    reverse: bool,
    relax: Sequence[For] = (),
) -> dict[int, list[Bounds]]:
    """Per buffer: hull of the regions the related blocks access under ``loop``, with the
    loops of ``relax`` (enclosing thread loops) ranging over their whole domain too."""
    out: dict[int, list[Bounds]] = {}
    for r, p in under:
        vmap = {iv.var: v for iv, v in zip(r.block.iter_vars, r.iter_values, strict=False)}
        dom = var_dom([*relax, *loops_between(p, loop)])
        regions = r.block.writes if reverse else r.block.reads
        for reg in regions:
            if not any(reg.buffer is b for b in buffers):
                continue
            got = region_bounds(reg.region, vmap, dom)
            if got is None:
                raise state.error(
                    f'cannot bound the region of "{reg.buffer.name}" accessed by "{r.block.name}"',
                    requires="access regions are affine in the loops below the target loop",
                    locations=[r.block.name],
                )
            key = id(reg.buffer)
            out[key] = union_bounds(out[key], got) if key in out else got
    return out


def _iter_ranges(
    state: ScheduleState, blk: Block, demanded: dict[int, list[Bounds]], *, reverse: bool
) -> list[Range | None]:
    """Iterator ranges of ``blk`` covering the demanded regions (None: the full domain)."""
    regions = blk.reads if reverse else blk.writes
    ranges: list[Range | None] = [None] * len(blk.iter_vars)
    used = False
    for reg in regions:
        bnd = demanded.get(id(reg.buffer))
        if bnd is None:
            continue
        dims = direct_dims(reg.region, blk.iter_vars)
        if dims is None:
            raise state.error(
                f'block "{blk.name}" accesses "{reg.buffer.name}" at non-trivial indices',
                requires="the buffer is indexed directly by block iterators (B[vi, vj])",
                hint="use reindex or transform_layout first",
                locations=[blk.name],
            )
        reg_ranges = bounds_to_region(bnd)
        for k, d in dims.items():
            if blk.iter_vars[k].kind is not IterKind.SPATIAL:
                continue
            if ranges[k] is None:
                ranges[k] = _clip(reg_ranges[d], blk.iter_vars[k].dom)
        used = True
        if reverse:
            break
    if not used:
        raise state.error(
            f'block "{blk.name}" accesses none of the demanded buffers',
            requires="the block reads (writes) a buffer its producers (consumers) write (read)",
            locations=[blk.name],
        )
    return ranges


def _clip(rng: Range, dom: Range) -> Range:
    """``rng`` intersected with the iterator's domain ``dom`` when both are constant and
    they overlap: the loop then runs over the intersection, where running over ``rng`` needs a
    predicate (a padded producer's consumer, 200 rows produced and 197 wanted)."""
    lo, ext = const_value(rng.min), const_value(rng.extent)
    dlo, dext = const_value(dom.min), const_value(dom.extent)
    if lo is None or ext is None or dlo is None or dext is None:
        return rng
    start, stop = max(lo, dlo), min(lo + ext, dlo + dext)
    if (start, stop) == (lo, lo + ext) or stop <= start:
        return rng
    dtype = rng.min.dtype
    return Range(IntImm(dtype, start), IntImm(rng.extent.dtype, stop - start))


def check_position(
    state: ScheduleState,
    func: PrimFunc,
    loop: For,
    blk: Block,
    related: Sequence[BlockRealize],
    index: int,
    *,
    reverse: bool,
) -> int:
    """Resolve ``index`` into a child position of ``loop``'s body and validate it."""
    items = body_items(loop)
    holds_related = [any(contains(it, r) for r in related) for it in items]
    reads = _tree.buffers_read(blk)
    writes = _tree.buffers_written(blk)

    def touches(it: Stmt, bufs: list[Buffer], *, write: bool) -> bool:
        for n in _tree.blocks_under(it):
            regs = n.block.writes if write else n.block.reads
            if any(r.buffer is b for r in regs for b in bufs):
                return True
        return False

    if reverse:
        lo = max(k for k, h in enumerate(holds_related)) + 1
        hi = min(
            (k for k, it in enumerate(items) if k >= lo and touches(it, writes, write=False)),
            default=len(items),
        )
        default = lo
    else:
        hi = min(k for k, h in enumerate(holds_related) if h)
        lo = max(
            (k + 1 for k, it in enumerate(items) if k < hi and touches(it, reads, write=True)),
            default=0,
        )
        default = hi
    pos = default if index == -1 else (lo if index == -2 else index)
    if not lo <= pos <= hi:
        raise state.error(
            f'index {index} is not a valid position under loop "{loop.loop_var.name}"',
            requires=f"the position lies between {lo} and {hi} (dependences inside the loop)",
            fragment=fragment(loop, {id(loop): "<- target loop"}),
            hint="use index=-1",
            locations=[blk.name, loop.loop_var.name],
        )
    return pos
