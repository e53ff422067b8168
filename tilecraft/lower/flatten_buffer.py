"""Flatten multi-dimensional buffers to one dimension (row-major).

Before: blocks are gone (:class:`~tilecraft.lower.ConvertBlocksToLoops`); buffers have any rank,
with constant or symbolic extents.
After:  every buffer — parameters and allocations — has rank 1 and extent the product of its
old extents (a rank-0 buffer gets extent 1); each access ``B[i, j, k]`` on a buffer of shape
``(n0, n1, n2)`` becomes ``B[(i * n1 + j) * n2 + k]``. Buffer identity is kept per buffer.
"""

from __future__ import annotations

from ..errors import LowerError
from ..ir import (
    Block,
    Buffer,
    BufferLoad,
    BufferStore,
    Expr,
    IntImm,
    Mutator,
    PrimFunc,
    as_expr,
    cast,
)
from .base import FunctionPass


def _product(shape: tuple[Expr, ...]) -> Expr:
    if not shape:
        return as_expr(1)
    total: Expr = shape[0]
    for s in shape[1:]:
        if isinstance(total, IntImm) and isinstance(s, IntImm):
            total = IntImm(total.dtype, total.value * s.value)
        else:
            total = total * cast(s, total.dtype)
    return total


def linear_index(shape: tuple[Expr, ...], indices: tuple[Expr, ...]) -> Expr:
    """The row-major offset of ``indices`` in a buffer of ``shape``."""
    if not indices:
        return as_expr(0)
    offset = indices[0]
    for extent, idx in zip(shape[1:], indices[1:], strict=True):
        dt = offset.dtype if offset.dtype.bits >= idx.dtype.bits else idx.dtype
        offset = cast(offset, dt) * cast(extent, dt) + cast(idx, dt)
    return offset


class _Flattener(Mutator):
    def visit_Buffer(self, buf: Buffer) -> Buffer:  # noqa: N802
        done = self.buffer_map.get(id(buf))
        if done is not None:
            return done
        shape = tuple(self.visit(s) for s in buf.shape)
        new = (
            buf
            if len(shape) == 1 and shape[0] is buf.shape[0]
            else buf.update(shape=(_product(shape),))
        )
        self.buffer_map[id(buf)] = new
        return new

    def _index(self, buf: Buffer, indices: tuple[Expr, ...]) -> tuple[Expr, ...]:
        visited = tuple(self.visit(i) for i in indices)
        if len(visited) == 1:
            return visited
        return (linear_index(tuple(self.visit(s) for s in buf.shape), visited),)

    def visit_BufferLoad(self, load: BufferLoad) -> BufferLoad:  # noqa: N802
        return BufferLoad(self.visit(load.buffer), self._index(load.buffer, load.indices))

    def visit_BufferStore(self, store: BufferStore) -> BufferStore:  # noqa: N802
        return BufferStore(
            self.visit(store.buffer),
            self.visit(store.value),
            self._index(store.buffer, store.indices),
        )

    def visit_Block(self, block: Block) -> Block:  # noqa: N802
        raise LowerError(
            f"FlattenBuffer: block {block.name!r} is still present; run ConvertBlocksToLoops first"
        )


class FlattenBuffer(FunctionPass):
    """Make every buffer of ``func`` one-dimensional."""

    def transform_function(self, func: PrimFunc) -> PrimFunc:
        """Flatten the buffers of ``func`` (parameters included)."""
        m = _Flattener()
        params = tuple(m.visit(p) for p in func.params)
        return func.update(params=params, body=m.visit(func.body))
