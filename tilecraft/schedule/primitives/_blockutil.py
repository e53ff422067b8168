"""Block-level helpers shared by the compute-location, cache and reduction primitives.

Package-private. Everything here is pure: it reads a PrimFunc or builds new statements.
Regions are handled as inclusive ``(lo, hi)`` bounds per dimension while being combined and
turned back into :class:`~tilecraft.ir.Range` s at the end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import ScheduleError
from ...ir import (
    GE,
    LT,
    Add,
    And,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Expr,
    For,
    ForKind,
    IntImm,
    IterKind,
    IterVar,
    Max,
    Min,
    Mutator,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
    Sub,
    Var,
    collect_vars,
    const,
    post_order_visit,
    substitute,
)
from .. import _tree
from ..state import BlockRV, LoopRV, ScheduleState
from ._names import used_buffer_names, used_var_names
from .index_map import Bounds, bound_index, bound_indices, const_value, same_index, simplify_index


def get_block(func: PrimFunc, name: str, primitive: str) -> tuple[BlockRealize, _tree.Path]:
    """The realize and path of block ``name``; ScheduleError when missing or the root."""
    try:
        realize, path = _tree.find_block(func, name)
    except KeyError:
        raise ScheduleError(
            primitive,
            f'no block named "{name}"',
            requires="the block exists in the function",
            hint=f"blocks are {_tree.names_of(_tree.block_names(func))}",
            locations=[name],
        ) from None
    if not path or realize is _tree.root_block(func):
        raise ScheduleError(
            primitive,
            f'block "{name}" is the root block',
            requires="a non-root block",
            locations=[name],
        )
    return realize, path


def block_of(state: ScheduleState, rv: BlockRV) -> tuple[BlockRealize, _tree.Path]:
    """The realize and path of the block handle ``rv``; ScheduleError when stale or the root."""
    name = state.block_name(rv)
    realize, path = _tree.find_block(state.func, name)
    if not path or realize is _tree.root_block(state.func):
        raise state.error(
            f'block "{name}" is the root block', requires="a non-root block", locations=[name]
        )
    return realize, path


def loop_of(state: ScheduleState, rv: LoopRV) -> tuple[For, _tree.Path]:
    """The For and path of the loop handle ``rv``; ScheduleError when stale or special."""
    return _tree.find_loop_path(state.func, state.loop_var(rv))


def get_loop(func: PrimFunc, loop: Var, primitive: str) -> tuple[For, _tree.Path]:
    """The loop with variable ``loop`` and its path; ScheduleError when missing."""
    try:
        return _tree.find_loop_path(func, loop)
    except KeyError:
        raise ScheduleError(
            primitive,
            f'no loop "{loop.name}" in the function',
            requires="the loop handle refers to a loop of this function",
            locations=[loop.name],
        ) from None


def is_param(func: PrimFunc, buf: Buffer) -> bool:
    """True when ``buf`` is one of the function's buffer parameters."""
    return any(p is buf for p in func.params)


def alloc_owner(func: PrimFunc, buf: Buffer) -> BlockRealize | None:
    """The realize of the block whose ``alloc_buffers`` holds ``buf``."""
    for node, _ in _tree.walk(func.body):
        if isinstance(node, BlockRealize) and any(b is buf for b in node.block.alloc_buffers):
            return node
    return None


def blocks_accessing(func: PrimFunc, buf: Buffer, *, write: bool) -> list[BlockRealize]:
    """Non-root realizes whose reads (``write=False``) or writes mention ``buf``."""
    root = _tree.root_block(func)
    out = []
    for node, _ in _tree.walk(func.body):
        if isinstance(node, BlockRealize) and node is not root:
            regions = node.block.writes if write else node.block.reads
            if any(r.buffer is buf for r in regions):
                out.append(node)
    return out


def fragment(stmt: Stmt, marks: Mapping[int, str] | None = None) -> str:
    """A short outline of ``stmt`` for error messages."""
    return _tree.outline(stmt, marks)


def is_ancestor(path: _tree.Path, stmt: Stmt) -> bool:
    """True when ``stmt`` (identity) lies on ``path``."""
    return any(p is stmt for p in path)


def var_dom(loops: Sequence[For]) -> dict[Var, Range]:
    """Domains of the loop variables of ``loops``."""
    return {lp.loop_var: Range(lp.min, lp.extent) for lp in loops}


def loops_between(path: _tree.Path, top: For) -> list[For]:
    """Loops on ``path`` strictly below ``top`` (outermost first), stopping at a block."""
    out: list[For] = []
    below = False
    for node in path:
        if node is top:
            below = True
            continue
        if below and isinstance(node, For):
            out.append(node)
        if below and isinstance(node, Block):
            out = []
    return out


# ------------------------------------------------------------------------------------------
# regions
def region_bounds(
    region: Sequence[Range], vmap: Mapping[Var, Expr], dom: Mapping[Var, Range]
) -> list[Bounds] | None:
    """Inclusive per-dimension bounds of ``region`` after substituting ``vmap`` and relaxing
    the variables of ``dom``; None when some bound cannot be derived."""
    ends: list[Expr] = []
    for r in region:
        ends.append(substitute(r.min, vmap))
        ends.append(substitute(Sub(Add(r.min, r.extent), IntImm(r.min.dtype, 1)), vmap))
    bounds = bound_indices(ends, dom)
    out: list[Bounds] = []
    for lo, hi in zip(bounds[::2], bounds[1::2], strict=True):
        if lo is None or hi is None:
            return None
        out.append((lo[0], hi[1]))
    return out


def union_bounds(a: Sequence[Bounds], b: Sequence[Bounds]) -> list[Bounds]:
    """Per-dimension hull of two bound lists."""
    return [(pick_min(x[0], y[0]), pick_max(x[1], y[1])) for x, y in zip(a, b, strict=False)]


def pick_min(a: Expr, b: Expr) -> Expr:
    """``min(a, b)``, resolved when the difference is a constant."""
    d = const_value(Sub(a, b))
    if d is not None:
        return a if d <= 0 else b
    return Min(a, b)


def pick_max(a: Expr, b: Expr) -> Expr:
    """``max(a, b)``, resolved when the difference is a constant."""
    d = const_value(Sub(a, b))
    if d is not None:
        return a if d >= 0 else b
    return Max(a, b)


def bounds_to_region(bounds: Sequence[Bounds]) -> tuple[Range, ...]:
    """Ranges ``[lo, hi + 1)`` from inclusive bounds."""
    return tuple(
        Range(simplify_index(lo), simplify_index(Add(Sub(hi, lo), IntImm(lo.dtype, 1))))
        for lo, hi in bounds
    )


def point_region(indices: Sequence[Expr]) -> tuple[Range, ...]:
    """A single-element region at ``indices``."""
    return tuple(Range(i, IntImm(i.dtype, 1)) for i in indices)


def direct_dims(region: Sequence[Range], iter_vars: Sequence[IterVar]) -> dict[int, int] | None:
    """Map ``iter var position -> buffer dim`` when every dimension of ``region`` is a single
    element at a distinct iterator or a constant; None otherwise."""
    pos = {id(iv.var): k for k, iv in enumerate(iter_vars)}
    out: dict[int, int] = {}
    for d, r in enumerate(region):
        if const_value(r.extent) != 1:
            return None
        m = simplify_index(r.min)
        if isinstance(m, Var) and id(m) in pos:
            if pos[id(m)] in out:
                return None
            out[pos[id(m)]] = d
        elif collect_vars(m):
            return None
    return out


def access_indices(stmt: Stmt | Expr, buf: Buffer) -> list[tuple[Expr, ...]]:
    """Index tuples of every load or store of ``buf`` under ``stmt``."""
    found: list[tuple[Expr, ...]] = []

    def fn(n: object) -> None:
        if isinstance(n, (BufferLoad, BufferStore)) and n.buffer is buf:
            found.append(n.indices)

    post_order_visit(stmt, fn)
    return found


# ------------------------------------------------------------------------------------------
# building
class BufferMutator(Mutator):
    """A Mutator rewriting the uses of some buffers: it leaves alone every statement that
    mentions none of their names (the names under a statement are remembered, so a rewrite
    of one buffer does not rebuild the whole function)."""

    def __init__(self, buffers: Sequence[Buffer]) -> None:
        super().__init__()
        self._names = frozenset(b.name for b in buffers)

    def visit(self, node: Any) -> Any:
        """``node`` itself when it is a statement that mentions none of the buffers."""
        if isinstance(node, Stmt) and self._names.isdisjoint(used_buffer_names(node)):
            return node
        return super().visit(node)


class BufferReplacer(BufferMutator):
    """Replace buffers by identity everywhere (loads, stores, regions, allocations)."""

    def __init__(self, mapping: Mapping[Buffer, Buffer]) -> None:
        super().__init__(list(mapping))
        for old, new in mapping.items():
            self.buffer_map[id(old)] = new


def replace_buffers(node: Stmt, mapping: Mapping[Buffer, Buffer]) -> Stmt:
    """``node`` with every buffer of ``mapping`` replaced."""
    out: Stmt = BufferReplacer(mapping).visit(node)
    return out


def copy_block(
    name: str, src: Buffer, dst: Buffer, region: Sequence[Range], names: Sequence[str]
) -> tuple[Block, list[Var]]:
    """``dst[v] = src[v]`` over ``region`` as a block with one spatial iterator per dim."""
    ivs = [
        IterVar(Var(n, r.min.dtype), Range(r.min, r.extent), IterKind.SPATIAL)
        for n, r in zip(names, region, strict=False)
    ]
    vs = [iv.var for iv in ivs]
    body = BufferStore(dst, BufferLoad(src, tuple(vs)), tuple(vs))
    block = Block(
        name,
        tuple(ivs),
        (BufferRegion(src, point_region(vs)),),
        (BufferRegion(dst, point_region(vs)),),
        body,
    )
    return block, vs


def nest_for(
    block: Block,
    ranges: Sequence[Range | None],
    loop_names: Sequence[str],
    *,
    preserve_unit_loops: bool = False,
    outer: Mapping[Var, Range] | None = None,
    prim: str = "compute_at",
) -> Stmt:
    """Realize ``block`` in fresh loops: iterator ``k`` runs over ``ranges[k]`` (None: its
    domain). Unit ranges bind directly unless ``preserve_unit_loops``; bindings that may leave
    the iterator's domain get a predicate. ``outer`` gives domains of enclosing loops; an
    extent varying with them runs to its largest value under a guard, an extent of function
    variables only (a symbolic shape ``n``) is the loop's extent as it is."""
    loops: list[tuple[Var, Expr]] = []
    values: list[Expr] = []
    extent_guards: list[Expr | None] = []
    outer = outer or {}
    for k, (iv, rng) in enumerate(zip(block.iter_vars, ranges, strict=False)):
        r = rng if rng is not None else iv.dom
        ext = simplify_index(r.extent)
        lv = Var(loop_names[k], iv.var.dtype)
        if any(v in outer for v in collect_vars(ext)):
            b = bound_index(ext, outer)
            if b is None or any(v in outer for v in collect_vars(b[1])):
                raise ScheduleError(
                    prim,
                    f'cannot bound the extent of iterator "{iv.var.name}"',
                    requires="region extents are bounded over the enclosing loops",
                )
            guard, ext = ext, b[1]
            # a loop bounded to one iteration is dropped: its guard is then ``0 < extent``
            unit = const_value(ext) == 1 and not preserve_unit_loops
            extent_guards.append(LT(IntImm(lv.dtype, 0) if unit else lv, guard))
        else:
            extent_guards.append(None)
        if const_value(ext) == 1 and not preserve_unit_loops:
            values.append(simplify_index(r.min))
        else:
            loops.append((lv, ext))
            values.append(simplify_index(Add(r.min, lv)))
    # every binding bounded over one domain: a binding uses only the loops made before it
    inner = {v: Range(IntImm(v.dtype, 0), e) for v, e in loops}
    bounds = bound_indices(values, {**outer, **inner})
    preds: list[Expr] = []
    for iv, value, b, g in zip(block.iter_vars, values, bounds, extent_guards, strict=False):
        if g is not None:
            preds.append(g)
        preds.extend(_domain_guard(value, iv, b))
    pred: Expr = const(True, "bool")
    for p in preds:
        pred = p if isinstance(pred, IntImm) else And(pred, p)
    stmt: Stmt = BlockRealize(tuple(values), pred, block)
    for lv, ext in reversed(loops):
        stmt = For(lv, IntImm(lv.dtype, 0), ext, ForKind.SERIAL, stmt)
    return stmt


def _domain_guard(value: Expr, iv: IterVar, b: Bounds | None) -> list[Expr]:
    """Conditions keeping ``value`` (bounded by ``b``) inside ``iv``'s domain unless provable."""
    lo, hi = iv.dom.min, simplify_index(Add(iv.dom.min, iv.dom.extent))
    out: list[Expr] = []
    if b is None or not _provably_le(lo, b[0]):
        out.append(GE(value, lo))
    if b is None or not _provably_le(Add(b[1], IntImm(hi.dtype, 1)), hi):
        out.append(LT(value, hi))
    return out


def _provably_le(a: Expr, b: Expr) -> bool:
    d = const_value(Sub(b, a))
    return d is not None and d >= 0


def insert_at(loop: For, stmt: Stmt, position: int) -> For:
    """``loop`` with ``stmt`` inserted as child number ``position`` of its body."""
    items = list(loop.body.stmts) if isinstance(loop.body, SeqStmt) else [loop.body]
    items.insert(position, stmt)
    return loop.update(body=SeqStmt(tuple(items)))


def body_items(loop: For) -> list[Stmt]:
    """The children of ``loop``'s body as a list (a SeqStmt's items, or the body itself)."""
    return list(loop.body.stmts) if isinstance(loop.body, SeqStmt) else [loop.body]


def contains(stmt: Stmt, target: Stmt) -> bool:
    """True when ``target`` (identity) is ``stmt`` or lies under it."""
    return any(n is target for n, _ in _tree.walk(stmt))


def fresh_var_names(func: PrimFunc, bases: Sequence[str]) -> list[str]:
    """Names not used by any variable of ``func`` (``ax0``, ``ax0_1``...)."""
    used = set(used_var_names(func.body))
    for p in func.params:
        used.add(p.name)
    out = []
    for base in bases:
        name, k = base, 1
        while name in used:
            name = f"{base}_{k}"
            k += 1
        used.add(name)
        out.append(name)
    return out


def fresh_buffer_name(func: PrimFunc, base: str) -> str:
    """A buffer name not used in ``func``."""
    used = {p.name for p in func.params} | used_buffer_names(func.body)
    name, k = base, 1
    while name in used:
        name = f"{base}_{k}"
        k += 1
    return name


def add_alloc(func: PrimFunc, buf: Buffer, body: Stmt) -> PrimFunc:
    """``func`` with ``body`` as its body and ``buf`` allocated at the root block."""
    if not isinstance(body, BlockRealize) or body.block.iter_vars:
        raise ScheduleError("cache", "the function has no root block")
    blk = body.block.update(alloc_buffers=(*body.block.alloc_buffers, buf))
    return func.update(body=body.update(block=blk))


def same_region(a: Sequence[Range], b: Sequence[Range]) -> bool:
    """True when both regions provably coincide."""
    return all(
        same_index(x.min, y.min) and same_index(x.extent, y.extent)
        for x, y in zip(a, b, strict=False)
    )


def rename_iters(block: Block, suffix: str = "") -> tuple[Block, dict[Var, Expr]]:
    """A copy of ``block`` with fresh iterator variables (same names + ``suffix``)."""
    vmap: dict[Var, Expr] = {}
    ivs = []
    for iv in block.iter_vars:
        nv = Var(iv.var.name + suffix, iv.var.dtype)
        vmap[iv.var] = nv
        ivs.append(iv.update(var=nv))
    new = substitute(block.update(iter_vars=tuple(ivs)), vmap)
    assert isinstance(new, Block)
    return new, vmap


ALIGN_KEY = "buffer_dim_align"


def prune_alignment(func: PrimFunc, dropped: Buffer | None = None) -> PrimFunc:
    """``func`` without ``storage_align`` entries that no longer fit their block.

    An entry ``(write_index, axis, factor, offset)`` is kept while the block's write at that
    index is a buffer allocated in the function with more than ``axis`` dimensions, and is not
    ``dropped`` (a buffer whose layout changed). Primitives that change what a block writes
    (``reverse_compute_inline``, ``cache_write``, ``reindex``) or a buffer's layout
    (``transform_layout``) call this so that lowering never sees a stale request.
    """
    allocated: set[int] = set()
    annotated: list[BlockRealize] = []
    for node, _ in _tree.walk(func.body):
        if isinstance(node, BlockRealize):
            allocated.update(id(b) for b in node.block.alloc_buffers)
            if ALIGN_KEY in node.block.annotations:
                annotated.append(node)
    mapping: dict[int, Stmt | None] = {}
    for r in annotated:
        blk = r.block
        entries = blk.annotations[ALIGN_KEY]
        assert isinstance(entries, tuple)
        kept = tuple(e for e in entries if _alignment_fits(blk, e, allocated, dropped))
        if len(kept) == len(entries):
            continue
        ann = (
            blk.annotations.with_item(ALIGN_KEY, kept)
            if kept
            else blk.annotations.without(ALIGN_KEY)
        )
        mapping[id(r)] = r.update(block=blk.update(annotations=ann))
    return _tree.replace_stmts(func, mapping) if mapping else func


def _alignment_fits(blk: Block, entry: object, allocated: set[int], dropped: Buffer | None) -> bool:
    if not (isinstance(entry, tuple) and len(entry) == 4):
        return False
    index, axis = entry[0], entry[1]
    if not (isinstance(index, int) and isinstance(axis, int) and 0 <= index < len(blk.writes)):
        return False
    buf = blk.writes[index].buffer
    return id(buf) in allocated and buf is not dropped and axis < buf.ndim
