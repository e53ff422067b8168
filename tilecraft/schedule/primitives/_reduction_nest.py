"""Requirement checks of the reduction primitives that look at the whole loop nest:
``decompose_reduction`` needs a one-to-one nest, ``rfactor`` a nest it can split in two.

Package-private; pure functions raising :class:`~tilecraft.errors.ScheduleError`.
"""

from __future__ import annotations

from ...arith import detect_iter_map
from ...ir import (
    BlockRealize,
    Buffer,
    Expr,
    For,
    IntImm,
    IterKind,
    Range,
    Var,
    collect_vars,
    substitute,
)
from .. import _tree
from ..state import ScheduleState
from ._blockutil import fragment
from .index_map import is_const


def reduce_vars(realize: BlockRealize, kind: IterKind) -> set[int]:
    """Ids of loop variables used by the bindings of iterators of ``kind``."""
    out: set[int] = set()
    for iv, v in zip(realize.block.iter_vars, realize.iter_values, strict=False):
        if iv.kind is kind:
            out |= {id(x) for x in collect_vars(v)}
    return out


def check_one_to_one(state: ScheduleState, realize: BlockRealize, below: list[For]) -> None:
    """The loops from the target down reach each iterator tuple of the block at most once.

    A block with an init may be recomputed (``vi = fused // 32`` under a fused loop repeats
    it): each run re-initializes. Once the init is hoisted, a repeat accumulates twice. A
    guarded (predicated) block is checked with its predicate, else without it.
    """
    vmap: dict[Var, Expr] = {}
    iters: dict[Var, Range] = {}
    for lp in below:
        if is_const(lp.extent, 1):
            vmap[lp.loop_var] = lp.min
            continue
        nv = Var(lp.loop_var.name, lp.loop_var.dtype)
        vmap[lp.loop_var] = nv if is_const(lp.min, 0) else nv + lp.min
        iters[nv] = Range(IntImm(nv.dtype, 0), lp.extent)
    values = [substitute(v, vmap) for v in realize.iter_values]
    found = detect_iter_map(values, iters, substitute(realize.predicate, vmap), "bijective")
    if found.errors and not is_const(realize.predicate, 1):
        # a predicate only drops iterations (a guarded edge tile): a map one-to-one without
        # it stays so with it, whatever offsets its condition holds
        found = detect_iter_map(values, iters, True, "bijective")
    if found.errors:
        name = realize.block.name
        raise state.error(
            f'the loops from the target loop down do not reach each iteration of "{name}" '
            "exactly once",
            requires="the block bindings are a one-to-one map of the loops from the target "
            f"loop down ({found.errors[0]})",
            fragment=fragment(realize),
            hint="choose a loop below the one that repeats the block",
            locations=[name],
        )


def check_reduction_nest(
    state: ScheduleState, realize: BlockRealize, path: _tree.Path, out: Buffer, target: For
) -> tuple[For, list[For]]:
    """The top of the block's own loop nest and the loops from it down to the block.

    Requires: no loop binds both spatial and reduce iterators; no other block under the top
    loop reads or writes ``out``; the loop ranges suit the rf and write-back nests.
    """
    name = realize.block.name
    red = reduce_vars(realize, IterKind.REDUCE)
    loops = _tree.loops_in_path(path)
    mixed = [
        lp.loop_var.name
        for lp in loops
        if id(lp.loop_var) in red & reduce_vars(realize, IterKind.SPATIAL)
    ]
    if mixed:
        raise state.error(
            f'loops {_tree.names_of(mixed)} bind both spatial and reduce iterators of "{name}"',
            requires="every loop above the block binds spatial or reduce iterators, not both",
            fragment=fragment(realize),
            hint="split or reorder instead of fusing spatial and reduction loops",
            locations=[name, *mixed],
        )
    first = next(k for k, lp in enumerate(loops) if id(lp.loop_var) in red)
    # the highest loop holding nothing but this block, or else the outermost reduction loop
    start = next((k for k in range(first) if _tree.blocks_under(loops[k].body) == [realize]), first)
    top, inner = loops[start], loops[start:]
    others = [
        br.block.name
        for br in _tree.blocks_under(top.body)
        if br is not realize and any(r.buffer is out for r in (*br.block.reads, *br.block.writes))
    ]
    if others:
        raise state.error(
            f'blocks {_tree.names_of(others)} inside the reduction nest of "{name}" access '
            f'"{out.name}"',
            requires="no other block inside the reduction loops accesses the output buffer",
            fragment=_tree.outline(top, {id(top): "<- outermost reduction loop"}),
            hint="move those blocks out of the reduction loops first",
            locations=[name, *others],
        )
    _check_nest_ranges(state, name, loops, inner, red, target)
    return top, inner


def _check_nest_ranges(
    state: ScheduleState, name: str, loops: list[For], inner: list[For], red: set[int], target: For
) -> None:
    """The factored loop's range uses no enclosing loop (it sizes the rf buffer), and no loop
    kept for the write-back nest has a range using a dropped reduction loop."""

    def uses(lp: For, ids: set[int]) -> bool:
        return any(id(v) in ids for v in (*collect_vars(lp.min), *collect_vars(lp.extent)))

    dropped = {id(lp.loop_var) for lp in inner if id(lp.loop_var) in red and lp is not target}
    kept = [lp for lp in inner if id(lp.loop_var) not in dropped]
    bad = [target] if uses(target, {id(lp.loop_var) for lp in loops}) else []
    bad += [lp for lp in kept if lp is not target and uses(lp, dropped)]
    if bad:
        raise state.error(
            f'the range of loop "{bad[0].loop_var.name}" depends on another loop',
            requires="the factored loop's range uses no enclosing loop, and the loops kept for "
            "the write-back block have ranges independent of the other reduction loops",
            fragment=fragment(inner[0]),
            locations=[name, bad[0].loop_var.name],
        )
