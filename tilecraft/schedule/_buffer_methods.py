"""Schedule methods of the buffer, reduction and block-shape primitives.

:class:`BufferPrimitives` is a base of :class:`~tilecraft.schedule.Schedule` (kept in its own
module so no file grows past the size STYLE.md allows); every method is a thin call of a
traced state-level primitive, its docstring repeating the primitive's Requires/Rewrite.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .primitives import cache as _cache
from .primitives import layout as _layout
from .primitives import reduction as _reduction
from .primitives.block_layout import as_block_map as _as_block_map
from .primitives.block_layout import get_output_blocks as _get_output_blocks
from .primitives.block_layout import transform_block_layout as _transform_block_layout
from .primitives.decompose_padding import decompose_padding as _decompose_padding
from .primitives.index_map import IndexMap
from .primitives.pad_einsum import pad_einsum as _pad_einsum
from .state import BlockRV, LoopRV, ScheduleState


class BufferPrimitives:
    """Buffers (cache_read/write, set_scope, storage_align, storage_swizzle, transform_layout,
    reindex), reductions (rfactor, decompose_reduction) and block shape (get_output_blocks,
    transform_block_layout, pad_einsum, decompose_padding)."""

    state: ScheduleState

    # -- buffers ----------------------------------------------------------------------------
    def cache_read(
        self,
        block: BlockRV,
        read_buffer_index: int,
        storage_scope: str,
        consumer_blocks: Sequence[BlockRV] | None = None,
    ) -> BlockRV:
        """Stage read buffer ``read_buffer_index`` of ``block`` through a new buffer.

        Requires: the index selects a read; the scope is global, shared, shared.dyn or
        local; each consumer given reads the buffer; the buffer has at most one writer; the
        readers sharing the writer's loop nest lie after it under one loop.
        Rewrite: a copy block ``A_local[v] = A[v]`` goes after the producer (first, for a
        parameter); the readers read ``A_local``. When readers share the producer's nest
        (after ``compute_at``: a cache chain), the copy goes right after the producer inside
        the deepest loop holding both, covering what the readers there read. Returns the copy
        block.
        """
        return _cache.cache_read(
            self.state, block, read_buffer_index, storage_scope, consumer_blocks
        )

    def cache_write(self, block: BlockRV, write_buffer_index: int, storage_scope: str) -> BlockRV:
        """Compute ``block`` into a new ``storage_scope`` buffer and copy it out.

        Requires: the index selects a write; the scope is known; the block is the only writer
        of the buffer; no reader shares the block's outermost loop nest.
        Rewrite: ``C[v] = ...`` -> ``C_local[v] = ...`` then ``C[v] = C_local[v]`` (new block,
        returned) after the block's nest.
        """
        return _cache.cache_write(self.state, block, write_buffer_index, storage_scope)

    def set_scope(self, block: BlockRV, buffer_index: int, storage_scope: str) -> None:
        """Change the storage scope of a buffer ``block`` writes.

        Requires: the index selects a write; the scope is known; the buffer is allocated in
        the function (not a parameter).
        Rewrite: every use of ``B`` refers to ``B`` with the new scope.
        """
        _layout.set_scope(self.state, block, buffer_index, storage_scope)

    def storage_align(
        self, block: BlockRV, buffer_index: int, axis: int, factor: int, offset: int
    ) -> None:
        """Pad the stride of ``axis`` of a buffer ``block`` writes to ``factor * k + offset``.

        Requires: the index selects a write of an intermediate buffer; ``axis`` is a valid
        dimension; ``factor > 0`` and ``0 <= offset < factor``; no other block (and no other
        write index of this block) already asks for a different factor/offset on the same
        buffer axis: a buffer has one layout. Repeating the request on the same block and
        index replaces the earlier one.
        Rewrite: the block gains the ``buffer_dim_align`` annotation (applied when lowering).
        A later primitive that relayouts the buffer or makes the block write another one
        (transform_layout, reindex, reverse_compute_inline) drops the stale request.
        """
        _layout.storage_align(self.state, block, buffer_index, axis, factor, offset)

    def storage_swizzle(self, block: BlockRV, buffer_index: int) -> None:
        """Store the rows of a buffer ``block`` writes XOR-swizzled in 16-byte chunks.

        Requires: the index selects a write of an intermediate buffer of two or more
        dimensions (lowering: rows of a power-of-two number of 16-byte chunks).
        Rewrite: the block gains the ``buffer_swizzle`` annotation; lowering stores chunk
        ``c`` of row ``r`` at ``c ^ f(r)`` (:mod:`tilecraft.lower.swizzle_layout`), so
        ``ldmatrix`` rows and 16-byte stores hit distinct banks with no padding.
        """
        _layout.storage_swizzle(self.state, block, buffer_index)

    def transform_layout(
        self,
        block: BlockRV,
        buffer: tuple[str, int],
        index_map: IndexMap | Callable[..., Any],
    ) -> None:
        """Re-layout buffer ``("read" | "write", index)`` of ``block`` with ``index_map``.

        ``index_map`` is an :class:`IndexMap` or a callable such as ``lambda i, j: (j, i)``.
        Requires: the buffer is an intermediate; the map takes one index per dimension and
        is a bijection of permutations, splits and fusions onto a 0-based box.
        Rewrite: ``B[i, j]`` -> ``B[j, i]`` everywhere (the shape is permuted likewise).
        """
        _layout.transform_layout(self.state, block, buffer, index_map)

    def reindex(self, block: BlockRV, buffer: tuple[str, int]) -> BlockRV:
        """Stage an access of ``block`` through a buffer indexed by its iterators.

        Requires: every access of the buffer in the block uses the same iterator-only
        indices; the block does not both read and write it; no other block accessing it
        shares the block's outermost loop nest.
        Rewrite: ``... A[vi + vk] ...`` -> ``A_reindex[v0, v1] = A[v0 + v1]`` (new block,
        returned) and ``... A_reindex[vi, vk] ...``.
        """
        return _layout.reindex(self.state, block, buffer)

    # -- reductions -------------------------------------------------------------------------
    def rfactor(self, loop: LoopRV, factor_axis: int = 0) -> BlockRV:
        """Factor the reduction over ``loop`` into an rf block; returns the rf block.

        Requires: exactly one reduction block under ``loop``, with an init and a body
        ``C[s] = C[s] op rhs`` (op one of +, *, max, min); ``loop`` binds reduce iterators
        only; each predicate condition uses reduction loops only, or none (a guarded
        contribution adds the identity); ``-(ndim + 1) <= factor_axis <= ndim``; no loop
        binds both spatial and reduce iterators; no other block inside the replaced nest
        accesses ``C``; loop ranges independent of the dropped reduction loops.
        Rewrite: ``C[i] += A[i, ko * 4 + ki]`` -> ``C_rf[ki, i] += A[i, ko * 4 + ki]`` and
        ``C[i] += C_rf[ki, i]`` (``ki`` inserted into ``C_rf`` at ``factor_axis``). The two
        nests replace the block's own loop nest in place (loops shared with other statements,
        e.g. after ``compute_at``, stay shared), the rf nest first.
        """
        return _reduction.rfactor(self.state, loop, factor_axis)

    def decompose_reduction(self, block: BlockRV, loop: LoopRV) -> BlockRV:
        """Move ``block``'s init into its own block before ``loop``; returns the init block.

        Requires: the block has an init; ``loop`` is above it; no loop above ``loop`` binds
        a reduce iterator; the predicate uses only loops kept for the init.
        Rewrite: ``for i, k: C[i] (init 0) += ...`` -> ``for i: (C_init: C[i] = 0;
        for k: C[i] += ...)``.
        """
        return _reduction.decompose_reduction(self.state, block, loop)

    # -- block shape and padding ------------------------------------------------------------
    def get_output_blocks(self, scope_block: BlockRV) -> list[BlockRV]:
        """The blocks directly under ``scope_block`` (root too) writing a function output."""
        return _get_output_blocks(self.state, scope_block)

    def transform_block_layout(
        self, block: BlockRV, index_map: IndexMap | Callable[..., Any]
    ) -> None:
        """Re-map ``block``'s iteration space (its iterators and their loops) with
        ``index_map``, an :class:`IndexMap` or a callable such as ``lambda i, j: (j, i)``.

        Requires: the block owns its loop nest (one serial loop per iterator, perfectly nested
        around the block alone, each binding its iterator directly, from 0; no predicate; an
        iterator of extent 1 bound to 0 may have none); no opaque iterator; the map takes one
        index per iterator and is a bijection (permutations, splits, fusions) onto a 0-based
        box; each output index uses iterators of one kind. The old loops are replaced (their
        handles go stale).
        Rewrite: ``for i, j: C[vi=i, vj=j]`` -- ``lambda i, j: (i * n + j,)`` -->
        ``for ax0 in range(m * n): C[v0=ax0]`` with ``vi = v0 // n``, ``vj = v0 % n`` inside.
        """
        _transform_block_layout(self.state, block, _as_block_map(index_map))

    def pad_einsum(self, block: BlockRV, padding: Sequence[int]) -> None:
        """Pad the iteration space of einsum-like ``block`` up to multiples of ``padding``.

        Requires: one positive int per iterator, changing at least one extent; the block
        owns its loop nest, directly under its scope; every index of every access is one
        iterator or a constant, the stored buffer read only at the stored element; padded
        spatial iterators index the output, reduction iterators do not; a padded reduction
        iterator needs an init and ``C = C + a * b ...`` with a factor loaded at it; every
        access pads a buffer dimension the same way.
        Rewrite: ``for i, j, k in T.grid(127, 127, 127): C[i, j] += A[i, k] * B[k, j]`` --
        ``padding=[16, 16, 16]`` --> blocks ``A_pad``/``B_pad`` (zero-filled padded copies),
        the block over ``T.grid(128, 128, 128)`` on ``A_pad``, ``B_pad``, ``C_pad``, then
        ``C_unpad`` copying ``C_pad`` back over 127x127.
        """
        _pad_einsum(self.state, block, padding)

    def decompose_padding(self, block: BlockRV, loop: LoopRV) -> BlockRV:
        """Split padding block ``block`` into a fill block, placed right before ``loop``,
        and the in-range copy; returns the fill block.

        Requires: the block stores ``B[...] = T.Select(cond, value, pad)`` with a load-free
        ``cond`` and a ``pad`` using no buffer and no iterator; no init, spatial iterators;
        it writes only ``B`` and does not read it; ``loop`` encloses it in its scope and the
        loops from ``loop`` down hold only this block.
        Rewrite: ``for i in range(6): P[i] = T.Select(1 <= i < 5, X[i - 1], 0.0)`` -->
        ``for i_1 in range(6): P[i_1] = 0.0`` (block ``P_pad_const``) then
        ``for i in range(1, 5): P[i] = X[i - 1]`` (constant bounds shrink the loops; other
        conditions become the block's predicate).
        """
        return _decompose_padding(self.state, block, loop)
