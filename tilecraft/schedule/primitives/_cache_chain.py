"""``cache_read`` of a buffer whose producer shares a loop nest with its readers
(package-private): the second link of a cache chain, global -> shared -> local.

After ``compute_at(A_shared, ko)`` the copy ``A_shared`` and its reader ``C`` sit in one loop
nest. A further ``cache_read(C, A_shared, "local")`` cannot go after the producer's whole nest
(the readers are in it): the new copy goes inside the deepest loop that encloses the producer and
every chosen reader, right after the producer's child of that loop, and covers what the
readers under that loop read (relaxed, like ``compute_at``, over the enclosing thread loops
that share the new buffer's scope). It is ``cache_read`` followed by ``compute_at`` to that loop
in one step, so the chain can be built in any order of ``cache_read`` and ``compute_at``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import ScheduleError
from ...ir import BlockRealize, Buffer, For, IntImm, PrimFunc, Range, Stmt, relaxed_loop
from .. import _tree
from ..state import ScheduleState
from ._blockutil import (
    body_items,
    bounds_to_region,
    contains,
    copy_block,
    fragment,
    fresh_var_names,
    insert_at,
    is_ancestor,
    nest_for,
    replace_buffers,
    var_dom,
)
from ._compute_at_common import demanded_regions


def shares_nest(top: Stmt, writer: BlockRealize, readers: Sequence[BlockRealize]) -> bool:
    """True when some reader lies in the writer's top-level nest ``top``."""
    return any(r is not writer and contains(top, r) for r in readers)


def cache_read_in_nest(
    state: ScheduleState,
    func: PrimFunc,
    writer: BlockRealize,
    chosen: Sequence[BlockRealize],
    buf: Buffer,
    cache: Buffer,
    name: str,
) -> PrimFunc:
    """Insert the copy ``cache = buf`` after ``writer`` inside the loop shared with ``chosen``
    and make ``chosen`` read ``cache`` (see the module docstring)."""
    _, wpath = _tree.find_block(func, writer.block.name)
    paths = [(r, _tree.find_block(func, r.block.name)[1]) for r in chosen]
    loops = [n for n in wpath if isinstance(n, For)]
    shared = [lp for lp in loops if all(is_ancestor(p, lp) for _, p in paths)]
    if not shared:
        raise _error(state, writer, chosen, buf, "no loop encloses the producer and the readers")
    lca = shared[-1]
    items = body_items(lca)
    w = next(k for k, it in enumerate(items) if contains(it, writer))
    if any(contains(items[w], r) for r in chosen) or any(
        next(k for k, it in enumerate(items) if contains(it, r)) < w for r in chosen
    ):
        raise _error(
            state,
            writer,
            chosen,
            buf,
            f'a reader is not after the producer in loop "{lca.loop_var.name}"',
        )
    lca_path = _tree.find_loop_path(func, lca.loop_var)[1]
    enclosing = [*_tree.loops_in_path(lca_path), lca]
    relax = [lp for lp in enclosing if relaxed_loop(cache.scope, lp)]
    bounds = demanded_regions(state, func, paths, [buf], lca, reverse=False, relax=relax)[id(buf)]
    names = fresh_var_names(func, [f"v{k}" for k in range(buf.ndim)])
    loop_names = fresh_var_names(func, [f"ax{k}" for k in range(buf.ndim)])
    full = [Range(IntImm(e.dtype, 0), e) for e in buf.shape]
    blk, _ = copy_block(name, buf, cache, full, names)
    nest = nest_for(blk, list(bounds_to_region(bounds)), loop_names, outer=var_dom(enclosing))
    mapping: dict[int, Stmt | None] = {
        id(r): r.update(block=replace_buffers(r.block, {buf: cache})) for r in chosen
    }
    func = _tree.replace_stmts(func, mapping)
    new_lca = _tree.find_loop(func, lca.loop_var)
    return _tree.replace_stmt(func, new_lca, insert_at(new_lca, nest, w + 1))


def _error(
    state: ScheduleState,
    writer: BlockRealize,
    chosen: Sequence[BlockRealize],
    buf: Buffer,
    short: str,
) -> ScheduleError:
    return state.error(
        f'cannot stage "{buf.name}" between its producer "{writer.block.name}" and its '
        f"readers: {short}",
        requires="the producer and the readers sharing its loop nest lie under one loop, the "
        "producer in an earlier child of it than every reader",
        fragment=fragment(writer),
        hint="cache before compute_at, or choose the readers with consumer_blocks",
        locations=[writer.block.name, *(r.block.name for r in chosen)],
    )
