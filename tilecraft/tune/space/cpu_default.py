"""The default CPU design space, until the search rules of part 2 (PostOrderApply) land.

For each block of the function, in order:

1. an intermediate block without reduction iterators is inlined into its consumers;
2. every other block with one loop per iterator and constant extents is tiled: each loop is
   split in two by ``sample_perfect_tile`` (spatial inner tiles up to 64, reduction inner
   tiles up to 16), the loops are ordered outer spatial, outer reduction, inner reduction,
   inner spatial, the outer spatial loops are fused and run in parallel, and the innermost
   spatial loop is vectorized.

Every step goes through ``Schedule.try_``: a step a block does not allow is skipped, so the
space applies to any function. Only the tile sizes are sampled; the structure is fixed.
"""

from __future__ import annotations

from ...ir import BlockRealize, IntImm, IterKind
from ...schedule import BlockRV, LoopRV, Schedule

SPATIAL_INNER_MAX = 64
REDUCE_INNER_MAX = 16


def _leaf_blocks(sch: Schedule) -> list[BlockRV]:
    body = sch.func.body
    if not isinstance(body, BlockRealize):
        return []
    return sch.get_child_blocks(sch.get_block(body.block.name))


def _tile(sch: Schedule, block: BlockRV) -> None:
    node = sch.get(block)
    loops = sch.get_loops(block)
    ivs = getattr(node, "iter_vars", ())
    extents = [getattr(sch.get(lp), "extent", None) for lp in loops]
    if len(loops) != len(ivs) or not all(isinstance(e, IntImm) for e in extents):
        return
    outer_s: list[LoopRV] = []
    inner_s: list[LoopRV] = []
    outer_r: list[LoopRV] = []
    inner_r: list[LoopRV] = []
    for loop, iv in zip(loops, ivs, strict=True):
        spatial = iv.kind is IterKind.SPATIAL
        limit = SPATIAL_INNER_MAX if spatial else REDUCE_INNER_MAX
        factors = sch.try_(sch.sample_perfect_tile, loop, 2, limit).value_or(None)
        parts = sch.try_(sch.split, loop, factors).value_or(None) if factors is not None else None
        if parts is None:
            return
        (outer_s if spatial else outer_r).append(parts[0])
        (inner_s if spatial else inner_r).append(parts[1])
    sch.try_(sch.reorder, *outer_s, *outer_r, *inner_r, *inner_s)
    if outer_s:
        fused = sch.try_(sch.fuse, *outer_s).value_or(None) if len(outer_s) > 1 else outer_s[0]
        if fused is not None:
            sch.try_(sch.parallel, fused)
    if inner_s:
        sch.try_(sch.vectorize, inner_s[-1])


def cpu_default_space(sch: Schedule) -> None:
    """Inline intermediate elementwise blocks, then tile, parallelize and vectorize the rest."""
    blocks = _leaf_blocks(sch)
    kept: list[BlockRV] = []
    for i, block in enumerate(blocks):
        node = sch.get(block)
        reduces = any(iv.kind is IterKind.REDUCE for iv in getattr(node, "iter_vars", ()))
        if i < len(blocks) - 1 and not reduces and sch.try_(sch.compute_inline, block):
            continue  # inlined into its consumers
        kept.append(block)
    for block in kept:
        _tile(sch, block)
