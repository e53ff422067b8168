"""Flatten multi-dimensional buffers to one dimension (row-major).

Before: blocks are gone (:class:`~tilecraft.lower.ConvertBlocksToLoops`); buffers have any rank,
with constant or symbolic extents.
After:  every buffer — parameters and allocations — has rank 1 and extent the product of its
old extents (a rank-0 buffer gets extent 1); each access ``B[i, j, k]`` on a buffer of shape
``(n0, n1, n2)`` becomes ``B[(i * n1 + j) * n2 + k]``, computed in int64 when the buffer has
2^31 elements or more. Buffer identity is kept per buffer.

An allocated buffer named in the ``tc.storage_align`` table (see
:class:`~tilecraft.lower.CollectStorageAlign`) is laid out with padded strides instead: going
from the last dimension to the first, ``stride(d) = stride(d + 1) * n(d + 1)`` (1 for the last),
raised to the next value with ``stride(d) % factor == offset`` when ``d`` is aligned; the access
becomes ``B[i * s0 + j * s1 + k * s2]`` and the allocation has ``s0 * n0`` elements. The table
is removed from the function's attributes.

An allocated buffer named in ``tc.storage_swizzle`` keeps its size; the column of each access
is swizzled first (:func:`~tilecraft.lower.swizzle_layout.swizzled_column` of the last two
indices: 16-byte chunks of a row permuted by XOR with the row), then flattened as above. The
attribute is removed too.
"""

from __future__ import annotations

from ..arith import Analyzer
from ..errors import LowerError
from ..ir import (
    Allocate,
    Block,
    Buffer,
    BufferLoad,
    BufferStore,
    Expr,
    FloorMod,
    IntImm,
    Mutator,
    Node,
    PrimFunc,
    as_expr,
    cast,
    dtype,
    post_order_visit,
)
from ..ir.transform import FunctionPass
from .collect_storage_align import (
    STORAGE_ALIGN_ATTR,
    STORAGE_SWIZZLE_ATTR,
    AlignEntry,
    storage_align_table,
    storage_swizzle_names,
)
from .swizzle_layout import swizzle_supported, swizzled_column

_INT32_MAX = 2**31 - 1
int64 = dtype("int64")


def _product(shape: tuple[Expr, ...]) -> Expr:
    if not shape:
        return as_expr(1)
    total: Expr = shape[0]
    for s in shape[1:]:
        if isinstance(total, IntImm) and isinstance(s, IntImm):
            value = total.value * s.value
            dt = total.dtype if value <= _INT32_MAX or total.dtype.bits > 32 else int64
            total = IntImm(dt, value)
        else:
            total = total * cast(s, total.dtype)
    return total


def needs_int64(shape: tuple[Expr, ...]) -> bool:
    """True when a buffer of constant ``shape`` has more elements than int32 can index."""
    total = 1
    for s in shape:
        if not isinstance(s, IntImm):
            return False
        total *= s.value
    return total > _INT32_MAX


def linear_index(shape: tuple[Expr, ...], indices: tuple[Expr, ...]) -> Expr:
    """The row-major offset of ``indices`` in a buffer of ``shape`` (computed in int64 when the
    buffer has more elements than int32 can index)."""
    if not indices:
        return as_expr(0)
    offset = indices[0]
    if needs_int64(shape) and offset.dtype.bits < 64:
        offset = cast(offset, int64)
    for extent, idx in zip(shape[1:], indices[1:], strict=True):
        dt = offset.dtype if offset.dtype.bits >= idx.dtype.bits else idx.dtype
        offset = cast(offset, dt) * cast(extent, dt) + cast(idx, dt)
    return offset


_ANALYZER = Analyzer()  # unbound: only folds constants and normalises affine forms


def _pad(stride: Expr, factor: int, offset: int) -> Expr:
    """The least value ``>= stride`` that is ``offset`` modulo ``factor``."""
    if isinstance(stride, IntImm):
        return IntImm(stride.dtype, stride.value + (offset - stride.value) % factor)
    f, o = IntImm(stride.dtype, factor), IntImm(stride.dtype, offset)
    return _ANALYZER.simplify(stride + FloorMod(f + o - FloorMod(stride, f), f))


def aligned_strides(
    shape: tuple[Expr, ...], entries: tuple[AlignEntry, ...]
) -> tuple[tuple[Expr, ...], Expr]:
    """Row-major strides of ``shape`` padded for ``(axis, factor, offset)`` entries.

    Parameters
    ----------
    shape
        The buffer's extents (constant or symbolic).
    entries
        Alignment requests: ``stride(axis) % factor == offset`` after padding; the stride of
        ``axis`` is the least value at or above the unpadded one that satisfies it.

    Returns
    -------
    tuple
        ``(strides, size)``: one stride per dimension, and the number of elements to allocate.
    """
    aligned = {axis: (factor, offset) for axis, factor, offset in entries}
    dt = shape[0].dtype if shape else as_expr(0).dtype
    for extent in shape:
        dt = extent.dtype if extent.dtype.bits > dt.bits else dt
    if needs_int64(shape):
        dt = int64  # padded strides only grow: an int32 count would overflow
    stride: Expr = IntImm(dt, 1)
    strides: list[Expr] = []
    for d in reversed(range(len(shape))):
        if d in aligned:
            stride = _pad(stride, *aligned[d])
        strides.append(stride)
        extent = cast(shape[d], dt)
        if isinstance(stride, IntImm) and isinstance(extent, IntImm):
            stride = IntImm(dt, stride.value * extent.value)
        elif isinstance(stride, IntImm) and stride.value == 1:
            stride = extent
        else:
            stride = _ANALYZER.simplify(stride * extent)
    return tuple(reversed(strides)), stride


def strided_index(strides: tuple[Expr, ...], indices: tuple[Expr, ...]) -> Expr:
    """The offset ``sum(index * stride)`` of ``indices`` in a buffer with ``strides``."""
    offset: Expr | None = None
    for stride, idx in zip(strides, indices, strict=True):
        dt = idx.dtype if idx.dtype.bits >= stride.dtype.bits else stride.dtype
        unit = isinstance(stride, IntImm) and stride.value == 1
        term = cast(idx, dt) if unit else cast(idx, dt) * cast(stride, dt)
        if offset is None:
            offset = term
        else:
            wide = offset.dtype if offset.dtype.bits >= dt.bits else dt
            offset = cast(offset, wide) + cast(term, wide)
    return as_expr(0) if offset is None else offset


class _Flattener(Mutator):
    def __init__(self, aligns: dict[int, tuple[AlignEntry, ...]], swizzled: set[int]) -> None:
        super().__init__()
        self.aligns = aligns
        self.swizzled = swizzled
        self.strides: dict[int, tuple[Expr, ...]] = {}

    def visit_Buffer(self, buf: Buffer) -> Buffer:  # noqa: N802
        done = self.buffer_map.get(id(buf))
        if done is not None:
            return done
        shape = tuple(self.visit(s) for s in buf.shape)
        entries = self.aligns.get(id(buf))
        if entries:
            strides, size = aligned_strides(shape, entries)
            self.strides[id(buf)] = strides
            new = buf.update(shape=(size,))
        elif len(shape) == 1 and shape[0] is buf.shape[0]:
            new = buf
        else:
            new = buf.update(shape=(_product(shape),))
        self.buffer_map[id(buf)] = new
        return new

    def _index(self, buf: Buffer, indices: tuple[Expr, ...]) -> tuple[Expr, ...]:
        self.visit(buf)
        visited = tuple(self.visit(i) for i in indices)
        if id(buf) in self.swizzled:
            cols = buf.shape[-1]
            assert isinstance(cols, IntImm)  # checked by _swizzled_allocations
            col = swizzled_column(visited[-2], visited[-1], cols.value, buf.dtype.bits)
            visited = (*visited[:-1], col)
        strides = self.strides.get(id(buf))
        if strides is not None:
            return (strided_index(strides, visited),)
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
        m = _Flattener(_aligned_allocations(func), _swizzled_allocations(func))
        params = tuple(m.visit(p) for p in func.params)
        func = func.update(params=params, body=m.visit(func.body))
        for key in (STORAGE_ALIGN_ATTR, STORAGE_SWIZZLE_ATTR):
            if key in func.attrs:
                func = func.update(attrs=func.attrs.without(key))
        return func


def _swizzled_allocations(func: PrimFunc) -> set[int]:
    """Allocated buffers named in ``tc.storage_swizzle``, by identity."""
    names = storage_swizzle_names(func)
    out: set[int] = set()
    if not names:
        return out

    def fn(n: Node) -> None:
        if isinstance(n, Allocate) and n.buffer.name in names:
            buf = n.buffer
            cols = buf.shape[-1] if buf.ndim >= 2 else None
            if not (isinstance(cols, IntImm) and swizzle_supported(cols.value, buf.dtype.bits)):
                raise LowerError(
                    f"FlattenBuffer: buffer {buf.name!r} {buf.shape} cannot be swizzled: its "
                    "rows must be a power-of-two number of 16-byte chunks"
                )
            out.add(id(buf))

    post_order_visit(func.body, fn)
    return out


def _aligned_allocations(func: PrimFunc) -> dict[int, tuple[AlignEntry, ...]]:
    """Allocated buffers named in the alignment table, by identity, with their entries."""
    table = storage_align_table(func)
    out: dict[int, tuple[AlignEntry, ...]] = {}
    if not table:
        return out

    def fn(n: Node) -> None:
        if isinstance(n, Allocate) and n.buffer.name in table:
            entries = table[n.buffer.name]
            if any(not 0 <= axis < n.buffer.ndim for axis, _, _ in entries):
                raise LowerError(
                    f"FlattenBuffer: {STORAGE_ALIGN_ATTR} entries {entries} of buffer "
                    f"{n.buffer.name!r} do not fit its {n.buffer.ndim} dimension(s)"
                )
            out[id(n.buffer)] = entries

    post_order_visit(func.body, fn)
    return out
