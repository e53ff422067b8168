"""decompose_padding: split a padding block into a constant fill and an in-range copy.

A *padding block* stores ``B[idx] = T.Select(cond, value, pad)`` with a load-free condition
and a constant ``pad`` (the zero padding of ``topi.conv2d``'s ``pad_temp``, the producers
``pad_einsum`` adds). Decomposing it at ``loop`` puts, right before ``loop``, a copy of the loop
nest from ``loop`` down whose block writes ``pad`` everywhere the original writes, and turns
the original block into ``B[idx] = value`` guarded by ``cond``. Where a conjunct of ``cond``
bounds one loop of that nest by a constant (``1 <= i < 5``), the loop range shrinks to it
instead, so the copy runs only over the in-range part.

``build_decompose_padding`` is pure; :func:`decompose_padding` is the traced primitive.
"""

from __future__ import annotations

from ...arith import Analyzer
from ...errors import ScheduleError
from ...ir import (
    GE,
    GT,
    LE,
    LT,
    And,
    Block,
    BlockRealize,
    BufferLoad,
    BufferStore,
    Expr,
    For,
    IntImm,
    IterKind,
    PrimFunc,
    Select,
    SeqStmt,
    Stmt,
    Var,
    collect_vars,
    post_order_visit,
    substitute,
)
from .. import _tree
from ..instruction import primitive
from ..state import BlockRV, LoopRV, ScheduleState
from ._blockutil import fragment, fresh_var_names, get_block, get_loop, rename_iters
from .index_map import const_value

PRIM = "decompose_padding"


def _error(blk: Block, short: str, requires: str, frag: Stmt | None = None) -> ScheduleError:
    return ScheduleError(
        PRIM,
        short,
        requires=requires,
        fragment=fragment(frag if frag is not None else blk),
        locations=[blk.name],
    )


def _has_load(e: Expr) -> bool:
    found: list[bool] = []
    post_order_visit(e, lambda n: found.append(True) if isinstance(n, BufferLoad) else None)
    return bool(found)


def check_padding_block(blk: Block) -> tuple[BufferStore, Select]:
    """The store and its Select; ScheduleError unless ``blk`` is a padding block."""
    store = blk.body
    requires = (
        "the block body is B[...] = T.Select(cond, value, pad) with a load-free cond and a "
        "pad value using no buffer and no iterator"
    )
    if not isinstance(store, BufferStore) or not isinstance(store.value, Select):
        raise _error(blk, f'block "{blk.name}" is not a padding block', requires)
    sel = store.value
    iters = {id(iv.var) for iv in blk.iter_vars}
    pad_vars = [v for v in collect_vars(sel.false_value) if id(v) in iters]
    if _has_load(sel.condition) or _has_load(sel.false_value) or pad_vars:
        raise _error(blk, f'block "{blk.name}" is not a padding block', requires)
    if blk.init is not None or any(iv.kind is not IterKind.SPATIAL for iv in blk.iter_vars):
        raise _error(
            blk,
            f'block "{blk.name}" is a reduction',
            "no init and every iterator spatial (each element is written once)",
        )
    if len(blk.writes) != 1 or any(r.buffer is store.buffer for r in blk.reads):
        raise _error(
            blk,
            f'block "{blk.name}" reads the buffer it pads or writes several',
            "the block writes one buffer and does not read it",
        )
    return store, sel


def chain_below(realize: BlockRealize, path: _tree.Path, top: For) -> list[For]:
    """Loops from ``top`` down to ``realize`` (outermost first); ScheduleError unless each
    holds exactly the next one and the last holds exactly the block."""
    blk = realize.block
    loops = _tree.loops_in_path(path)
    if not any(lp is top for lp in loops):
        raise _error(
            blk,
            f'loop "{top.loop_var.name}" is not above block "{blk.name}" in its scope',
            "the loop encloses the block, with no other block between them",
        )
    chain = loops[next(k for k, lp in enumerate(loops) if lp is top) :]
    for outer, inner in zip(chain, [*chain[1:], realize], strict=True):
        if outer.body is not inner:
            raise _error(
                blk,
                f'loop "{outer.loop_var.name}" holds more than the nest of "{blk.name}"',
                "the loops from the given loop down hold only this block",
                frag=top,
            )
    return chain


def _conjuncts(e: Expr) -> list[Expr]:
    if isinstance(e, And):
        return _conjuncts(e.a) + _conjuncts(e.b)
    return [e]


def _bound_of(cond: Expr, var: Var) -> tuple[int | None, int | None] | None:
    """``(lo, hi)`` with ``cond`` equivalent to ``lo <= var < hi`` (a side None: open) when
    ``cond`` compares ``var`` (coefficient +-1) with a constant; None otherwise."""
    if not isinstance(cond, LT | LE | GT | GE):
        return None
    ana = Analyzer()
    d = ana.simplify(cond.a - cond.b)
    if [id(v) for v in collect_vars(d)] != [id(var)]:
        return None
    for sign in (1, -1):
        c = const_value(ana.simplify(d - var * sign))
        if c is None:
            continue
        # cond is "sign * var + c  OP  0"
        lt = {LT: 0, LE: 1}.get(type(cond))  # sign*var < -c + lt
        if lt is not None:
            return (None, -c + lt) if sign == 1 else (c - lt + 1, None)
        gt = {GT: 1, GE: 0}[type(cond)]  # sign*var >= -c + gt
        return (-c + gt, None) if sign == 1 else (None, c - gt + 1)
    return None


def _bounded_loop(
    chain: list[For], ranges: dict[int, list[int]], cond: Expr
) -> tuple[int, tuple[int | None, int | None]] | None:
    """The loop (by variable id) of constant range that ``cond`` bounds, and the bounds."""
    for lp in chain:
        if id(lp.loop_var) in ranges:
            b = _bound_of(cond, lp.loop_var)
            if b is not None:
                return id(lp.loop_var), b
    return None


def tighten(chain: list[For], cond: Expr) -> tuple[list[For], list[Expr]]:
    """Loops of ``chain`` shrunk to the constant bounds ``cond`` puts on them, and the
    conjuncts of ``cond`` left for the predicate."""
    ranges: dict[int, list[int]] = {}
    for lp in chain:
        lo, ext = const_value(lp.min), const_value(lp.extent)
        if lo is not None and ext is not None:
            ranges[id(lp.loop_var)] = [lo, lo + ext]
    left: list[Expr] = []
    for c in _conjuncts(cond):
        hit = _bounded_loop(chain, ranges, c)
        if hit is None:
            left.append(c)
            continue
        key, (lo, hi) = hit
        r = ranges[key]
        new = [r[0] if lo is None else max(r[0], lo), r[1] if hi is None else min(r[1], hi)]
        if new[1] <= new[0]:  # empty: keep the condition, not an empty loop
            left.append(c)
            continue
        ranges[key] = new
    out = []
    for lp in chain:
        got = ranges.get(id(lp.loop_var))
        if got is None or (
            got[0] == const_value(lp.min) and got[1] - got[0] == const_value(lp.extent)
        ):
            out.append(lp)
            continue
        dt = lp.loop_var.dtype
        out.append(lp.update(min=IntImm(dt, got[0]), extent=IntImm(dt, got[1] - got[0])))
    return out, left


def _fill_nest(
    func: PrimFunc,
    chain: list[For],
    realize: BlockRealize,
    store: BufferStore,
    pad: Expr,
    name: str,
) -> Stmt:
    """A copy of the nest from ``chain[0]`` with fresh loops, storing the pad value."""
    blk = realize.block
    fresh, _ = rename_iters(blk.update(body=store.update(value=pad)))
    fill_blk = fresh.update(name=name, reads=(), annotations={})
    names = fresh_var_names(func, [lp.loop_var.name for lp in chain])
    vmap = {lp.loop_var: Var(n, lp.loop_var.dtype) for lp, n in zip(chain, names, strict=True)}
    nest: Stmt = BlockRealize(
        tuple(substitute(v, vmap) for v in realize.iter_values),
        substitute(realize.predicate, vmap),
        fill_blk,
    )
    for lp in reversed(chain):
        nest = lp.update(
            loop_var=vmap[lp.loop_var],
            min=substitute(lp.min, vmap),
            extent=substitute(lp.extent, vmap),
            body=nest,
        )
    return nest


def build_decompose_padding(func: PrimFunc, block: str, loop: Var) -> tuple[PrimFunc, str]:
    """Decompose padding block ``block`` at ``loop`` (see :func:`decompose_padding`).

    Returns the new function and the name of the fill block.
    """
    realize, path = get_block(func, block, PRIM)
    top, _ = get_loop(func, loop, PRIM)
    store, sel = check_padding_block(realize.block)
    chain = chain_below(realize, path, top)
    name = _tree.fresh_name(func, f"{block}_pad_const")
    fill = _fill_nest(func, chain, realize, store, sel.false_value, name)
    binding = {
        iv.var: v for iv, v in zip(realize.block.iter_vars, realize.iter_values, strict=True)
    }
    cond = Analyzer().simplify(substitute(sel.condition, binding))
    loops, left = tighten(chain, cond)
    pred: Expr = realize.predicate
    for c in left:
        pred = c if _is_true(pred) else And(pred, c)
    copy_blk = realize.block.update(body=store.update(value=sel.true_value))
    nest: Stmt = realize.update(predicate=pred, block=copy_blk)
    for lp in reversed(loops):
        nest = lp.update(body=nest)
    return _tree.replace_stmt(func, top, SeqStmt((fill, nest))), name


@primitive("decompose_padding", inputs=("block", "loop"), outputs="one")
def decompose_padding(state: ScheduleState, block: BlockRV, loop: LoopRV) -> BlockRV:
    """Split padding block ``block`` into a fill block (before ``loop``) and an in-range copy.

    Requires: (1) the block stores ``B[...] = T.Select(cond, value, pad)``, ``cond`` loads
    nothing and ``pad`` uses no buffer and no iterator; (2) no init, every iterator spatial;
    (3) the block writes only ``B`` and does not read it; (4) ``loop`` encloses the block in
    its scope and the loops from ``loop`` down hold only this block.
    Rewrite: ``for i in range(6): P[i] = T.Select(1 <= i < 5, X[i - 1], 0.0)`` -->
    ``for i_1 in range(6): P[i_1] = 0.0`` (block ``P_pad_const``, returned) then
    ``for i in range(1, 5): P[i] = X[i - 1]``.
    """
    name = state.block_name(block)
    var = state.loop_var(loop)
    new_func, fill = build_decompose_padding(state.func, name, var)
    state.commit(new_func)
    return state.block_rv(fill)


def _is_true(e: object) -> bool:
    """True for the constant predicate ``True``."""
    return isinstance(e, IntImm) and e.value == 1
