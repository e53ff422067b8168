"""Schedule methods of the tensor-core primitives: blockize and tensorize.

:class:`TensorPrimitives` is a base of :class:`~tilecraft.schedule.Schedule` (its own module so
``schedule.py`` stays within the size STYLE.md allows); each method is a thin call of a traced
primitive, its docstring repeating the primitive's Requires/Rewrite.
"""

from __future__ import annotations

from .primitives.blockize import blockize as _blockize
from .primitives.tensorize import tensorize as _tensorize
from .state import BlockRV, LoopRV, ScheduleState


class TensorPrimitives:
    """Blocks of tensor-intrinsic shape (blockize) and their replacement (tensorize)."""

    state: ScheduleState

    def blockize(self, loop: LoopRV) -> BlockRV:
        """Make the subtree under ``loop`` one block; returns the new outer block.

        Requires: the loops from ``loop`` down are perfectly nested around one block, none
        thread-bound or parallel, each from 0 over a constant extent; the block's predicate
        uses only loops above ``loop``; each iterator binding divides as ``outer * E +
        inner`` (``inner`` a dense mixed-radix combination of distinct loops from ``loop``
        down, over ``[0, E)``; ``outer`` a multiple-of-``E`` expression of the loops above);
        each iterator's domain starts at 0 with an extent that ``E`` divides.
        Rewrite: ``for i1 in range(16): C[vi = i0 * 16 + i1]`` -->
        ``C_o[vi_o = i0]: for i1 in range(16): C[vi_i = i1]`` with ``vi = vi_o * 16 + vi_i``;
        the outer block reads/writes the inner regions relaxed over the inner iterators; an
        init of ``C`` becomes ``C_o``'s init (block ``C_init`` over the inner spatial
        iterators).
        """
        return _blockize(self.state, loop)

    def tensorize(self, block_or_loop: BlockRV | LoopRV, intrin: str) -> None:
        """Replace a block computing tensor intrinsic ``intrin``'s description (see
        :mod:`tilecraft.schedule.tensor_intrin`) by the intrinsic's implementation.

        Requires: ``intrin`` is registered; given a loop, ``blockize`` succeeds on it; the
        block's body has the description's form (same loop extents, iterator kinds and
        domains, computation, buffer dtypes and storage scopes, no init); each buffer's
        declared region is a tile of the description buffer's shape (extra leading
        dimensions of extent 1) and every access lies at the tile's offset plus the
        description's index.
        Rewrite: ``C_o: for i, j, k in T.grid(16, 8, 16): C[...] += A[...] * B[...]`` -->
        ``C_o: T.evaluate(T.mma_sync_m16n8k16(C[vi_o * 16, vj_o * 8], A[...], B[...]))``
        (block attribute ``tc.tensor_intrin`` names the intrinsic).
        """
        _tensorize(self.state, block_or_loop, intrin)
