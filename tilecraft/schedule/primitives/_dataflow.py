"""Dataflow checks of ``reverse_compute_at``: the moved consumer only reads what the producers
under the target loop finished in the same iteration.

Package-private. Lowering allocates an intermediate buffer at the innermost loop enclosing all
its accesses, so a consumer placed under a loop must not rely on values produced in other
iterations of that loop; and a producer must have finished its elements when the iteration
ends (no reduction carried by the target loop or a loop above it).
"""

from __future__ import annotations

from collections.abc import Sequence

from ...arith import detect_iter_map
from ...ir import (
    GE,
    LT,
    And,
    Block,
    BlockRealize,
    Buffer,
    Expr,
    For,
    IntImm,
    IterKind,
    Range,
    Stmt,
    Sub,
    Var,
    collect_vars,
    structural_equal,
    substitute,
    uses_var,
)
from .. import _tree
from ..state import ScheduleState
from ._blockutil import fragment, region_bounds
from .index_map import Bounds, const_value, is_const, same_index


def check_producers_finish(
    state: ScheduleState,
    name: str,
    under: Sequence[tuple[BlockRealize, _tree.Path]],
    enclosing: list[For],
) -> None:
    """No loop in ``enclosing`` (the target loop and the loops above it) carries a reduction
    of a producer: the consumer would read partial results."""
    for r, _ in under:
        for iv, val in zip(r.block.iter_vars, r.iter_values, strict=True):
            if iv.kind is not IterKind.REDUCE:
                continue
            for lp in enclosing:
                if uses_var(val, lp.loop_var):
                    raise state.error(
                        f'loop "{lp.loop_var.name}" carries the reduction of producer '
                        f'"{r.block.name}"',
                        requires="every producer under the target loop finishes its elements "
                        "within one iteration (no reduction over the target loop or a loop "
                        "above it)",
                        fragment=fragment(r),
                        hint="choose a loop above the producer's reduction loops",
                        locations=[name, r.block.name, lp.loop_var.name],
                    )


def check_reads_within(
    state: ScheduleState,
    blk: Block,
    ranges: Sequence[Range | None],
    produced: dict[int, list[Bounds]],
) -> None:
    """Every read of a produced buffer by ``blk`` (iterators over ``ranges``) lies inside what
    the producers wrote in the same iteration."""
    dom = {
        iv.var: rng if rng is not None else iv.dom
        for iv, rng in zip(blk.iter_vars, ranges, strict=True)
    }
    for reg in blk.reads:
        have = produced.get(id(reg.buffer))
        if have is None:
            continue
        got = region_bounds(reg.region, {}, dom)
        inside = got is not None and all(
            _le(p_lo, lo) and _le(hi, p_hi)
            for (lo, hi), (p_lo, p_hi) in zip(got, have, strict=True)
        )
        if not inside:
            raise state.error(
                f'block "{blk.name}" would read elements of "{reg.buffer.name}" that the '
                "producers write in other iterations of the loop",
                requires="the block reads only what its producers write in the same iteration "
                "(a reduction over the produced buffer needs the whole reduced range)",
                hint="choose a loop above the one that splits the produced buffer",
                locations=[blk.name],
            )


def _le(a: Expr, b: Expr) -> bool:
    d = const_value(Sub(b, a))
    return d is not None and d >= 0


def shared_outer_conditions(
    under: Sequence[tuple[BlockRealize, _tree.Path]], inner: Sequence[For]
) -> list[Expr]:
    """Predicate conjuncts every producer has that use no loop in ``inner`` (the loops below
    the target loop): where they fail no producer runs, so the consumer must not either."""
    inner_ids = {id(lp.loop_var) for lp in inner}
    common: list[Expr] | None = None
    for r, _ in under:
        mine = [
            c
            for c in _conjuncts(r.predicate)
            if not any(id(v) in inner_ids for v in collect_vars(c))
        ]
        common = (
            mine
            if common is None
            else [c for c in common if any(structural_equal(c, m) for m in mine)]
        )
    return common or []


def _conjuncts(e: Expr) -> list[Expr]:
    if isinstance(e, And):
        return [*_conjuncts(e.a), *_conjuncts(e.b)]
    if isinstance(e, IntImm) and e.value == 1:
        return []
    return [e]


def inner_loops(under: Sequence[tuple[BlockRealize, _tree.Path]], loop: For) -> list[For]:
    """Loops strictly below ``loop`` on the paths of the producers."""
    out: list[For] = []
    for _, p in under:
        below = False
        for node in p:
            if node is loop:
                below = True
            elif below and isinstance(node, For):
                out.append(node)
    return out


def add_predicate(nest: Stmt, conds: Sequence[Expr]) -> Stmt:
    """``nest`` (loops around one BlockRealize) with ``conds`` added to the block predicate."""
    if not conds:
        return nest
    if isinstance(nest, For):
        return nest.update(body=add_predicate(nest.body, conds))
    assert isinstance(nest, BlockRealize)
    pred: Expr = nest.predicate
    for c in conds:
        pred = c if isinstance(pred, IntImm) and pred.value == 1 else And(pred, c)
    return nest.update(predicate=pred)


def check_exact_production(
    state: ScheduleState,
    name: str,
    under: Sequence[tuple[BlockRealize, _tree.Path]],
    buffers: Sequence[Buffer],
    loop: For,
) -> None:
    """What each producer writes in one iteration of ``loop`` is exactly a box.

    The consumer moved under ``loop`` computes the bounding box of the produced region; an
    element of the box that another iteration produces would be computed from values not
    there yet (a race under a parallel loop, garbage once lowering shrinks the buffer to one
    iteration's region). Proved when the write indices are a one-to-one affine map of the
    loops below ``loop`` they use; guards that only clip an index to the buffer's shape are
    allowed (the moved block gets the same guard), other guards on those loops are not.
    """
    for r, p in under:
        below = [lp for lp in _loops_below(p, loop) if not is_const(lp.extent, 1)]
        vmap = {iv.var: v for iv, v in zip(r.block.iter_vars, r.iter_values, strict=True)}
        unit = {lp.loop_var: lp.min for lp in _loops_below(p, loop) if is_const(lp.extent, 1)}
        for reg in r.block.writes:
            if not any(reg.buffer is b for b in buffers):
                continue
            idx = [substitute(substitute(rg.min, vmap), unit) for rg in reg.region]
            why = _box_failure(idx, reg.buffer, below, substitute(r.predicate, unit))
            if why is not None:
                raise state.error(
                    f'producer "{r.block.name}" does not write a box of "{reg.buffer.name}" '
                    f'in one iteration of loop "{loop.loop_var.name}"',
                    requires="each producer writes, per iteration of the target loop, exactly "
                    f"the box its indices span ({why})",
                    fragment=fragment(r),
                    hint="choose a loop above the split or fused loops of the producer",
                    locations=[name, r.block.name, loop.loop_var.name],
                )


def _loops_below(path: _tree.Path, loop: For) -> list[For]:
    out: list[For] = []
    seen = False
    for node in path:
        if node is loop:
            seen = True
        elif seen and isinstance(node, For):
            out.append(node)
    return out


def _box_failure(idx: list[Expr], buf: Buffer, below: list[For], pred: Expr) -> str | None:
    """None when ``idx`` maps the loops it uses one-to-one onto a box; else the reason."""
    used = [lp for lp in below if any(uses_var(e, lp.loop_var) for e in idx)]
    ids = {id(lp.loop_var) for lp in used}
    if not used:
        return None
    iters: dict[Var, Range] = {}
    shift: dict[Var, Expr] = {}
    for lp in used:
        nv = Var(lp.loop_var.name, lp.loop_var.dtype)
        iters[nv] = Range(IntImm(nv.dtype, 0), lp.extent)
        shift[lp.loop_var] = nv if is_const(lp.min, 0) else nv + lp.min
    for c in _conjuncts(pred):
        if {id(v) for v in collect_vars(c)} & ids and not _clips_to_shape(c, idx, buf):
            return "a guard other than the buffer bounds skips some of its iterations"
    found = detect_iter_map([substitute(e, shift) for e in idx], iters, True, "bijective")
    return found.errors[0] if found.errors else None


def _clips_to_shape(cond: Expr, idx: list[Expr], buf: Buffer) -> bool:
    """``cond`` is ``index < extent`` or ``index >= 0`` for a write index and its dimension."""
    pairs = list(zip(idx, buf.shape, strict=True))
    if isinstance(cond, LT):
        return any(same_index(cond.a, e) and same_index(cond.b, ext) for e, ext in pairs)
    if isinstance(cond, GE):
        return is_const(cond.b, 0) and any(same_index(cond.a, e) for e, _ in pairs)
    return False
