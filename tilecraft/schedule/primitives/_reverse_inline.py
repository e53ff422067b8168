"""Helpers of ``reverse_compute_inline``: the complete-producer check, the load replacement,
and the predicate a producer gets when its consumer reads only a box of its buffer."""

from __future__ import annotations

from collections.abc import Sequence

from ...ir import (
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Expr,
    IntImm,
    IterKind,
    Mutator,
    PrimFunc,
    Var,
    substitute,
)
from ..state import ScheduleState
from ._blockutil import blocks_accessing, direct_dims, fragment, point_region
from .index_map import const_value


def cover_predicate(
    prod: BlockRealize,
    pstore: BufferStore,
    extents: Sequence[Expr],
    load_indices: Sequence[Expr],
    cvars: Sequence[Var],
) -> Expr:
    """The producer's predicate once its store writes the consumer's output: its own, and
    ``index < extent`` on each dimension the consumer reads only part of (an unpad block
    reading ``C_pad[v0, v1]`` for ``v0 < 100`` of 128)."""
    vmap = {iv.var: val for iv, val in zip(prod.block.iter_vars, prod.iter_values, strict=True)}
    pred = prod.predicate
    for dim, (index, shape) in enumerate(zip(load_indices, pstore.buffer.shape, strict=True)):
        extent = extents[[id(v) for v in cvars].index(id(index))]
        if const_value(shape - extent) == 0:
            continue
        cond = substitute(pstore.indices[dim], vmap) < extent
        pred = cond if isinstance(pred, IntImm) and pred.value == 1 else pred & cond
    return pred


def check_complete_producer(
    state: ScheduleState, func: PrimFunc, prod: BlockRealize, buf: Buffer
) -> BufferStore:
    """The single producer of ``buf`` stores it at its iterators, covering its shape."""
    writers = blocks_accessing(func, buf, write=True)
    blk = prod.block
    store = blk.body
    ok = (
        len(writers) == 1
        and isinstance(store, BufferStore)
        and store.buffer is buf
        and blk.init is None
        and all(iv.kind is IterKind.SPATIAL for iv in blk.iter_vars)
        and direct_dims(point_region(store.indices), blk.iter_vars) is not None
        and isinstance(prod.predicate, IntImm)
        and all(const_value(iv.dom.min) == 0 for iv in blk.iter_vars)
        and sorted(const_value(iv.dom.extent) or -1 for iv in blk.iter_vars)
        == sorted(const_value(s) or -2 for s in buf.shape)
    )
    if not ok:
        raise state.error(
            f'the producer "{blk.name}" of "{buf.name}" is not a single elementwise store',
            requires="the buffer has one writer, a single store at its spatial iterators",
            fragment=fragment(prod),
            hint="reverse_compute_inline needs a complete producer",
            locations=[blk.name],
        )
    assert isinstance(store, BufferStore)
    return store


class ReplaceLoad(Mutator):
    """Replace one specific load (identity) by an expression."""

    def __init__(self, load: BufferLoad, value: Expr) -> None:
        super().__init__()
        self.load = load
        self.value = value

    def visit_BufferLoad(self, load: BufferLoad) -> Expr:  # noqa: N802
        if load is self.load:
            return self.value
        out: Expr = self.generic_visit(load)
        return out
