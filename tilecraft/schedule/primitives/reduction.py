"""Reduction primitives: decompose_reduction and rfactor.

Each primitive takes the schedule state and handles, checks every requirement first
(``check_*`` raise ScheduleError naming the primitive), builds the new function with pure
helpers and commits it. ``decompose_reduction`` keeps the reduction block's name for the
update block (so handles to it stay valid) and returns the new init block; ``rfactor`` keeps
the original name for the final write-back block and returns the new ``*_rf`` block.
"""

from __future__ import annotations

from ...ir import (
    And,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Expr,
    FloatImm,
    For,
    ForKind,
    IntImm,
    IterKind,
    IterVar,
    Max,
    Min,
    Mul,
    Range,
    Select,
    SeqStmt,
    Stmt,
    Var,
    collect_vars,
    substitute,
)
from ...ir.expr import Add
from .. import _tree
from ..instruction import primitive
from ..state import BlockRV, LoopRV, ScheduleState
from ._blockutil import (
    add_alloc,
    block_of,
    fragment,
    fresh_buffer_name,
    is_ancestor,
    loop_of,
    loops_between,
    point_region,
    rename_iters,
)
from ._reduction_nest import check_one_to_one, check_reduction_nest, reduce_vars
from .index_map import is_const, simplify_index


def check_has_init(state: ScheduleState, realize: BlockRealize) -> None:
    """The block is a reduction block with an init statement."""
    if realize.block.init is None:
        raise state.error(
            f'block "{realize.block.name}" has no init',
            requires="the block is a reduction block with an init statement",
            fragment=fragment(realize),
            locations=[realize.block.name],
        )


def check_loop_above(
    state: ScheduleState, realize: BlockRealize, path: _tree.Path, loop: For
) -> None:
    """``loop`` encloses the block."""
    if not is_ancestor(path, loop):
        raise state.error(
            f'loop "{loop.loop_var.name}" is not above block "{realize.block.name}"',
            requires="the loop is an ancestor of the block",
            locations=[realize.block.name, loop.loop_var.name],
        )


@primitive("decompose_reduction", inputs=("block", "loop"), outputs="one")
def decompose_reduction(state: ScheduleState, block: BlockRV, loop: LoopRV) -> BlockRV:
    """Split ``block``'s init into its own block placed right before ``loop``.

    Requires: (1) the block has an init; (2) the loop is above the block; (3) no loop above
    ``loop`` (inside the scope) is used by a reduce iterator's binding; (4) each conjunct of
    the predicate (a guarded block) uses only loops kept for the init block (the init keeps
    it) or only dropped reduction loops (the update keeps it); (5) every non-unit loop from
    ``loop`` down binds some iterator of the block (otherwise it repeats the reduction),
    and together they reach each iteration of the block exactly once (``vi = fused // 32``
    under a fused loop repeats it: a one-to-one iterator map is required).

    Rewrite::

        for i, k:                                   for i:
            C[vi] (init 0) += A[vi, vk]      ->         C_init: C[vi] = 0
                                                        for k: C[vi] += A[vi, vk]   (no init)

    The init block copies the loops from ``loop`` down that bind spatial iterators (a loop
    that also binds a reduce iterator is copied too; the init then stores equal values again).
    Returns the init block (the update block keeps the reduction block's name).
    """
    func = state.func
    realize, path = block_of(state, block)
    target, _ = loop_of(state, loop)
    check_has_init(state, realize)
    check_loop_above(state, realize, path, target)
    above = [
        lp
        for lp in _tree.loops_in_path(path)
        if not is_ancestor((*loops_between(path, target), target), lp)
    ]
    below = [target, *loops_between(path, target)]
    check_no_reduction_above(state, realize, above, target)
    check_no_repeating_loop(state, realize, below)
    check_one_to_one(state, realize, below)
    # a loop binding both kinds (after fuse) is kept: the init then rewrites equal values
    red, spatial = reduce_vars(realize, IterKind.REDUCE), reduce_vars(realize, IterKind.SPATIAL)
    kept = [lp for lp in below if id(lp.loop_var) not in red or id(lp.loop_var) in spatial]
    init_pred = check_predicate_kept(state, realize, below, [*kept, *above])
    name = _tree.fresh_name(func, f"{realize.block.name}_init")
    init_realize = _init_realize(realize, name, kept, init_pred)
    update = realize.update(block=realize.block.update(init=None))
    parent_new = SeqStmt(
        (init_realize, _tree.replace_stmt(func.update(body=target), realize, update).body)
    )
    state.commit(_tree.replace_stmt(func, target, parent_new))
    return state.block_rv(name)


def check_no_reduction_above(
    state: ScheduleState, realize: BlockRealize, above: list[For], target: For
) -> None:
    """No loop above ``target`` (inside the scope) drives a reduce iterator of the block."""
    red = reduce_vars(realize, IterKind.REDUCE)
    bad = [lp.loop_var.name for lp in above if id(lp.loop_var) in red]
    if bad:
        raise state.error(
            f"loops {_tree.names_of(bad)} above the target loop carry the reduction",
            requires="every loop above the target loop binds spatial iterators only",
            hint="choose an outer loop that is above every reduction loop",
            locations=[realize.block.name, target.loop_var.name],
        )


def check_no_repeating_loop(state: ScheduleState, realize: BlockRealize, below: list[For]) -> None:
    """Every non-unit loop from the target loop down binds some iterator of the block: the
    init re-runs each time such a loop repeats the reduction; once hoisted it would not."""
    used = reduce_vars(realize, IterKind.REDUCE) | reduce_vars(realize, IterKind.SPATIAL)
    repeat = [
        lp.loop_var.name
        for lp in below
        if id(lp.loop_var) not in used and not is_const(lp.extent, 1)
    ]
    if repeat:
        name = realize.block.name
        raise state.error(
            f'loops {_tree.names_of(repeat)} bind no iterator of "{name}" and repeat its reduction',
            requires="every loop from the target loop down to the block binds an iterator",
            fragment=fragment(realize),
            hint="move the block out of the repeating loop (compute_at it elsewhere)",
            locations=[name, *repeat],
        )


def check_predicate_kept(
    state: ScheduleState, realize: BlockRealize, below: list[For], kept: list[For]
) -> Expr:
    """The init block's predicate: the conjuncts of the block's predicate on kept loops. A
    conjunct on dropped (reduce) loops alone, e.g. a guarded edge of the reduction, stays
    with the update; one mixing both kinds is refused."""
    kept_ids = {id(lp.loop_var) for lp in kept}
    dropped = {id(lp.loop_var) for lp in below} - kept_ids
    out: Expr = IntImm(realize.predicate.dtype, 1)
    for c in _conjuncts(realize.predicate):
        ids = {id(v) for v in collect_vars(c)}
        if not ids & dropped:
            out = c if is_const(out, 1) else out & c
        elif ids & kept_ids:
            raise state.error(
                f'the predicate of "{realize.block.name}" mixes a reduction loop with the '
                "loops kept for the init block",
                requires="each conjunct of the predicate uses kept loops or reduction loops",
                fragment=fragment(realize),
                locations=[realize.block.name],
            )
    return out


def _init_realize(realize: BlockRealize, name: str, kept: list[For], pred: Expr) -> Stmt:
    blk = realize.block
    spatial = [
        (iv, v)
        for iv, v in zip(blk.iter_vars, realize.iter_values, strict=False)
        if iv.kind is not IterKind.REDUCE
    ]
    lmap: dict[Var, Expr] = {
        lp.loop_var: Var(lp.loop_var.name + "_init", lp.loop_var.dtype) for lp in kept
    }
    init_blk = Block(name, tuple(iv for iv, _ in spatial), (), blk.writes, blk.init or blk.body)
    init_blk, _ = rename_iters(init_blk)
    values = tuple(substitute(v, lmap) for _, v in spatial)
    stmt: Stmt = BlockRealize(values, substitute(pred, lmap), init_blk)
    for lp in reversed(kept):
        nv = lmap[lp.loop_var]
        assert isinstance(nv, Var)
        stmt = For(nv, lp.min, lp.extent, lp.kind, stmt, lp.thread, lp.annotations)
    return stmt


# ------------------------------------------------------------------------------------------

_COMBINERS = (Add, Mul, Max, Min)


def _identity(kind: type, dt: object) -> Expr:
    from ...ir import dtype as mk

    d = mk(str(dt))
    if kind is Add:
        return FloatImm(d, 0.0) if d.is_float else IntImm(d, 0)
    if kind is Mul:
        return FloatImm(d, 1.0) if d.is_float else IntImm(d, 1)
    big = float("inf")
    if d.is_float:
        return FloatImm(d, -big if kind is Max else big)
    bits = d.bits
    return IntImm(d, -(2 ** (bits - 1)) if kind is Max else 2 ** (bits - 1) - 1)


def check_combiner(state: ScheduleState, realize: BlockRealize) -> tuple[BufferStore, type, Expr]:
    """The body is ``C[s] = C[s] op rhs`` (or ``rhs op C[s]``) with op in + * max min."""
    blk = realize.block
    store = blk.body
    if isinstance(store, BufferStore) and isinstance(store.value, _COMBINERS):
        for self_side, rhs in ((store.value.a, store.value.b), (store.value.b, store.value.a)):
            if (
                isinstance(self_side, BufferLoad)
                and self_side.buffer is store.buffer
                and all(
                    simplify_index(x) is simplify_index(y) or x is y or _same(x, y)
                    for x, y in zip(self_side.indices, store.indices, strict=False)
                )
            ):
                from ._blockutil import access_indices

                if not access_indices(rhs, store.buffer):
                    return store, type(store.value), rhs
    raise state.error(
        f'block "{blk.name}" is not a recognised reduction',
        requires="the body is C[s] = C[s] op rhs with op one of +, *, max, min",
        fragment=fragment(realize),
        locations=[blk.name],
    )


def _same(a: Expr, b: Expr) -> bool:
    from .index_map import same_index

    return same_index(a, b)


@primitive("rfactor", inputs=("loop",), outputs="one")
def rfactor(state: ScheduleState, loop: LoopRV, factor_axis: int = 0) -> BlockRV:
    """Factor the reduction over ``loop`` into an rf block and a final block.

    Requires: (0) exactly one reduction block lies under ``loop``; (1) the block has an init
    and a body ``C[s] = C[s] op rhs`` (op in +, *, max, min); (2) its variable is used by
    reduce iterator bindings and by no spatial binding; (3) each condition of the realize's
    predicate uses reduction loops only, or none (a guarded split); (4)
    ``-(ndim + 1) <= factor_axis <= ndim``; (5) no loop binds both spatial and reduce
    iterators of the block; (6) no other block inside the replaced nest (see below) accesses
    the output buffer; (7) the factored loop's range uses no enclosing loop, and the range
    of each loop kept for the write-back nest uses no dropped reduction loop.

    Rewrite (``loop`` = ``ki``)::

        for i:                                   for i:
            for ko, ki:                              for ko, ki:
                C[vi] (init 0) += A[vi, vk]  ->          C_rf[vki, vi] (init 0) += A[vi, vk]
                                                     for ki: C[vi] (init as before) += C_rf[vki, vi]

    A predicate (from a split that does not divide) is shared out: conditions on reduction
    loops guard each contribution in the rf block (``C_rf += select(cond, rhs, identity)``, so
    every rf element the write-back reads is initialised); the others guard both blocks.
    Both nests replace the block's own loop nest in place: its outermost loop that holds
    nothing but the block (or, when the block shares every loop down to the outermost
    reduction loop with other statements, e.g. a consumer placed by ``compute_at``, that
    reduction loop). Loops above it stay shared; the rf nest comes first and the write-back
    nest right after it. The final block keeps the reduction block's name. Returns the rf block.
    """
    func = state.func
    target, _ = loop_of(state, loop)
    realize, path = _tree.find_block(func, check_one_reduction_under(state, target))
    block = realize.block.name
    check_has_init(state, realize)
    store, op, rhs = check_combiner(state, realize)
    check_loop_above(state, realize, path, target)
    check_rfactor_loop(state, realize, target)
    buf = store.buffer
    ndim = buf.ndim
    if not -(ndim + 1) <= factor_axis <= ndim:
        raise state.error(
            f"argument 'factor_axis': {factor_axis} is out of range for a {ndim}-d output",
            requires="-(ndim + 1) <= factor_axis <= ndim",
            locations=[block],
        )
    top, inner = check_reduction_nest(state, realize, path, store.buffer, target)
    check_gate_conditions(state, realize, path)
    axis = factor_axis % (ndim + 1)
    shape = list(buf.shape)
    shape.insert(axis, target.extent)
    rf_buf = Buffer(fresh_buffer_name(func, f"{buf.name}_rf"), tuple(shape), buf.dtype, buf.scope)
    rf_name = _tree.fresh_name(func, f"{block}_rf")
    rf_realize = _rf_block(realize, path, store, op, rhs, rf_buf, rf_name, target, axis)
    final = _final_nest(realize, path, inner, store, op, rf_buf, target, axis)
    rf_nest = _tree.replace_stmt(func.update(body=top), realize, rf_realize).body
    func = _tree.replace_stmt(func, top, SeqStmt((rf_nest, final)))
    state.commit(add_alloc(func, rf_buf, func.body))
    return state.block_rv(rf_name)


def check_one_reduction_under(state: ScheduleState, loop: For) -> str:
    """The name of the one reduction block under ``loop``."""
    found = [
        br.block.name
        for br in _tree.blocks_under(loop.body)
        if any(iv.kind is IterKind.REDUCE for iv in br.block.iter_vars)
    ]
    if len(found) != 1:
        raise state.error(
            f'loop "{loop.loop_var.name}" has {len(found)} reduction blocks under it',
            requires="rfactor needs exactly one reduction block under the loop",
            fragment=_tree.outline(loop, {id(loop): "<- loop"}),
        )
    return found[0]


def check_rfactor_loop(state: ScheduleState, realize: BlockRealize, target: For) -> None:
    """The loop feeds reduce iterators only, and the realize has no predicate."""
    lid = id(target.loop_var)
    if lid in reduce_vars(realize, IterKind.SPATIAL) or lid not in reduce_vars(
        realize, IterKind.REDUCE
    ):
        raise state.error(
            f'loop "{target.loop_var.name}" is not a reduction loop of "{realize.block.name}"',
            requires="the loop is bound only into reduce iterators",
            fragment=fragment(realize),
            locations=[realize.block.name, target.loop_var.name],
        )


def check_gate_conditions(state: ScheduleState, realize: BlockRealize, path: _tree.Path) -> None:
    """A predicate condition on the reduction loops uses no other loop of the nest (it moves
    into the rf block's body, where only the reduction loops have iterators)."""
    _, gate = _split_predicate(realize, path)
    red = reduce_vars(realize, IterKind.REDUCE)
    others = {id(lp.loop_var): lp for lp in _tree.loops_in_path(path) if id(lp.loop_var) not in red}
    for c in gate:
        mixed = [others[id(v)].loop_var.name for v in collect_vars(c) if id(v) in others]
        if mixed:
            raise state.error(
                f'the predicate of "{realize.block.name}" mixes reduction loops with {mixed}',
                requires="each predicate condition uses reduction loops only, or none",
                fragment=fragment(realize),
                locations=[realize.block.name, *mixed],
            )


def _split_predicate(realize: BlockRealize, path: _tree.Path) -> tuple[list[Expr], list[Expr]]:
    """The predicate's conjuncts that use no loop driving a reduce iterator (they gate whole
    output elements) and those that do (they gate single contributions)."""
    red = reduce_vars(realize, IterKind.REDUCE)
    red_loops = {id(lp.loop_var) for lp in _tree.loops_in_path(path) if id(lp.loop_var) in red}
    keep: list[Expr] = []
    gate: list[Expr] = []
    for c in _conjuncts(realize.predicate):
        (gate if any(id(v) in red_loops for v in collect_vars(c)) else keep).append(c)
    return keep, gate


def _conjuncts(e: Expr) -> list[Expr]:
    if isinstance(e, And):
        return _conjuncts(e.a) + _conjuncts(e.b)
    if isinstance(e, IntImm) and e.value == 1:
        return []
    return [e]


def _all(terms: list[Expr], dt: object) -> Expr:
    out: Expr | None = None
    for t in terms:
        out = t if out is None else And(out, t)
    return out if out is not None else IntImm(dt, 1)  # type: ignore[arg-type]


def _rf_block(
    realize: BlockRealize,
    path: _tree.Path,
    store: BufferStore,
    op: type,
    rhs: Expr,
    rf_buf: Buffer,
    name: str,
    target: For,
    axis: int,
) -> BlockRealize:
    blk = realize.block
    red = reduce_vars(realize, IterKind.REDUCE)
    red_loops = [lp for lp in _tree.loops_in_path(path) if id(lp.loop_var) in red]
    # One iterator per reduction loop: the factored loop becomes spatial, the rest reduce.
    lmap: dict[Var, Expr] = {}
    new_ivs: list[IterVar] = []
    for lp in red_loops:
        v = Var(f"v{lp.loop_var.name}", lp.loop_var.dtype)
        kind = IterKind.SPATIAL if lp is target else IterKind.REDUCE
        new_ivs.append(IterVar(v, Range(lp.min, lp.extent), kind))
        lmap[lp.loop_var] = v
    vmap = {
        iv.var: substitute(val, lmap)
        for iv, val in zip(blk.iter_vars, realize.iter_values, strict=False)
        if iv.kind is IterKind.REDUCE
    }
    vrf = lmap[target.loop_var]
    idx = list(store.indices)
    idx.insert(axis, simplify_index(vrf - target.min))
    idx_t = tuple(idx)
    keep, gate = _split_predicate(realize, path)
    value = substitute(rhs, vmap)
    if gate:  # a guarded contribution adds the identity: every rf element is initialised
        cond = substitute(_all(gate, realize.predicate.dtype), lmap)
        value = Select(cond, value, _identity(op, store.buffer.dtype))
    body = BufferStore(rf_buf, op(BufferLoad(rf_buf, idx_t), value), idx_t)
    init = BufferStore(rf_buf, _identity(op, store.buffer.dtype), idx_t)
    reads = tuple(substitute(r, vmap) for r in blk.reads if r.buffer is not store.buffer)
    region = BufferRegion(rf_buf, point_region(idx_t))
    spatial = [
        (iv, v)
        for iv, v in zip(blk.iter_vars, realize.iter_values, strict=False)
        if iv.kind is not IterKind.REDUCE
    ]
    new = Block(
        name, (*(iv for iv, _ in spatial), *new_ivs), (*reads, region), (region,), body, init
    )
    new, _ = rename_iters(new)
    values = (*(v for _, v in spatial), *(lp.loop_var for lp in red_loops))
    return BlockRealize(values, _all(keep, realize.predicate.dtype), new)


def _final_nest(
    realize: BlockRealize,
    path: _tree.Path,
    inner: list[For],
    store: BufferStore,
    op: type,
    rf_buf: Buffer,
    target: For,
    axis: int,
) -> Stmt:
    blk = realize.block
    red = reduce_vars(realize, IterKind.REDUCE)
    loops = [lp for lp in inner if id(lp.loop_var) not in red or lp is target]
    lmap: dict[Var, Expr] = {lp.loop_var: Var(lp.loop_var.name, lp.loop_var.dtype) for lp in loops}
    spatial = [
        (iv, v)
        for iv, v in zip(blk.iter_vars, realize.iter_values, strict=False)
        if iv.kind is IterKind.SPATIAL
    ]
    vrf = Var(f"v{target.loop_var.name}", target.loop_var.dtype)
    rf_iv = IterVar(vrf, Range(target.min, target.extent), IterKind.REDUCE)
    idx = list(store.indices)
    idx.insert(axis, simplify_index(vrf - target.min))
    load = BufferLoad(rf_buf, tuple(idx))
    body = BufferStore(
        store.buffer, op(BufferLoad(store.buffer, store.indices), load), store.indices
    )
    out_region = BufferRegion(store.buffer, point_region(store.indices))
    new = Block(
        blk.name,
        (*(iv for iv, _ in spatial), rf_iv),
        (BufferRegion(rf_buf, point_region(tuple(idx))), out_region),
        (out_region,),
        body,
        blk.init,
        annotations=blk.annotations,
    )
    new, _ = rename_iters(new)
    values = (*(substitute(v, lmap) for _, v in spatial), lmap[target.loop_var])
    keep, _ = _split_predicate(realize, path)
    pred = substitute(_all(keep, realize.predicate.dtype), lmap)
    stmt: Stmt = BlockRealize(values, pred, new)
    for lp in reversed(loops):
        nv = lmap[lp.loop_var]
        assert isinstance(nv, Var)
        stmt = For(nv, substitute(lp.min, lmap), substitute(lp.extent, lmap), ForKind.SERIAL, stmt)
    return stmt
