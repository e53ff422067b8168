"""Loop primitives: ``split``, ``fuse``, ``reorder``, ``add_unit_loop``.

Each primitive checks every requirement first (``check_*`` raise ScheduleError naming the
primitive), then builds the new loop nest with pure helpers, then commits. Block bindings
of the rewritten nest are simplified with :class:`tilecraft.arith.Analyzer`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Annotated

from ...arith import Analyzer
from ...ir import (
    And,
    BlockRealize,
    DataType,
    Expr,
    For,
    ForKind,
    IntImm,
    IterKind,
    Range,
    Stmt,
    Var,
    as_expr,
    cast,
    dtype,
    uses_var,
)
from .. import _tree
from ..arguments import SPLIT_FACTORS
from ..instruction import primitive
from ..state import BlockRV, LoopRV, ScheduleState
from ._blockutil import fresh_var_names
from ._looporder import check_kind_nesting, check_reduction_order


# ------------------------------------------------------------------------------------------
# shared helpers
def loop_node(state: ScheduleState, loop: LoopRV) -> tuple[For, _tree.Path]:
    """The For a loop handle refers to, with its path (ScheduleError when stale)."""
    return _tree.find_loop_path(state.func, state.loop_var(loop))


def loop_error_fragment(state: ScheduleState, node: For, text: str = "<- this loop") -> str:
    """An outline of ``node`` marked with ``text``."""
    return _tree.outline(node, {id(node): text})


def is_const(e: Expr, value: int | None = None) -> bool:
    """True if ``e`` is an integer constant (equal to ``value`` when given)."""
    return isinstance(e, IntImm) and (value is None or e.value == value)


def tidy_bindings(stmt: Stmt, doms: Sequence[tuple[Var, Expr, Expr]]) -> Stmt:
    """Simplify the iter_values/predicates of the blocks directly under ``stmt``.

    ``doms`` are ``(var, min, extent)`` of the loops of the rewritten nest.
    """
    blocks = _tree.child_blocks_of_body(stmt) if not isinstance(stmt, BlockRealize) else [stmt]
    if not blocks:
        return stmt
    ana = Analyzer()
    for var, lo, ext in doms:
        if not isinstance(ext, IntImm) or ext.value > 0:  # symbolic: the loop runs, so > 0
            ana.bind(var, Range(lo, ext))
    mapping: dict[int, Stmt | None] = {}
    for br in blocks:
        vals = tuple(ana.simplify(v) for v in br.iter_values)
        pred = ana.simplify(br.predicate)
        new = br.update(iter_values=vals, predicate=pred)
        if new is not br:
            mapping[id(br)] = new
    if not mapping:
        return stmt
    return _rebuild_stmt(stmt, mapping)


def _rebuild_stmt(stmt: Stmt, mapping: dict[int, Stmt | None]) -> Stmt:
    out = _tree._rebuild(stmt, mapping)
    assert out is not None
    return out


def check_serial(state: ScheduleState, node: For, what: str) -> None:
    """Require ``node`` to be a serial loop."""
    if node.kind is not ForKind.SERIAL:
        kind = f'bound to "{node.thread}"' if node.thread else node.kind.value
        raise state.error(
            f'loop "{node.loop_var.name}" is {kind}',
            requires=f"{what} a serial loop (not parallel, vectorized, unrolled or thread-bound)",
            fragment=loop_error_fragment(state, node),
            hint="apply loop transformations before parallel/vectorize/unroll/bind",
            locations=[node.loop_var.name],
        )


def check_no_opaque_binding(state: ScheduleState, nodes: Sequence[For], what: str) -> None:
    """Require that no block under ``nodes`` binds one of their variables to an opaque iterator."""
    for node in nodes:
        for br in _tree.blocks_under(node.body):
            for iv, val in zip(br.block.iter_vars, br.iter_values, strict=True):
                if iv.kind is IterKind.OPAQUE and uses_var(val, node.loop_var):
                    raise state.error(
                        f'block "{br.block.name}" binds opaque iterator "{iv.var.name}" to loop '
                        f'"{node.loop_var.name}"',
                        requires=f"{what} no opaque block iterator depends on the loops",
                        fragment=loop_error_fragment(state, node),
                        locations=[br.block.name, node.loop_var.name],
                    )


def _guard(state: ScheduleState, body: Stmt, cond: Expr, node: For) -> Stmt:
    """Add ``cond`` to the predicate of every block directly under ``body``."""
    blocks = _tree.child_blocks_of_body(body)
    if not blocks:
        raise state.error(
            f'loop "{node.loop_var.name}" has no block to carry the split guard',
            requires="a non-divisible split needs a block under the loop",
            fragment=loop_error_fragment(state, node),
            hint="choose factors that divide the extent",
        )
    mapping: dict[int, Stmt | None] = {}
    for br in blocks:
        pred = cond if is_const(br.predicate, 1) else And(br.predicate, cond)
        mapping[id(br)] = br.update(predicate=pred)
    return _rebuild_stmt(body, mapping)


def _check_leaves_are_blocks(state: ScheduleState, node: For) -> None:
    """Require every statement between ``node`` and the blocks below to be a loop or a block."""
    from ...ir import SeqStmt

    def go(s: Stmt) -> None:
        if isinstance(s, BlockRealize):
            return
        if isinstance(s, For | SeqStmt):
            for c in _tree.stmt_children(s):
                go(c)
            return
        raise state.error(
            f'loop "{node.loop_var.name}" contains a {type(s).__name__} outside any block',
            requires="the statements under the loop are loops and blocks only",
            fragment=loop_error_fragment(state, node),
            locations=[node.loop_var.name],
        )

    go(node.body)


# ------------------------------------------------------------------------------------------
# split
def check_split_factors(state: ScheduleState, factors: Sequence[int | None]) -> list[int | None]:
    """Validate ``factors``: at least 2, positive ints or None, at most one None."""
    shown = [None if f is None else int(f) if isinstance(f, int) else f for f in factors]
    if not isinstance(factors, Sequence) or len(factors) < 2:
        raise state.error(f"argument 'factors': expected at least 2 factors, got {shown}")
    out: list[int | None] = []
    for f in factors:
        if f is None:
            out.append(None)
        elif isinstance(f, int) and not isinstance(f, bool) and f >= 1:
            out.append(int(f))
        else:
            raise state.error(
                f"argument 'factors': expected positive ints or None, got {shown}",
                hint="a factor is a positive int (or a value from sample_perfect_tile)",
            )
    if sum(f is None for f in out) > 1:
        raise state.error(f"argument 'factors': expected at most one None, got {shown}")
    return out


def _split_extents(
    state: ScheduleState, node: For, factors: list[int | None]
) -> tuple[list[Expr], bool]:
    """Extents of the new loops and whether a guard predicate is needed."""
    dt = node.loop_var.dtype
    known = 1
    for f in factors:
        if f is not None:
            known *= f
    ext = node.extent
    if isinstance(ext, IntImm):
        if None in factors:
            inferred = -(-ext.value // known)
            total = known * inferred
            return [as_expr(inferred if f is None else f, dt) for f in factors], total != ext.value
        if known < ext.value:
            raise state.error(
                f'factors {factors} cover {known} iterations of loop "{node.loop_var.name}" '
                f"with extent {ext.value}",
                requires="the product of the factors is at least the loop extent",
                fragment=loop_error_fragment(state, node),
                hint="use None for one factor to infer it",
                locations=[node.loop_var.name],
            )
        return [as_expr(int(f or 0), dt) for f in factors], known != ext.value
    if None not in factors:
        raise state.error(
            f'loop "{node.loop_var.name}" has symbolic extent; factors {factors} may not cover it',
            requires="for a symbolic extent one factor is None (inferred)",
            fragment=loop_error_fragment(state, node),
            hint="pass None for the outer factor: factors=[None, 32]",
            locations=[node.loop_var.name],
        )
    ana = Analyzer()
    # a provably divisible extent (n * 4096 split by 4) needs no guard
    divisible = known == 1 or ana.can_prove_equal(ext % as_expr(known, dt), 0)
    inferred_e = ana.simplify(ext // known if divisible else (ext + (known - 1)) // known)
    return [inferred_e if f is None else as_expr(f, dt) for f in factors], not divisible


@primitive("split", inputs=("loop", "factors"), outputs="many")
def split(
    state: ScheduleState,
    loop: LoopRV,
    factors: Annotated[Sequence[int | None], SPLIT_FACTORS],
    *,
    preserve_unit_iters: bool = True,
) -> list[LoopRV]:
    """Split ``loop`` into ``len(factors)`` nested loops.

    Requires: (1) at least two factors, positive ints or None, at most one None (inferred);
    (2) the product covers the extent (guaranteed when one factor is inferred); a symbolic
    extent needs one None; (3) the loop is serial (not parallel/vectorized/unrolled/bound);
    (4) a non-divisible split has only loops and blocks under the loop (the guard
    ``i0 * f + i1 < extent`` goes onto each block's predicate).
    Rewrite:  for i in range(128)  ->  for i_0 in range(4): for i_1 in range(32)  # i = i_0*32+i_1
    """
    node, _ = loop_node(state, loop)
    fs = check_split_factors(state, factors)
    check_serial(state, node, "split needs")
    extents, guarded = _split_extents(state, node, fs)
    if guarded:
        _check_leaves_are_blocks(state, node)
    name, dt = node.loop_var.name, node.loop_var.dtype
    fresh = fresh_var_names(state.func, [f"{name}_{k}" for k in range(len(extents))])
    new_vars = [Var(n, dt) for n in fresh]
    keep = [preserve_unit_iters or not is_const(e, 1) for e in extents]
    offset: Expr | None = None
    for v, e, k in zip(new_vars, extents, keep, strict=True):
        term: Expr = v if k else as_expr(0, dt)
        offset = term if offset is None else offset * e + term
    assert offset is not None
    value = offset if is_const(node.min, 0) else node.min + offset
    body: Stmt = _tree.substitute_outside_blocks(node.body, {node.loop_var: value})
    if guarded:
        body = _guard(state, body, offset < node.extent, node)
    doms = [(v, as_expr(0, dt), e) for v, e, k in zip(new_vars, extents, keep, strict=True) if k]
    body = tidy_bindings(body, doms)
    for v, e, k in reversed(list(zip(new_vars, extents, keep, strict=True))):
        if k:
            body = For(v, as_expr(0, dt), e, ForKind.SERIAL, body)
    state.commit(_tree.replace_stmt(state.func, node, body))
    return [LoopRV(v) for v, k in zip(new_vars, keep, strict=True) if k]


# ------------------------------------------------------------------------------------------
# fuse
def check_perfectly_nested(state: ScheduleState, nodes: Sequence[For], what: str) -> None:
    """Require ``nodes[k + 1]`` to be exactly the body of ``nodes[k]``."""
    for outer, inner in itertools.pairwise(nodes):
        if outer.body is not inner:
            raise state.error(
                f'loops "{outer.loop_var.name}" and "{inner.loop_var.name}" are not adjacent '
                "and perfectly nested",
                requires=f"{what} each loop's body is exactly the next loop",
                fragment=_tree.outline(outer, {id(outer): "<- outer", id(inner): "<- inner"}),
                hint="pass the loops outermost first, with nothing between them",
                locations=[outer.loop_var.name, inner.loop_var.name],
            )


def check_independent_extents(state: ScheduleState, nodes: Sequence[For], what: str) -> None:
    """Require no loop's min/extent to use another listed loop's variable."""
    for a in nodes:
        for b in nodes:
            if a is not b and (_uses(b.extent, a.loop_var) or _uses(b.min, a.loop_var)):
                raise state.error(
                    f'the range of loop "{b.loop_var.name}" depends on loop "{a.loop_var.name}"',
                    requires=f"{what} loop ranges independent of each other",
                    fragment=_tree.outline(a, {id(b): "<- dependent range"}),
                    locations=[a.loop_var.name, b.loop_var.name],
                )


def _uses(e: Expr, var: Var) -> bool:
    if isinstance(e, IntImm):
        return False
    if isinstance(e, Var):
        return e is var
    return uses_var(e, var)


def check_distinct(state: ScheduleState, vars_: Sequence[Var]) -> None:
    """Require the loop handles to name distinct loops."""
    if len({id(v) for v in vars_}) != len(vars_):
        names = [v.name for v in vars_]
        raise state.error(f"argument 'loops': a loop is given twice in {names}")


@primitive("fuse", inputs=("loops",), outputs="one")
def fuse(state: ScheduleState, *loops: LoopRV, preserve_unit_iters: bool = True) -> LoopRV:
    """Fuse adjacent perfectly nested loops into one.

    Requires: (1) at least one loop, each given once, outermost first; (2) each loop's body
    is exactly the next loop (adjacent, perfectly nested); (3) all loops are serial;
    (4) no loop's range depends on another fused loop; (5) no opaque block iterator depends on
    them.
    Rewrite:  for i in range(4): for j in range(8)  ->  for i_j_fused in range(32)
              # i = i_j_fused // 8, j = i_j_fused % 8
    """
    if not loops:
        raise state.error("argument 'loops': expected at least one loop")
    vars_ = [state.loop_var(rv) for rv in loops]
    check_distinct(state, vars_)
    nodes = [_tree.find_loop(state.func, v) for v in vars_]
    check_perfectly_nested(state, nodes, "fuse needs")
    for n in nodes:
        check_serial(state, n, "fuse needs")
    check_independent_extents(state, nodes, "fuse needs")
    check_no_opaque_binding(state, nodes, "fuse needs")
    dt = _fused_dtype(vars_[0].dtype, [n.extent for n in nodes])
    exts = [n.extent for n in nodes]
    total: Expr = exts[0] if exts[0].dtype == dt else cast(exts[0], dt)
    for e in exts[1:]:
        total = (
            as_expr(total.value * e.value, dt)
            if isinstance(total, IntImm) and isinstance(e, IntImm)
            else total * (e if e.dtype == dt else cast(e, dt))
        )
    (fused_name,) = fresh_var_names(state.func, ["_".join(v.name for v in vars_) + "_fused"])
    fused = Var(fused_name, dt)
    vmap: dict[Var, Expr] = {}
    stride: Expr = as_expr(1, dt)
    for k in range(len(nodes) - 1, -1, -1):
        n = nodes[k]
        idx: Expr = fused if is_const(stride, 1) else fused // stride
        if k > 0:
            idx = idx % (n.extent if n.extent.dtype == dt else cast(n.extent, dt))
        if idx.dtype != n.loop_var.dtype:  # a wide fused index: each part fits the loop's type
            idx = cast(idx, n.loop_var.dtype)
        vmap[n.loop_var] = idx if is_const(n.min, 0) else n.min + idx
        stride = (
            as_expr(stride.value * n.extent.value, dt)
            if isinstance(stride, IntImm) and isinstance(n.extent, IntImm)
            else stride * (n.extent if n.extent.dtype == dt else cast(n.extent, dt))
        )
    body = _tree.substitute_outside_blocks(nodes[-1].body, vmap)
    total = Analyzer().simplify(total)  # 1 * n -> n
    body = tidy_bindings(body, [(fused, as_expr(0, dt), total)])
    new = For(fused, as_expr(0, dt), total, ForKind.SERIAL, body)
    state.commit(_tree.replace_stmt(state.func, nodes[0], new))
    return LoopRV(fused)


def _fused_dtype(dt: DataType, extents: Sequence[Expr]) -> DataType:
    """``dt``, or int64 when the constant product of ``extents`` does not fit ``dt``."""
    total = 1
    for e in extents:
        if not isinstance(e, IntImm):
            return dt
        total *= e.value
    lo, hi = -(2 ** (dt.bits - 1)), 2 ** (dt.bits - 1) - 1
    return dt if lo <= total <= hi or dt.bits >= 64 else dtype("int64")


# ------------------------------------------------------------------------------------------
# reorder
def _chain(state: ScheduleState, vars_: Sequence[Var]) -> list[For]:
    """The loops from the outermost to the innermost given loop; checks they form one chain."""
    found = [_tree.find_loop_path(state.func, v) for v in vars_]
    deepest, deep_path = max(found, key=lambda fp: len(fp[1]))
    on_path = {id(s) for s in deep_path}
    for node, _ in found:
        if node is not deepest and id(node) not in on_path:
            raise state.error(
                f'loops "{node.loop_var.name}" and "{deepest.loop_var.name}" are not in one chain',
                requires="reorder needs loops nested in one another (one chain)",
                fragment=_tree.outline(
                    state.func.body, {id(node): "<- here", id(deepest): "<- and here"}
                ),
                locations=[node.loop_var.name, deepest.loop_var.name],
            )
    top = min(found, key=lambda fp: len(fp[1]))[0]
    start = next(i for i, s in enumerate(deep_path) if s is top)
    chain: list[For] = []
    for s in (*deep_path[start:], deepest):
        if not isinstance(s, For):
            what = f'block "{s.block.name}"' if isinstance(s, BlockRealize) else type(s).__name__
            raise state.error(
                f"a {what} lies between the loops to reorder",
                requires="reorder needs the loops from the outermost to the innermost given "
                "one to be perfectly nested, with no block or statement between them",
                fragment=_tree.outline(top, {id(s): "<- in between"}),
                locations=[top.loop_var.name],
            )
        chain.append(s)
    check_perfectly_nested(state, chain, "reorder needs")
    return chain


@primitive("reorder", inputs=("loops",), outputs="none")
def reorder(state: ScheduleState, *loops: LoopRV) -> None:
    """Reorder loops: the given loops take, in the given order, the positions they occupy.

    Requires: (1) each loop given once; (2) the loops lie in one chain; (3) from the outermost
    to the innermost given loop the nest is perfect (no block, statement or sibling between);
    (4) no loop range in the chain depends on another chain loop; (5) no opaque block
    iterator depends on the chain loops; (6) the new order puts no parallel loop inside a
    parallel or vectorized loop and no vectorized loop inside a vectorized one; (7) for each
    block with an init under the chain, when a chain loop binds both spatial and reduce
    iterators of it, or none (repeating it), its non-spatial loops keep their order.
    Rewrite:  for i: for j: for k  --reorder(k, i)-->  for k: for j: for i
    """
    vars_ = [state.loop_var(rv) for rv in loops]
    check_distinct(state, vars_)
    if len(vars_) < 2:
        return
    chain = _chain(state, vars_)
    check_independent_extents(state, chain, "reorder needs")
    check_no_opaque_binding(state, chain, "reorder needs")
    chosen = {id(v) for v in vars_}
    order = iter(_tree.find_loop(state.func, v) for v in vars_)
    placed = [next(order) if id(n.loop_var) in chosen else n for n in chain]
    for k, outer in enumerate(placed):
        for inner in placed[k + 1 :]:
            check_kind_nesting(state, outer, inner, "reorder needs", kinds=(outer.kind, inner.kind))
    check_reduction_order(state, chain, placed)
    body: Stmt = chain[-1].body
    for n in reversed(placed):
        body = n.update(body=body)
    state.commit(_tree.replace_stmt(state.func, chain[0], body))


# ------------------------------------------------------------------------------------------
# add_unit_loop
@primitive("add_unit_loop", inputs=("block_or_loop",), outputs="one")
def add_unit_loop(state: ScheduleState, block_or_loop: BlockRV | LoopRV) -> LoopRV:
    """Add a loop of extent 1 directly above a block or a loop.

    Requires: the target is not the root block.
    Rewrite:  with block("C")  ->  for u in range(1): with block("C")
    """
    target: Stmt
    if isinstance(block_or_loop, BlockRV):
        target = state.get_block(block_or_loop)
        if target is state.func.body:
            raise state.error(
                f'block "{target.block.name}" is the root block',
                requires="add_unit_loop needs a block inside the root block",
            )
    else:
        target = state.get_loop(block_or_loop)
    (unit_name,) = fresh_var_names(state.func, ["u"])
    var = Var(unit_name, target.loop_var.dtype if isinstance(target, For) else as_expr(0).dtype)
    new = For(var, as_expr(0, var.dtype), as_expr(1, var.dtype), ForKind.SERIAL, target)
    state.commit(_tree.replace_stmt(state.func, target, new))
    return LoopRV(var)
