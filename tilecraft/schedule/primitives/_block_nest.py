"""The loop nest a block owns: checks shared by transform_block_layout and pad_einsum.

Package-private and pure. A block *owns its nest* when the loops between its scope block and
the block are perfectly nested around it alone, one loop per block iterator, each loop
``for l in range(e)`` binding exactly one iterator ``v = l`` whose domain is ``[0, e)``, and
the block has no predicate. Such a nest can be rebuilt from the block's iterators alone.
"""

from __future__ import annotations

from ...errors import ScheduleError
from ...ir import BlockRealize, For, ForKind, IntImm, Stmt
from .. import _tree
from ._blockutil import fragment
from .index_map import is_const, same_index


def _fail(prim: str, realize: BlockRealize, top: Stmt, short: str) -> ScheduleError:
    name = realize.block.name
    return ScheduleError(
        prim,
        short,
        requires=(
            "the block owns its loop nest: one serial loop per iterator, perfectly nested "
            "around the block alone, each binding its iterator directly (v = l, both from 0), "
            "and no predicate"
        ),
        fragment=fragment(top, {id(realize): "<- block"}),
        hint="undo the split/fuse/compute_at that reshaped the nest, or pick another block",
        locations=[name],
    )


def owned_nest(
    prim: str, realize: BlockRealize, path: _tree.Path, *, unit_constants: bool = False
) -> list[For]:
    """The loops (outermost first) of a block that owns its nest; ``loops[k]`` binds the
    iterator its variable equals. Raises ScheduleError when the block does not own them.
    ``unit_constants``: an iterator of domain ``[0, 1)`` bound to the constant 0 (``reindex``
    and ``cache_write`` drop unit loops) needs no loop of its own."""
    blk = realize.block
    loops = _tree.loops_in_path(path)
    top: Stmt = loops[0] if loops else realize
    if unit_constants:
        pairs = [(iv, v) for iv, v in zip(blk.iter_vars, realize.iter_values, strict=True)
                 if not (is_const(v, 0) and is_const(iv.dom.min, 0)
                         and is_const(iv.dom.extent, 1))]  # fmt: skip
    else:
        pairs = list(zip(blk.iter_vars, realize.iter_values, strict=True))
    if not blk.iter_vars:
        raise _fail(prim, realize, top, f'block "{blk.name}" has no iterators')
    if not _is_true(realize.predicate):
        raise _fail(prim, realize, top, f'block "{blk.name}" has a predicate')
    if len(loops) != len(pairs):
        raise _fail(
            prim,
            realize,
            top,
            f'block "{blk.name}" has {len(pairs)} iterators under {len(loops)} loops',
        )
    for outer, inner in zip(loops, [*loops[1:], realize], strict=True):
        if outer.body is not inner:
            raise _fail(
                prim,
                realize,
                top,
                f'loop "{outer.loop_var.name}" holds more than the next loop of the block',
            )
    by_var = {id(lp.loop_var): lp for lp in loops}
    seen: set[int] = set()
    for iv, value in pairs:
        lp = by_var.get(id(value))
        if lp is None or id(value) in seen:
            raise _fail(
                prim, realize, top, f'iterator "{iv.var.name}" is not bound to a loop of its own'
            )
        seen.add(id(value))
        if not (
            is_const(lp.min, 0) and is_const(iv.dom.min, 0) and same_index(lp.extent, iv.dom.extent)
        ):
            raise _fail(
                prim,
                realize,
                top,
                f'loop "{lp.loop_var.name}" does not run over the domain of "{iv.var.name}"',
            )
        if lp.kind is not ForKind.SERIAL:
            raise _fail(prim, realize, top, f'loop "{lp.loop_var.name}" is not serial')
    return loops


def loop_of(loops: list[For], value: object) -> For:
    """The loop of ``loops`` whose variable is ``value`` (identity)."""
    return next(lp for lp in loops if lp.loop_var is value)


def _is_true(e: object) -> bool:
    """True for the constant predicate ``True``."""
    return isinstance(e, IntImm) and e.value == 1
