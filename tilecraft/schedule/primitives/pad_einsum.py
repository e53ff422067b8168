"""pad_einsum: pad an einsum-like block's iteration space up to multiples of given factors.

An *einsum-like* block stores one buffer and indexes every dimension of every access (its
store, its loads, the init's store) with a single block iterator or an integer constant, as
``C[i, j] = C[i, j] + A[i, k] * B[k, j]`` does. Padding an iterator of extent ``e`` by ``p``
runs it over ``ceil(e / p) * p`` values; the buffers it indexes are staged through zero-filled
padded copies (new producer blocks before the block's nest), and the output through a padded
buffer copied back over the original range (a new consumer block after it). Padded spatial
iterations compute values nobody reads; padded reduction iterations add a product with a zero
factor, so the block must then be a sum of products. With inputs holding ``inf``/``NaN`` a
padded product ``inf * 0`` would be NaN, as with any zero padding.

``build_pad_einsum`` is pure; :func:`pad_einsum` is the traced, handle-level primitive.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from ...arith import Analyzer
from ...errors import ScheduleError
from ...ir import (
    LT,
    Add,
    And,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Cast,
    Expr,
    For,
    IntImm,
    IterKind,
    IterVar,
    Min,
    Mul,
    PrimFunc,
    Range,
    Select,
    Stmt,
    Var,
    const,
    post_order_visit,
)
from .. import _tree
from ..arguments import POSITIVE_INT, SeqOf
from ..instruction import primitive
from ..state import BlockRV, ScheduleState
from ._block_nest import owned_nest
from ._blockutil import (
    add_alloc,
    copy_block,
    fragment,
    fresh_buffer_name,
    fresh_var_names,
    get_block,
    nest_for,
    point_region,
    replace_buffers,
)
from ._cache_common import insert_after, top_level_child
from .index_map import same_index

PRIM = "pad_einsum"


@dataclass(frozen=True)
class _Pad:
    """One padded iterator: its original and padded extents."""

    extent: Expr
    padded: Expr


def _error(blk: Block, short: str, requires: str, hint: str = "") -> ScheduleError:
    return ScheduleError(
        PRIM, short, requires=requires, fragment=fragment(blk), hint=hint, locations=[blk.name]
    )


def check_padding(blk: Block, padding: object) -> list[int]:
    """``padding`` holds one positive int per block iterator."""
    n = len(blk.iter_vars)
    if isinstance(padding, Sequence) and not isinstance(padding, str) and len(padding) == n:
        values = list(padding)
        if all(isinstance(p, int) and not isinstance(p, bool) and p >= 1 for p in values):
            return [int(p) for p in values]
    raise ScheduleError(
        PRIM,
        f"argument 'padding': expected {n} positive ints (one per iterator of "
        f'"{blk.name}"), got {padding!r}',
        locations=[blk.name],
    )


def _accesses(blk: Block) -> list[tuple[Buffer, tuple[Expr, ...], bool]]:
    """``(buffer, indices, is_store)`` of every load and store in the block's body and init."""
    out: list[tuple[Buffer, tuple[Expr, ...], bool]] = []

    def fn(n: object) -> None:
        if isinstance(n, BufferLoad):
            out.append((n.buffer, n.indices, False))
        elif isinstance(n, BufferStore):
            out.append((n.buffer, n.indices, True))

    for part in (blk.init, blk.body):
        if part is not None:
            post_order_visit(part, fn)
    return out


def check_einsum(blk: Block) -> BufferStore:
    """The block's store; ScheduleError unless the block is einsum-like."""
    store = blk.body
    if not isinstance(store, BufferStore) or len(blk.writes) != 1:
        raise _error(
            blk,
            f'block "{blk.name}" is not a single buffer store',
            "the block body is one BufferStore and the block writes one buffer",
        )
    iters = {id(iv.var) for iv in blk.iter_vars}
    for buf, indices, is_store in _accesses(blk):
        for e in indices:
            if not (isinstance(e, IntImm) or (isinstance(e, Var) and id(e) in iters)):
                raise _error(
                    blk,
                    f'block "{blk.name}" indexes "{buf.name}" with "{e}"',
                    "every index of every access is a single block iterator or a constant",
                    hint="pad_einsum applies to einsum-like blocks (matmul, elementwise)",
                )
        if is_store and buf is not store.buffer:
            raise _error(blk, f'block "{blk.name}" stores two buffers', "one stored buffer")
        if not is_store and buf is store.buffer and indices != store.indices:
            same = len(indices) == len(store.indices) and all(
                a is b for a, b in zip(indices, store.indices, strict=True)
            )
            if not same:
                raise _error(
                    blk,
                    f'block "{blk.name}" reads "{buf.name}" away from where it stores it',
                    "the stored buffer is read only at the stored element",
                )
    return store


def padded_extents(blk: Block, padding: list[int]) -> dict[int, _Pad]:
    """The iterators whose extent grows (by variable identity); ScheduleError if none."""
    ana = Analyzer()
    out: dict[int, _Pad] = {}
    for iv, p in zip(blk.iter_vars, padding, strict=True):
        ext = iv.dom.extent
        if p == 1 or ana.can_prove_equal(ext % p, 0):
            continue
        out[id(iv.var)] = _Pad(ext, ana.simplify((ext + (p - 1)) // p * p))
    if not out:
        raise _error(
            blk,
            f'every iterator extent of "{blk.name}" is already a multiple of its padding',
            "padding changes at least one iterator extent",
        )
    return out


def _factors(e: Expr) -> list[Expr]:
    if isinstance(e, Mul):
        return _factors(e.a) + _factors(e.b)
    if isinstance(e, Cast):
        return _factors(e.value)
    return [e]


def check_reduction(blk: Block, store: BufferStore, pads: dict[int, _Pad]) -> None:
    """Output indices use every padded spatial iterator and no reduction iterator; padded
    reduction iterators need ``C = C + a * b * ...`` (with an init) where each of them
    indexes a loaded factor (zero-filled where padded)."""
    in_store = {id(e) for e in store.indices if isinstance(e, Var)}
    for iv in blk.iter_vars:
        key = id(iv.var)
        if iv.kind is IterKind.REDUCE and key in in_store:
            raise _error(blk, f'reduction iterator "{iv.var.name}" indexes the output', "")
        if iv.kind is IterKind.SPATIAL and key in pads and key not in in_store:
            raise _error(
                blk,
                f'padded spatial iterator "{iv.var.name}" does not index the output',
                "each padded spatial iterator indexes the stored buffer",
            )
        if iv.kind is IterKind.OPAQUE:
            raise _error(blk, f'iterator "{iv.var.name}" is opaque', "no opaque iterator")
    reduce_pads = [
        iv.var for iv in blk.iter_vars if iv.kind is IterKind.REDUCE and id(iv.var) in pads
    ]
    if not reduce_pads:
        return
    value = store.value
    rhs: Expr | None = None
    if isinstance(value, Add) and blk.init is not None:
        for acc, other in ((value.a, value.b), (value.b, value.a)):
            if isinstance(acc, BufferLoad) and acc.buffer is store.buffer:
                rhs = other
    for v in reduce_pads:
        factors = _factors(rhs) if rhs is not None else []
        if not any(
            isinstance(f, BufferLoad)
            and f.buffer is not store.buffer
            and any(i is v for i in f.indices)
            for f in factors
        ):
            raise _error(
                blk,
                f'padding reduction iterator "{v.name}" of "{blk.name}" would change its sum',
                "a padded reduction iterator needs an init and C = C + (product with a "
                "factor loaded at that iterator)",
                hint="pad only the spatial iterators (padding 1 for the reduction)",
            )


_Plan = dict[int, tuple[Buffer, list[_Pad | None]]]


def plan_buffers(blk: Block, pads: dict[int, _Pad]) -> _Plan:
    """For each buffer indexed by a padded iterator: per dimension the padding it gets."""
    dims: dict[int, tuple[Buffer, list[list[object]]]] = {}
    for buf, indices, _ in _accesses(blk):
        entry = dims.setdefault(id(buf), (buf, [[] for _ in buf.shape]))
        for d, e in enumerate(indices):
            entry[1][d].append(pads.get(id(e), e))
    out: dict[int, tuple[Buffer, list[_Pad | None]]] = {}
    for key, (buf, per_dim) in dims.items():
        plan: list[_Pad | None] = []
        for d, uses in enumerate(per_dim):
            padded = [u for u in uses if isinstance(u, _Pad)]
            if not padded:
                plan.append(None)
                continue
            first = padded[0]
            if len(padded) != len(uses) or not all(
                same_index(u.extent, first.extent) and same_index(u.padded, first.padded)
                for u in padded
            ):
                raise _error(
                    blk,
                    f'dimension {d} of "{buf.name}" is indexed by a padded iterator and by '
                    "an index padded otherwise",
                    "every access pads a buffer dimension the same way",
                )
            plan.append(first)
        if any(p is not None for p in plan):
            out[key] = (buf, plan)
    return out


class _Names:
    """Fresh block and buffer names, unique among the function's and the ones handed out."""

    def __init__(self, func: PrimFunc) -> None:
        self.func = func
        self.blocks: set[str] = set()
        self.buffers: set[str] = set()

    def block(self, base: str) -> str:
        name, k = _tree.fresh_name(self.func, base), 1
        while name in self.blocks:
            name = _tree.fresh_name(self.func, f"{base}_{k}")
            k += 1
        self.blocks.add(name)
        return name

    def buffer(self, base: str) -> str:
        name, k = fresh_buffer_name(self.func, base), 1
        while name in self.buffers:
            name = fresh_buffer_name(self.func, f"{base}_{k}")
            k += 1
        self.buffers.add(name)
        return name


def _pad_producer(
    func: PrimFunc, names: _Names, src: Buffer, dst: Buffer, plan: list[_Pad | None]
) -> Stmt:
    """``dst[v] = src[v] if v is inside the original extents else 0`` over ``dst``."""
    dt = dst.shape[0].dtype
    vs = [Var(n, dt) for n in fresh_var_names(func, [f"v{k}" for k in range(len(plan))])]
    cond: Expr | None = None
    ana = Analyzer()
    for v, p, size in zip(vs, plan, src.shape, strict=True):
        if p is not None:  # inside the iterator's extent and the source (the block may
            # guard a read of a source shorter than its iterator, as a padding block does)
            inside = p.extent if ana.can_prove(size >= p.extent) else Min(p.extent, size)
            c = LT(v, ana.simplify(inside))
            cond = c if cond is None else And(cond, c)
    assert cond is not None
    value = Select(cond, BufferLoad(src, tuple(vs)), const(0, src.dtype))
    ivs = tuple(
        IterVar(v, Range(IntImm(dt, 0), e), IterKind.SPATIAL)
        for v, e in zip(vs, dst.shape, strict=True)
    )
    blk = Block(
        names.block(dst.name),
        ivs,
        (BufferRegion(src, point_region(vs)),),
        (BufferRegion(dst, point_region(vs)),),
        BufferStore(dst, value, tuple(vs)),
    )
    loops = fresh_var_names(func, [f"ax{k}" for k in range(len(plan))])
    return nest_for(blk, [None] * len(plan), loops, prim=PRIM)


def _unpad_consumer(
    func: PrimFunc, names: _Names, store: BufferStore, padded: Buffer, extents: dict[int, Expr]
) -> Stmt:
    """``C[v] = C_pad[v]`` over the region the block stores (original iterator extents)."""
    region = [
        Range(e, IntImm(e.dtype, 1))
        if isinstance(e, IntImm)
        else Range(IntImm(e.dtype, 0), extents[id(e)])
        for e in store.indices
    ]
    ivn = fresh_var_names(func, [f"v{k}" for k in range(len(region))])
    blk, _ = copy_block(
        names.block(f"{store.buffer.name}_unpad"), padded, store.buffer, region, ivn
    )
    loops = fresh_var_names(func, [f"ax{k}" for k in range(len(region))])
    return nest_for(blk, [None] * len(region), loops, prim=PRIM)


def _stage_buffers(
    func: PrimFunc, names: _Names, blk: Block, store: BufferStore, plan: _Plan
) -> tuple[dict[Buffer, Buffer], list[Stmt]]:
    """The padded buffer of each planned buffer and the blocks filling the padded copies
    (the output needs one only when the block accumulates into it without an init)."""
    out = store.buffer
    reads_out = any(r.buffer is out for r in blk.reads) and blk.init is None
    mapping: dict[Buffer, Buffer] = {}
    producers: list[Stmt] = []
    for buf, dims in plan.values():
        shape = tuple(p.padded if p else s for p, s in zip(dims, buf.shape, strict=True))
        new = buf.update(name=names.buffer(f"{buf.name}_pad"), shape=shape)
        mapping[buf] = new
        if buf is not out or reads_out:
            producers.append(_pad_producer(func, names, buf, new, dims))
    return mapping, producers


def _padded_nest(
    realize: BlockRealize, loops: list[For], pads: dict[int, _Pad], mapping: dict[Buffer, Buffer]
) -> Stmt:
    """The block's nest over the padded extents, accessing the padded buffers."""
    blk = realize.block
    new_blk = replace_buffers(_with_padded_iters(blk, pads), mapping)
    assert isinstance(new_blk, Block)
    nest: Stmt = realize.update(block=new_blk)
    by_loop = {
        id(v): pads.get(id(iv.var))
        for iv, v in zip(blk.iter_vars, realize.iter_values, strict=True)
    }
    for lp in reversed(loops):
        p = by_loop[id(lp.loop_var)]
        nest = lp.update(extent=p.padded if p else lp.extent, body=nest)
    return nest


def build_pad_einsum(func: PrimFunc, block: str, padding: Sequence[int]) -> PrimFunc:
    """Pad the iteration space of einsum-like ``block`` (see :func:`pad_einsum`)."""
    realize, path = get_block(func, block, PRIM)
    blk = realize.block
    pads_list = check_padding(blk, padding)
    loops = owned_nest(PRIM, realize, path)
    store = check_einsum(blk)
    pads = padded_extents(blk, pads_list)
    check_reduction(blk, store, pads)
    plan = plan_buffers(blk, pads)
    if top_level_child(func, realize)[0] is not loops[0]:
        raise _error(
            blk,
            f'the loops of "{blk.name}" are nested in other statements',
            "the block's outermost loop is a statement of its scope block",
        )
    names = _Names(func)
    mapping, producers = _stage_buffers(func, names, blk, store, plan)
    consumer = None
    if store.buffer in mapping:
        extents = {id(iv.var): iv.dom.extent for iv in blk.iter_vars}
        consumer = _unpad_consumer(func, names, store, mapping[store.buffer], extents)
    func = _tree.replace_stmt(func, loops[0], _padded_nest(realize, loops, pads, mapping))
    for stmt in producers:
        top, scope = top_level_child(func, _tree.find_block(func, block)[0])
        func = insert_after(func, top, scope, stmt, before=True)
    if consumer is not None:
        top, scope = top_level_child(func, _tree.find_block(func, block)[0])
        func = insert_after(func, top, scope, consumer)
    for new in mapping.values():
        func = add_alloc(func, new, func.body)
    return func


def _with_padded_iters(blk: Block, pads: dict[int, _Pad]) -> Block:
    ivs = tuple(
        iv.update(dom=Range(iv.dom.min, pads[id(iv.var)].padded)) if id(iv.var) in pads else iv
        for iv in blk.iter_vars
    )
    return blk.update(iter_vars=ivs)


@primitive("pad_einsum", inputs=("block",))
def pad_einsum(
    state: ScheduleState, block: BlockRV, padding: Annotated[Sequence[int], SeqOf(POSITIVE_INT)]
) -> None:
    """Pad the iteration space of einsum-like ``block`` up to multiples of ``padding``.

    Requires: (1) ``padding`` holds one positive int per block iterator and changes at least
    one extent; (2) the block owns its loop nest (one serial loop per iterator, perfectly
    nested, directly under the scope, binding its iterator directly; no predicate);
    (3) einsum-like: one stored buffer, every index a single iterator or a constant, the
    stored buffer read only at the stored element; (4) each padded spatial iterator indexes
    the output and no reduction iterator does; (5) a padded reduction iterator needs an init
    and ``C = C + a * b ...`` with a factor loaded at that iterator; (6) every access pads a
    buffer dimension the same way.
    Rewrite: ``for i, j, k in T.grid(127, 127, 127): C[i, j] += A[i, k] * B[k, j]`` --
    padding [16, 16, 16] --> ``A_pad``/``B_pad`` blocks (zero-filled 128x128 copies),
    ``for i, j, k in T.grid(128, 128, 128): C_pad[i, j] += A_pad[i, k] * B_pad[k, j]``,
    then ``C_unpad``: ``C[i, j] = C_pad[i, j]`` over 127x127.
    """
    name = state.block_name(block)
    state.commit(build_pad_einsum(state.func, name, padding))


__all__ = ["build_pad_einsum", "pad_einsum"]
