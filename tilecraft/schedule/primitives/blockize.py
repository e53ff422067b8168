"""``blockize``: turn the loop nest under a loop into one block (TensorIR semantics).

The subtree rooted at the loop becomes the body of a new *outer* block whose iterators are
the outer parts of the original block's iterators; the original block stays inside with
iterators over the inner parts. Each iterator binding must divide: ``v = o * E + i`` with
``i`` a dense mixed-radix combination of the loops inside the subtree running over
``[0, E)`` and ``o`` an expression of the loops above. Then ``v`` becomes ``v_o * E + v_i``
in the inner block, the outer block's ``reads``/``writes`` are the inner regions relaxed over
the inner iterators, and an init of the inner block moves to the outer block (it must run
once per outer reduction, not once per inner one).

:func:`build_blockize` is pure (PrimFunc, loop variable -> PrimFunc, outer block name);
:func:`blockize` is the traced primitive.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ...errors import ScheduleError
from ...ir import (
    Block,
    BlockRealize,
    BufferRegion,
    Expr,
    For,
    ForKind,
    IntImm,
    IterKind,
    IterVar,
    PrimFunc,
    Range,
    Stmt,
    Var,
    collect_vars,
    const,
    substitute,
)
from .. import _tree
from ..instruction import primitive
from ..state import BlockRV, LoopRV, ScheduleState
from ._blockutil import (
    bounds_to_region,
    fragment,
    fresh_var_names,
    get_loop,
    region_bounds,
)
from .index_map import const_value, simplify_index

PRIM = "blockize"


@dataclass(frozen=True)
class _Division:
    """``binding = outer * extent + inner`` for one iterator."""

    outer: Expr
    inner: Expr
    extent: int


def _fail(
    short: str, requires: str, top: Stmt, hint: str = "", where: Sequence[str] = ()
) -> ScheduleError:
    return ScheduleError(
        PRIM,
        short,
        requires=requires,
        fragment=fragment(top, {id(top): "<- target loop"}),
        hint=hint,
        locations=list(where),
    )


def _chain(top: For) -> tuple[list[For], BlockRealize]:
    """The loops from ``top`` down (perfectly nested) and the one block they hold."""
    loops = [top]
    body = top.body
    while isinstance(body, For):
        loops.append(body)
        body = body.body
    if not isinstance(body, BlockRealize):
        raise _fail(
            f'loop "{top.loop_var.name}" does not hold a perfect nest around one block',
            "the loops from the target down are perfectly nested around a single block",
            top,
            hint="split the statements apart (compute_at / reverse_compute_at) or blockize "
            "a loop further in",
        )
    for lp in loops:
        if lp.kind is ForKind.THREAD_BINDING or lp.kind is ForKind.PARALLEL:
            raise _fail(
                f'loop "{lp.loop_var.name}" is {lp.kind.value}',
                "no loop from the target down is thread-bound or parallel",
                top,
                where=[lp.loop_var.name],
            )
        if const_value(lp.min) != 0 or const_value(lp.extent) is None:
            raise _fail(
                f'loop "{lp.loop_var.name}" does not run over a constant range from 0',
                "every loop from the target down runs from 0 over a constant extent",
                top,
                where=[lp.loop_var.name],
            )
    return loops, body


def _inner_extent(inner: Expr, loops: Mapping[int, For], used: set[int]) -> int | None:
    """``E`` when ``inner`` is a dense mixed-radix sum of distinct inner loops, else None."""
    terms: list[tuple[int, For]] = []
    rest = inner
    for v in collect_vars(inner):
        lp = loops.get(id(v))
        if lp is None or id(v) in used:
            return None
        coeff = const_value(
            substitute(rest, {v: IntImm(v.dtype, 1)}) - substitute(rest, {v: IntImm(v.dtype, 0)})
        )
        if coeff is None or coeff <= 0:
            return None
        terms.append((coeff, lp))
        rest = simplify_index(rest - IntImm(v.dtype, coeff) * v)
    if const_value(rest) != 0:
        return None
    extent = 1
    for coeff, lp in sorted(terms, key=lambda t: t[0]):
        if coeff != extent:
            return None
        extent *= const_value(lp.extent) or 0
    for _, lp in terms:
        used.add(id(lp.loop_var))
    return extent


def _multiple_of(extent: Expr, ext: int) -> bool:
    """Whether ``extent`` (constant, or symbolic like ``(m + 127) // 128 * 128``) is provably a
    multiple of ``ext``."""
    return const_value(simplify_index(extent % IntImm(extent.dtype, ext))) == 0


def _divide(realize: BlockRealize, loops: list[For], top: For) -> list[_Division]:
    """Divide every binding of ``realize`` into outer and inner parts (see module doc)."""
    inner_loops = {id(lp.loop_var): lp for lp in loops}
    zero = {lp.loop_var: IntImm(lp.loop_var.dtype, 0) for lp in loops}
    used: set[int] = set()
    out: list[_Division] = []
    for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True):
        base = simplify_index(substitute(value, zero))
        inner = simplify_index(value - base)
        ext = _inner_extent(inner, inner_loops, used)
        if ext is None or any(id(v) in inner_loops for v in collect_vars(base)):
            raise _fail(
                f'the binding of "{iv.var.name}" does not divide into loops above and below '
                f'"{top.loop_var.name}"',
                "each iterator is bound to outer * E + inner, inner a dense combination of "
                "the loops from the target down",
                top,
                where=[realize.block.name],
            )
        if ext > 1 and (const_value(iv.dom.min) != 0 or not _multiple_of(iv.dom.extent, ext)):
            raise _fail(
                f'the domain of "{iv.var.name}" is not a multiple of {ext} from 0',
                "each iterator's domain starts at 0 and its extent is a multiple of its inner "
                "extent",
                top,
                where=[realize.block.name],
            )
        if ext > 1 and const_value(simplify_index(base % IntImm(base.dtype, ext))) != 0:
            raise _fail(
                f'the outer part of "{iv.var.name}" is not a multiple of {ext}',
                "each iterator is bound to outer * E + inner with E its inner extent",
                top,
                where=[realize.block.name],
            )
        outer = simplify_index(base // IntImm(base.dtype, ext)) if ext > 1 else base
        out.append(_Division(outer, inner, ext))
    idle = [lp for lp in loops if id(lp.loop_var) not in used and const_value(lp.extent) != 1]
    if idle:  # the block runs again per iteration (an init would rerun): not one block
        raise _fail(
            f'loop "{idle[0].loop_var.name}" binds no iterator of "{realize.block.name}"',
            "every loop from the target down (extent > 1) binds an iterator, so the inner "
            "block computes each point once",
            top,
            where=[idle[0].loop_var.name],
        )
    return out


def _relaxed(
    regions: Sequence[BufferRegion], dom: Mapping[Var, Range], top: For
) -> tuple[BufferRegion, ...]:
    out = []
    for reg in regions:
        got = region_bounds(reg.region, {}, dom)
        if got is None:
            raise _fail(
                f'cannot bound the region of "{reg.buffer.name}" over the inner iterators',
                "access regions are affine in the block iterators",
                top,
            )
        out.append(BufferRegion(reg.buffer, bounds_to_region(got)))
    return tuple(out)


def _init_nest(
    name: str,
    block: Block,
    inner_ivs: list[IterVar],
    vmap: Mapping[Var, Expr],
    loop_names: list[str],
) -> Stmt | None:
    """The outer block's init: the inner init run over the inner spatial iterations."""
    if block.init is None:
        return None
    spatial = [iv for iv in inner_ivs if iv.kind is IterKind.SPATIAL]
    ivs = [IterVar(Var(iv.var.name, iv.var.dtype), iv.dom, IterKind.SPATIAL) for iv in spatial]
    to_init = {old.var: new.var for old, new in zip(spatial, ivs, strict=True)}
    writes = tuple(substitute(w, {**vmap}) for w in block.writes)
    init_body = substitute(substitute(block.init, vmap), to_init)
    writes = tuple(substitute(w, to_init) for w in writes)
    init_blk = Block(name, tuple(ivs), (), writes, init_body)
    lvars = [Var(n, iv.var.dtype) for n, iv in zip(loop_names, ivs, strict=False)]
    stmt: Stmt = BlockRealize(tuple(lvars), const(True, "bool"), init_blk)
    for lv, iv in reversed(list(zip(lvars, ivs, strict=True))):
        stmt = For(lv, IntImm(lv.dtype, 0), iv.dom.extent, ForKind.SERIAL, stmt)
    return stmt


def _iter_vars(
    func: PrimFunc, blk: Block, divs: Sequence[_Division]
) -> tuple[list[IterVar], list[IterVar], dict[Var, Expr]]:
    """Outer and inner iterators, and each old iterator as ``v_o * E + v_i``; an iterator
    without an inner part (E = 1) is its outer iterator alone (no inner iterator)."""
    names = fresh_var_names(
        func, [f"{iv.var.name}_{s}" for iv in blk.iter_vars for s in ("o", "i")]
    )
    outer_ivs: list[IterVar] = []
    inner_ivs: list[IterVar] = []
    vmap: dict[Var, Expr] = {}
    for k, (iv, d) in enumerate(zip(blk.iter_vars, divs, strict=True)):
        dt = iv.var.dtype
        vo, vi = Var(names[2 * k], dt), Var(names[2 * k + 1], dt)
        if d.extent > 1:  # _divide checked: a domain from 0, a multiple of E
            outer_ext = simplify_index(iv.dom.extent // IntImm(dt, d.extent))
            outer_ivs.append(IterVar(vo, Range(IntImm(dt, 0), outer_ext), iv.kind))
        else:  # no inner part: the outer iterator keeps the domain, symbolic or offset
            outer_ivs.append(IterVar(vo, iv.dom, iv.kind))
        if d.extent > 1:
            inner_ivs.append(IterVar(vi, Range(IntImm(dt, 0), IntImm(dt, d.extent)), iv.kind))
        vmap[iv.var] = vo * d.extent + vi if d.extent > 1 else vo
    return outer_ivs, inner_ivs, vmap


def build_blockize(func: PrimFunc, loop: Var) -> tuple[PrimFunc, str]:
    """Blockize the subtree under ``loop`` (see the module docstring); returns the new
    function and the outer block's name."""
    top, _ = get_loop(func, loop, PRIM)
    loops, realize = _chain(top)
    blk = realize.block
    inner_ids = {id(lp.loop_var) for lp in loops}
    if any(id(v) in inner_ids for v in collect_vars(realize.predicate)):
        raise _fail(
            f'the predicate of "{blk.name}" uses loops from "{loop.name}" down',
            "the block's predicate only uses loops above the target loop",
            top,
            where=[blk.name],
        )
    divs = _divide(realize, loops, top)
    outer_ivs, inner_ivs, vmap = _iter_vars(func, blk, divs)
    new_inner_blk = substitute(blk.update(iter_vars=tuple(inner_ivs), init=None), vmap)
    values = tuple(d.inner for d in divs if d.extent > 1)
    new_inner = BlockRealize(values, const(True, "bool"), new_inner_blk)
    mapping: dict[int, Stmt | None] = {id(realize): new_inner}
    body = _tree.replace_stmts(func.update(body=top), mapping).body
    inner_dom = {iv.var: iv.dom for iv in inner_ivs}
    outer_name = _tree.fresh_name(func, f"{blk.name}_o")
    init_names = fresh_var_names(func, [f"{iv.var.name}_init" for iv in inner_ivs])
    init = _init_nest(_tree.fresh_name(func, f"{blk.name}_init"), blk, inner_ivs, vmap, init_names)
    outer_blk = Block(
        outer_name,
        tuple(outer_ivs),
        _relaxed(new_inner_blk.reads, inner_dom, top),
        _relaxed(new_inner_blk.writes, inner_dom, top),
        body,
        init=init,
    )
    outer = BlockRealize(tuple(d.outer for d in divs), realize.predicate, outer_blk)
    return _tree.replace_stmt(func, top, outer), outer_name


@primitive("blockize", inputs=("loop",), outputs="one")
def blockize(state: ScheduleState, loop: LoopRV) -> BlockRV:
    """Make the subtree under ``loop`` one block; returns the new outer block.

    Requires: (1) the loops from ``loop`` down are perfectly nested around one block, none
    thread-bound or parallel, each from 0 over a constant extent; (2) the block's predicate
    uses only loops above ``loop``; (3) each iterator binding divides as ``outer * E +
    inner``, ``inner`` a dense mixed-radix combination of distinct loops from ``loop`` down
    (over ``[0, E)``), ``outer`` a multiple-of-``E`` expression of the loops above; (4) each
    iterator's domain starts at 0 with an extent that ``E`` divides.
    Rewrite: ``for i1 in range(16): C[vi = i0 * 16 + i1]`` -->
    ``C_o[vi_o = i0]: for i1 in range(16): C[vi_i = i1]`` with ``vi = vi_o * 16 + vi_i``;
    an init of ``C`` becomes ``C_o``'s init (block ``C_init`` over the inner spatial
    iterators).
    """
    var = state.loop_var(loop)
    func, name = build_blockize(state.func, var)
    state.commit(func)
    return state.block_rv(name)
