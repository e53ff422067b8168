"""Compute-location primitives: compute_at, reverse_compute_at, compute_inline,
reverse_compute_inline.

Each primitive takes the schedule state and handles, checks every requirement first
(``check_*`` raise :class:`~tilecraft.errors.ScheduleError` naming the primitive), builds the
new function with pure helpers (the input is never changed; the variables of every loop not
touched are kept) and commits it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from ...errors import ScheduleError
from ...ir import (
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Expr,
    IntImm,
    IterKind,
    Mutator,
    PrimFunc,
    Range,
    Stmt,
    Var,
    post_order_visit,
    substitute,
)
from .. import _tree
from ..arguments import LOCATION
from ..instruction import primitive
from ..state import INLINE, ROOT, BlockRV, LoopRV, ScheduleState
from ._blockutil import (
    access_indices,
    alloc_owner,
    block_of,
    blocks_accessing,
    bounds_to_region,
    fragment,
    is_param,
    point_region,
    prune_alignment,
    region_bounds,
    same_region,
    union_bounds,
)
from ._compute_at_common import check_loop_not_above as check_loop_not_above
from ._compute_at_common import check_position as check_position
from ._compute_at_common import check_related_under_loop as check_related_under_loop
from ._compute_at_common import check_rerunnable as check_rerunnable
from ._compute_at_common import check_same_scope as check_same_scope
from ._compute_at_common import check_single_intermediate_output as check_single_intermediate_output
from ._compute_at_common import move_block
from ._reverse_inline import ReplaceLoad as _ReplaceLoad
from ._reverse_inline import check_complete_producer, cover_predicate
from .index_map import const_value, simplify_index

# ------------------------------------------------------------------------------------------
# compute_at / reverse_compute_at


@primitive("compute_at", inputs=("block", "loop"))
def compute_at(
    state: ScheduleState,
    block: BlockRV,
    loop: Annotated[LoopRV, LOCATION],
    preserve_unit_loops: bool = False,
    index: int = -1,
) -> None:
    """Move producer ``block`` under ``loop`` of its consumers, computing only what they need.

    Requires: (1) the block is not the root and writes exactly one buffer, an intermediate
    (not a parameter) written by no other block; (2) the loop is not above the block and both
    share a scope; (3) the block has consumers and every one lies under the loop; (4) the
    block writes the buffer at its iterators (``B[vi, vj] = ...``); (5) the consumers' read
    regions under the loop can be bounded; (6) ``index`` (-1: just before the first consumer)
    is after every child of the loop that writes a buffer the block reads and not after the
    first consumer; (7) the block has an init or reads no buffer it writes.

    Rewrite::

        for i, j: B[i, j] = f(A[i, j])          for i:
        for i, j: C[i, j] = g(B[i, j])   ->        for ax1: B[i, ax1] = f(A[i, ax1])
                                                   for j: C[i, j] = g(B[i, j])

    A root location handle (from ``sample_compute_location``) leaves the block where it is;
    an inline handle inlines it (``compute_inline``).
    """
    state.block_name(block)
    if loop.special == ROOT:
        return
    if loop.special == INLINE:
        compute_inline(state, block)
        return
    state.commit(move_block(state, block, loop, preserve_unit_loops, index, reverse=False))


@primitive("reverse_compute_at", inputs=("block", "loop"))
def reverse_compute_at(
    state: ScheduleState,
    block: BlockRV,
    loop: Annotated[LoopRV, LOCATION],
    preserve_unit_loops: bool = False,
    index: int = -1,
) -> None:
    """Move consumer ``block`` under ``loop`` of its producers, consuming what they produced.

    Requires: (1) the block is not the root; (2) the loop is not above the block and both
    share a scope; (3) the block has producers in its scope and every one lies under the
    loop; (4) the block reads a produced buffer at its iterators (``C[vi, vj]``); (5) the
    producers' write regions under the loop can be bounded; (6) ``index`` (-1: right after the
    last producer) is after every producer child and before any child reading what the block
    writes; (7) the block has an init or reads no buffer it writes (it may run again on an
    element covered by two iterations' regions); (8) no producer under the loop has a
    reduction carried by the loop or a loop above it; (9) the block reads only elements the
    producers write in the same iteration (a reduce iterator over the produced buffer needs
    its whole range produced). Predicate conditions shared by the producers that use no loop
    below the target loop are added to the moved block's predicate.

    Rewrite::

        for i, j: B[i, j] = f(A[i, j])          for i:
        for i, j: C[i, j] = g(B[i, j])   ->        for j: B[i, j] = f(A[i, j])
                                                   for ax1: C[i, ax1] = g(B[i, ax1])

    A root location handle leaves the block where it is; an inline handle inlines it
    (``reverse_compute_inline``).
    """
    state.block_name(block)
    if loop.special == ROOT:
        return
    if loop.special == INLINE:
        reverse_compute_inline(state, block)
        return
    state.commit(move_block(state, block, loop, preserve_unit_loops, index, reverse=True))


# ------------------------------------------------------------------------------------------
# compute_inline


@primitive("compute_inline", inputs=("block",))
def compute_inline(state: ScheduleState, block: BlockRV) -> None:
    """Inline the elementwise producer ``block`` into every consumer and remove it.

    Requires: (1) the block is not the root; (2) its body is one store ``B[v0, v1, ...] =
    f(...)`` at its iterators, all spatial, with no init and a true predicate; (3) it is the
    only writer of ``B``, ``B`` is allocated in the function (not a parameter) and ``f`` does
    not read ``B``.

    Rewrite::

        B[vi, vj] = A[vi, vj] + 1.0                   (removed)
        C[vi, vj] = B[vi, vj] * 2.0      ->   C[vi, vj] = (A[vi, vj] + 1.0) * 2.0
    """
    realize, _ = block_of(state, block)
    store = check_inlinable_producer(state, state.func, realize)
    state.commit(inline_producer(state.func, realize, store))


def inline_producer(func: PrimFunc, realize: BlockRealize, store: BufferStore) -> PrimFunc:
    """``func`` with the checked producer ``realize`` (body ``store``) inlined and removed."""
    blk = realize.block
    buf = store.buffer
    inliner = _Inliner(store, blk)
    mapping: dict[int, Stmt | None] = {id(realize): None}
    # rewrite the outermost consumers; those nested in them (a blockized consumer's inner
    # block) are rewritten as part of them
    consumers = {id(r) for r in blocks_accessing(func, buf, write=False)}
    for node, path in _tree.walk(func.body):
        if id(node) in consumers and not any(id(p) in consumers for p in path):
            mapping[id(node)] = inliner.visit(node)
    out = _tree.replace_stmts(func, mapping)
    return _drop_alloc(out, buf)


def check_inlinable_producer(
    state: ScheduleState, func: PrimFunc, realize: BlockRealize
) -> BufferStore:
    """The block is a single spatial store at its iterators into an intermediate buffer."""
    blk = realize.block
    fail = _block_failure(state, realize)
    store = _single_spatial_store(fail, blk, "inline only elementwise producers")
    ivars = [iv.var for iv in blk.iter_vars]
    idx = [simplify_index(i) for i in store.indices]
    if (
        len(idx) != len(ivars)
        or not all(isinstance(i, Var) for i in idx)
        or {id(i) for i in idx} != {id(v) for v in ivars}
    ):
        raise fail(
            "does not store at its iterators",
            "the store indices are the block iterators, each exactly once",
        )
    if not (isinstance(realize.predicate, IntImm) and realize.predicate.value == 1):
        raise fail("has a predicate", "the block realize has no predicate")
    buf = store.buffer
    if is_param(func, buf):
        raise fail(
            f'writes the function output "{buf.name}"',
            "the stored buffer is allocated in the function (not a parameter)",
            "use reverse_compute_inline on the output's producer instead",
        )
    writers = [r for r in blocks_accessing(func, buf, write=True) if r is not realize]
    if writers:
        raise fail(f'is not the only writer of "{buf.name}"', "the block is the only writer")
    if access_indices(store.value, buf):
        raise fail(f'reads its own output "{buf.name}"', "the stored value does not read it")
    return store


_Failure = Callable[..., ScheduleError]


def _block_failure(state: ScheduleState, realize: BlockRealize) -> _Failure:
    """A builder of errors about ``realize``'s block: ``fail(short, requires, hint="")``."""
    blk = realize.block
    frag = fragment(realize)

    def fail(short: str, requires: str, hint: str = "") -> ScheduleError:
        return state.error(
            f'block "{blk.name}" {short}',
            requires=requires,
            fragment=frag,
            hint=hint,
            locations=[blk.name],
        )

    return fail


def _single_spatial_store(fail: _Failure, blk: Block, reduction_hint: str = "") -> BufferStore:
    """The block's body, which must be one store with no init and only spatial iterators."""
    store = blk.body
    if not isinstance(store, BufferStore) or blk.init is not None:
        raise fail("is not a single store", "the block body is one BufferStore with no init")
    if any(iv.kind is not IterKind.SPATIAL for iv in blk.iter_vars):
        raise fail("has reduction iterators", "every block iterator is spatial", reduction_hint)
    return store


class _Inliner(Mutator):
    """Replace loads of the producer's buffer by its value at the loaded indices."""

    def __init__(self, store: BufferStore, blk: Block) -> None:
        super().__init__()
        self.store = store
        self.pos = {id(v): k for k, v in enumerate(simplify_index(i) for i in store.indices)}
        self.ivars = [iv.var for iv in blk.iter_vars]
        self.producer = blk

    def visit_Block(self, block: Block) -> Block:  # noqa: N802
        """A consumer block (or one nested in it) reads what the producer reads instead."""
        new = self.generic_visit(block.update(reads=(), writes=()))
        assert isinstance(new, Block)
        buf = self.store.buffer
        reads = block.reads
        if any(r.buffer is buf for r in reads):
            reads = _inlined_reads(block, buf, self.producer, self.store)
        return new.update(reads=reads, writes=block.writes)

    def visit_BufferLoad(self, load: BufferLoad) -> Expr:  # noqa: N802
        load = self.generic_visit(load)
        if load.buffer is not self.store.buffer:
            return load
        vmap = {v: load.indices[self.pos[id(v)]] for v in self.ivars}
        out: Expr = substitute(self.store.value, vmap)
        return out


def _inlined_reads(
    consumer: Block, buf: Buffer, producer: Block, store: BufferStore
) -> tuple[BufferRegion, ...]:
    """The consumer's reads with ``buf``'s region replaced by the producer's reads."""
    reads: list[BufferRegion] = []
    for reg in consumer.reads:
        if reg.buffer is not buf:
            reads.append(reg)
            continue
        pos = {id(simplify_index(i)): k for k, i in enumerate(store.indices)}
        dom = {iv.var: reg.region[pos[id(iv.var)]] for iv in producer.iter_vars}
        for preg in producer.reads:
            reads = _merge_region(reads, _read_through(preg, dom))
    return tuple(reads)


def _read_through(preg: BufferRegion, dom: dict[Var, Range]) -> BufferRegion:
    """What ``preg`` (a producer read, over the producer's iterators) covers when those
    iterators range over ``dom`` (the consumer's region of the inlined buffer).

    Bounded exactly when the analysis can; a point region of the consumer substitutes its
    indices; otherwise the whole buffer (never the producer's own iterators, which are not
    defined in the consumer).
    """
    b = region_bounds(preg.region, {}, dom)
    if b:
        return BufferRegion(preg.buffer, bounds_to_region(b))
    if all(const_value(r.extent) == 1 for r in dom.values()):
        vmap = {v: r.min for v, r in dom.items()}
        return BufferRegion(preg.buffer, tuple(substitute(r, vmap) for r in preg.region))
    return BufferRegion.full(preg.buffer)


def _merge_region(reads: list[BufferRegion], new: BufferRegion) -> list[BufferRegion]:
    for k, reg in enumerate(reads):
        if reg.buffer is new.buffer:
            if same_region(reg.region, new.region):
                return reads
            a = [(r.min, simplify_index(r.min + r.extent - 1)) for r in reg.region]
            b = [(r.min, simplify_index(r.min + r.extent - 1)) for r in new.region]
            merged = BufferRegion(reg.buffer, bounds_to_region(union_bounds(a, b)))
            return [*reads[:k], merged, *reads[k + 1 :]]
    return [*reads, new]


def _drop_alloc(func: PrimFunc, buf: Buffer) -> PrimFunc:
    """Remove ``buf`` from the ``alloc_buffers`` of the block that allocates it."""
    owner = alloc_owner(func, buf)
    if owner is None:
        return func
    blk = owner.block.update(
        alloc_buffers=tuple(b for b in owner.block.alloc_buffers if b is not buf)
    )
    return _tree.replace_stmt(func, owner, owner.update(block=blk))


# ------------------------------------------------------------------------------------------
# reverse_compute_inline


@primitive("reverse_compute_inline", inputs=("block",))
def reverse_compute_inline(state: ScheduleState, block: BlockRV) -> None:
    """Fold consumer ``block`` (``D[f(v)] = g(C[v])``) into the single producer of ``C``.

    Requires: (1) the block is not the root; its body is one store with no init, all
    iterators spatial, a true predicate, and it reads ``C`` once, at its iterators
    (``C[v0, v1, ...]``, each exactly once), whose domains start at 0 and fit in ``C``'s shape
    (a smaller box, as an unpad block reads, becomes the producer's predicate); (2) ``C`` is an
    intermediate buffer with exactly one writer (the producer) and one reader (the block);
    (3) the producer is a single store at its iterators (no init), covering ``C``.

    Rewrite::

        C[vi, vj] = A[vi, vj] * 2.0                      D[vj, vi] = A[vi, vj] * 2.0 + 1.0
        D[vj, vi] = C[vi, vj] + 1.0      ->    (consumer removed)
    """
    func = state.func
    realize, _ = block_of(state, block)
    store, load = check_inlinable_consumer(state, func, realize)
    prod = blocks_accessing(func, load.buffer, write=True)[0]
    pstore = check_complete_producer(state, func, prod, load.buffer)
    state.commit(inline_consumer(func, realize, store, load, prod, pstore))


def inline_consumer(
    func: PrimFunc,
    realize: BlockRealize,
    store: BufferStore,
    load: BufferLoad,
    prod: BlockRealize,
    pstore: BufferStore,
) -> PrimFunc:
    """``func`` with the checked consumer ``realize`` folded into its producer ``prod``."""
    buf = load.buffer
    cvars = [iv.var for iv in realize.block.iter_vars]
    vmap = {
        v: pstore.indices[[id(simplify_index(i)) for i in load.indices].index(id(v))] for v in cvars
    }
    value = _ReplaceLoad(load, pstore.value).visit(store.value)
    new_store = BufferStore(
        store.buffer,
        substitute(value, vmap),
        tuple(simplify_index(substitute(i, vmap)) for i in store.indices),
    )
    pblk = prod.block
    reads = list(pblk.reads)
    for reg in realize.block.reads:
        if reg.buffer is not buf:
            reads = _merge_region(reads, substitute(reg, vmap))
    new_blk = pblk.update(
        body=new_store,
        reads=tuple(reads),
        writes=(BufferRegion(store.buffer, point_region(new_store.indices)),),
    )
    guard = cover_predicate(prod, pstore, [iv.dom.extent for iv in realize.block.iter_vars],
                            [simplify_index(i) for i in load.indices], cvars)  # fmt: skip
    new_prod = prod.update(block=new_blk, predicate=guard)
    out = _tree.replace_stmts(func, {id(realize): None, id(prod): new_prod})
    return prune_alignment(_drop_alloc(out, buf))


def check_inlinable_consumer(
    state: ScheduleState, func: PrimFunc, realize: BlockRealize
) -> tuple[BufferStore, BufferLoad]:
    """The block is one spatial store reading an intermediate buffer once at its iterators."""
    blk = realize.block
    fail = _block_failure(state, realize)
    store = _single_spatial_store(fail, blk)
    if not (isinstance(realize.predicate, IntImm) and realize.predicate.value == 1):
        raise fail("has a predicate", "the block realize has no predicate")
    loads: list[BufferLoad] = []
    candidates = [
        r.buffer
        for r in blk.reads
        if not is_param(func, r.buffer) and blocks_accessing(func, r.buffer, write=True)
    ]
    if len(candidates) != 1:
        raise fail(
            f"reads {len(candidates)} produced intermediate buffers",
            "the block reads exactly one buffer produced in the function",
        )
    buf = candidates[0]

    def fn(n: object) -> None:
        if isinstance(n, BufferLoad) and n.buffer is buf:
            loads.append(n)

    post_order_visit(store.value, fn)
    ivars = [iv.var for iv in blk.iter_vars]
    if len(loads) != 1:
        raise fail(f'reads "{buf.name}" {len(loads)} times', "the block reads it exactly once")
    idx = [simplify_index(i) for i in loads[0].indices]
    if (
        not all(isinstance(i, Var) for i in idx)
        or sorted(id(i) for i in idx) != sorted(id(v) for v in ivars)
        or len(idx) != len(ivars)
    ):
        raise fail(
            f'does not read "{buf.name}" at its iterators',
            "the load indices are the block iterators, each exactly once",
        )
    for i, extent in zip(idx, buf.shape, strict=False):
        iv = next(v for v in blk.iter_vars if v.var is i)
        spare = const_value(extent - iv.dom.extent)
        if const_value(iv.dom.min) != 0 or spare is None or spare < 0:
            raise fail(
                f'does not read within "{buf.name}" from its origin',
                "the iterator domains start at 0 and fit in the buffer's shape (a smaller "
                "box, e.g. an unpad block, guards the producer)",
            )
    writers = blocks_accessing(func, buf, write=True)
    readers = [
        r
        for r in blocks_accessing(func, buf, write=False)
        if r is not realize and all(r is not w for w in writers)
    ]
    if readers:
        raise fail(
            f'is not the only reader of "{buf.name}"',
            "the block is the only consumer of the buffer",
        )
    return store, loads[0]
