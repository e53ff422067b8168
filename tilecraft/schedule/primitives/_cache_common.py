"""Checks and nest-building helpers shared by the buffer primitives of :mod:`.cache`.

Package-private. Everything here is pure: it reads a PrimFunc or builds new statements, and
raises :class:`~tilecraft.errors.ScheduleError` on a broken requirement.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import ScheduleError
from ...ir import (
    SCOPES,
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    IntImm,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
    collect_vars,
)
from .. import _tree
from ..state import ScheduleState
from ._blockutil import (
    ALIGN_KEY,
    alloc_owner,
    bounds_to_region,
    contains,
    copy_block,
    fragment,
    fresh_var_names,
    is_param,
    nest_for,
    pick_max,
    pick_min,
    region_bounds,
    union_bounds,
    var_dom,
)


def check_scope(state: ScheduleState, scope: str) -> None:
    """The storage scope is one of :data:`tilecraft.ir.SCOPES`."""
    if scope not in SCOPES:
        raise state.error(
            f"argument 'storage_scope': expected one of {SCOPES}, got {scope!r}",
            requires="a known storage scope",
        )


def check_buffer_index(state: ScheduleState, blk: Block, index: int, *, write: bool) -> Buffer:
    """``index`` selects one of the block's write (read) regions."""
    regions = blk.writes if write else blk.reads
    kind = "write" if write else "read"
    if not 0 <= index < len(regions):
        raise state.error(
            f"argument '{kind}_buffer_index': {index} is out of range for block "
            f'"{blk.name}" with {len(regions)} {kind} regions',
            requires=f"0 <= index < number of {kind} regions",
            locations=[blk.name],
        )
    return regions[index].buffer


def whole_written_region(func: PrimFunc, buf: Buffer) -> tuple[Range, ...]:
    """Hull of every region of ``buf`` written in ``func``, relaxed over enclosing loops."""
    hull = None
    for node, path in _tree.walk(func.body):
        if not isinstance(node, BlockRealize):
            continue
        for reg in node.block.writes:
            if reg.buffer is not buf:
                continue
            vmap = {
                iv.var: v for iv, v in zip(node.block.iter_vars, node.iter_values, strict=False)
            }
            b = region_bounds(reg.region, vmap, var_dom(_tree.loops_in_path(path)))
            if b is None or any(collect_vars(x) for lo_hi in b for x in lo_hi):
                return BufferRegion.full(buf).region
            hull = b if hull is None else union_bounds(hull, b)
    if hull is None:
        return BufferRegion.full(buf).region
    # a guarded (predicated) write never leaves the buffer: clamp the relaxed hull to it
    clamped = [
        (pick_max(lo, IntImm(lo.dtype, 0)), pick_min(hi, extent - 1))
        for (lo, hi), extent in zip(hull, buf.shape, strict=True)
    ]
    return bounds_to_region(clamped)


def copy_nest(
    func: PrimFunc, name: str, src: Buffer, dst: Buffer, region: tuple[Range, ...]
) -> Stmt:
    names = fresh_var_names(func, [f"v{k}" for k in range(len(region))])
    loop_names = fresh_var_names(func, [f"ax{k}" for k in range(len(region))])
    blk, _ = copy_block(name, src, dst, region, names)
    # The copy block's iterators run over their full domain, so loops are [0, extent).
    return nest_for(blk, [Range(r.min, r.extent) for r in region], loop_names)


def top_level_child(func: PrimFunc, realize: BlockRealize) -> tuple[Stmt, BlockRealize]:
    """The child of the scope block's body that contains ``realize``, and the scope."""
    _, path = _tree.find_block(func, realize.block.name)
    scope = _tree.scope_of(path)
    if scope is None:
        raise ScheduleError("cache", f'block "{realize.block.name}" has no scope block')
    k = path.index(scope)
    rest = [*path[k + 2 :], realize]
    top = rest[1] if isinstance(rest[0], SeqStmt) else rest[0]
    return top, scope


def check_alone_in_nest(
    state: ScheduleState,
    top: Stmt,
    realize: BlockRealize,
    buf: Buffer,
    others: Sequence[BlockRealize],
) -> None:
    """None of ``others`` (blocks accessing ``buf``) shares ``realize``'s top-level nest
    ``top``: the copy stage goes before or after that whole nest."""
    inside = [r.block.name for r in others if r is not realize and contains(top, r)]
    if inside:
        raise state.error(
            f'block "{realize.block.name}" shares its loop nest with {_tree.names_of(inside)}, '
            f'which also access "{buf.name}"',
            requires="no other block accessing the buffer lies in the block's outer loop nest",
            fragment=fragment(top, {id(realize): "<- block"}),
            hint="move the other blocks out of the nest (or cache before compute_at)",
            locations=[realize.block.name, *inside],
        )


def insert_after(
    func: PrimFunc, anchor: Stmt, scope: BlockRealize, new: Stmt, *, before: bool = False
) -> PrimFunc:
    """Insert ``new`` as a sibling after (or before) ``anchor`` in ``scope``'s body."""
    body = scope.block.body
    items = list(body.stmts) if isinstance(body, SeqStmt) else [body]
    k = next(i for i, s in enumerate(items) if s is anchor)
    items.insert(k if before else k + 1, new)
    blk = scope.block.update(body=SeqStmt(tuple(items)))
    return _tree.replace_stmt(func, scope, scope.update(block=blk))


def check_intermediate(
    state: ScheduleState, func: PrimFunc, blk: Block, buf: Buffer
) -> BlockRealize:
    """``buf`` is allocated inside the function (not a parameter); returns the allocator."""
    owner = alloc_owner(func, buf)
    if is_param(func, buf) or owner is None:
        raise state.error(
            f'buffer "{buf.name}" is a function parameter',
            requires="the buffer is allocated in the function (an intermediate)",
            hint="cache_read / cache_write it first and change the cache instead",
            locations=[blk.name],
        )
    return owner


def check_alignment_agrees(
    state: ScheduleState,
    func: PrimFunc,
    realize: BlockRealize,
    index: int,
    axis: int,
    request: tuple[int, int],
) -> None:
    """No other ``storage_align`` request on the same buffer and axis asks for another
    ``(factor, offset)``: a buffer has one layout, so two different requests cannot both hold.

    A block's own earlier request for the same write index and axis is not a conflict: the
    new request replaces it.
    """
    buf = realize.block.writes[index].buffer
    for node, _ in _tree.walk(func.body):
        if not isinstance(node, BlockRealize):
            continue
        blk = node.block
        entries = blk.annotations.get(ALIGN_KEY, ())
        for entry in entries if isinstance(entries, tuple) else ():
            if not (isinstance(entry, tuple) and len(entry) == 4):
                continue
            k, ax, factor, offset = entry
            if node is realize and k == index:
                continue  # replaced by the new request
            if not (isinstance(k, int) and 0 <= k < len(blk.writes)):
                continue
            if blk.writes[k].buffer is buf and ax == axis and (factor, offset) != request:
                raise state.error(
                    f'buffer "{buf.name}" axis {axis} is already aligned with factor {factor}, '
                    f'offset {offset} (by block "{blk.name}"); asked for factor {request[0]}, '
                    f"offset {request[1]}",
                    requires="every storage_align request on one buffer axis agrees (a "
                    "block's repeated request replaces its own)",
                    hint=f"request factor {factor}, offset {offset}, or first "
                    f'unannotate(block "{blk.name}", "{ALIGN_KEY}")',
                    locations=[realize.block.name, blk.name],
                )
