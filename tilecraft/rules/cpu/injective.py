"""``Injective``: functions without reduction — elementwise, broadcast, transpose, reshape,
concat, take/gather, pad, rotary embedding — as chains of blocks.

The schedule:

1. inline every intermediate block into its consumers (not a costly one a consumer reads
   broadcast, such as a table of cosines shared by every head: it stays a small nest);
2. for each block left (the outputs, and what could not be inlined), on its own nest:

   * a transposed access (the input's contiguous axis is not the output's, as in
     ``transpose`` or ``permute_dims``): cut both axes into blocks of tiles
     (:attr:`Injective.Config.block`, :attr:`Injective.Config.tile`) so a tile's input and
     output rows stay in the L1 cache and a block's in the L2 cache and the TLB's reach;
     vectorize along the output;
   * an elementwise block: fuse all loops into one, so only the very last vector is partial;
   * otherwise vectorize the innermost loop (the output's contiguous axis);

   and fuse the outer loops into one parallel loop when the kernel touches enough elements.

Odd and symbolic extents get a guard on the last tile or vector. Declines a function with a
reduction (``Reduction``/``GeneralReduction``) or an opaque block (``Fallback``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir import PrimFunc
from ...schedule import Schedule
from ...target import Target
from ..base import CPURule, Decline
from ._block_plan import inline_spatial, schedule_standalone, start
from ._vector_config import VectorConfig


class Injective(CPURule):
    """Inlined, tiled, vectorized and parallel injective functions (module docstring)."""

    @dataclass(frozen=True)
    class Config(VectorConfig):
        """The numbers of :class:`Injective`.

        Attributes
        ----------
        tile
            Edge of the square tiles of a transposed access, in elements: 16 float32 are one
            64-byte cache line, so a 16 x 16 tile reads 16 whole lines and writes 16.
        block
            Edge of the blocks of tiles: the 128 input and 128 output rows of a 128 x 128
            float32 block (128 KiB) stay in the L2 cache and the TLB's reach while its tiles
            are copied (a 4096 x 4096 transpose: 40 ms instead of 68 ms with tiles alone).
        """

        tile: int = 16
        block: int = 128

    def schedule(
        self, func: PrimFunc, target: Target, cfg: Injective.Config, tunable: bool
    ) -> Schedule | Decline:
        """Schedule ``func`` or decline (see the module docstring)."""
        got = start(func)
        if isinstance(got, Decline):
            return got
        sch, infos = got
        # Step 1. Only spatial blocks with one store each.
        for b in infos:
            if b.is_opaque():
                return Decline(f'block "{b.name}" is opaque (its body is not one store)')
            if not b.is_injective():
                return Decline(f'block "{b.name}" has reduction iterators ({b.dom_kind()})')
        # Step 2. Inline the chain; each block left gets its own tiled, vectorized nest.
        for b in inline_spatial(sch, infos):
            schedule_standalone(sch, cfg, b.block_rv, transpose_tiles=(cfg.tile, cfg.block))
        return sch
