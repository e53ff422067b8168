"""MultiLevelTiling: tile a block with data reuse into levels of spatial (S) and reduction (R)
loops, with sampled tile sizes, write cache and packing."""

from __future__ import annotations

from ...ir import Block, BufferLoad, IterKind, Var, post_order_visit
from ...schedule import BlockRV, LoopRV, Schedule
from ...target import Target
from ..postproc.keys import PACK, TILING, WRITE_CACHE
from .rule import SearchRule, block_of, is_reduction, is_root, simple_loops

CPU_STRUCTURE = "SSRSRS"
MAX_INNERMOST = 64
"""Largest innermost tile a sample may draw."""


def has_reuse(block: Block) -> bool:
    """True when some read of ``block`` is indexed by fewer than all its spatial iterators
    (each of its elements is used by several iterations: tiling pays)."""
    spatial = {id(iv.var) for iv in block.iter_vars if iv.kind is IterKind.SPATIAL}
    outputs = {id(w.buffer) for w in block.writes}
    found = False

    def visit(node: object) -> None:
        nonlocal found
        if isinstance(node, BufferLoad) and id(node.buffer) not in outputs:
            used: set[int] = set()
            for index in node.indices:
                post_order_visit(index, lambda n: used.add(id(n)) if isinstance(n, Var) else None)
            if spatial - used:
                found = True

    post_order_visit(block.body, visit)
    return found


class MultiLevelTiling(SearchRule):
    """Tile a reduction block with data reuse (a GEMM, a conv, a batched matmul).

    Every spatial loop is split by ``sample_perfect_tile`` into as many tiles as ``structure``
    has ``S``, every reduction loop into as many as it has ``R``, and the tiles are ordered
    level by level (CPU ``"SSRSRS"``: ``S0 S1 R0 S2 R1 S3``, the last levels a register tile
    around an inner reduction). Two choices are sampled with ``sample_categorical`` and left
    as block annotations for :class:`~tilecraft.tune.postproc.RewriteTilingCache`, which
    applies them once the loop nest is final:

    * :data:`~tilecraft.tune.postproc.keys.WRITE_CACHE`: accumulate in a local buffer written
      back under the first or second spatial level, or not (0);
    * :data:`~tilecraft.tune.postproc.keys.PACK`: copy the streamed operand into a contiguous
      panel under the second spatial level or the first reduction level, or not (0).

    Parameters
    ----------
    structure
        The tile levels, outermost first.
    max_innermost_factor
        Largest innermost tile of a sample.
    """

    name = "multi_level_tiling"

    def __init__(
        self, structure: str = CPU_STRUCTURE, max_innermost_factor: int = MAX_INNERMOST
    ) -> None:
        self.structure = structure
        self.max_innermost_factor = max_innermost_factor

    def applies(self, sch: Schedule, block: BlockRV) -> bool:
        """A reduction block with reuse whose loops bind its iterators one to one."""
        if is_root(sch, block):
            return False
        node = block_of(sch, block)
        if not is_reduction(node) or not has_reuse(node):
            return False
        return simple_loops(sch, block) is not None

    def apply(self, sch: Schedule, block: BlockRV, target: Target) -> list[Schedule]:
        """``[sch]`` with ``block`` tiled (unchanged when it does not apply)."""
        del target
        if not self.applies(sch, block):
            return [sch]
        done = sch.try_(self._tile, sch, block)
        if done:
            self._sample_choices(sch, block)
        return [sch]

    def _tile(self, sch: Schedule, block: BlockRV) -> None:
        levels: list[list[LoopRV]] = [[] for _ in self.structure]
        s_levels = [i for i, c in enumerate(self.structure) if c == "S"]
        r_levels = [i for i, c in enumerate(self.structure) if c == "R"]
        loops = simple_loops(sch, block)
        assert loops is not None
        for loop, iv in zip(loops, block_of(sch, block).iter_vars, strict=True):
            where = s_levels if iv.kind is IterKind.SPATIAL else r_levels
            factors = sch.sample_perfect_tile(loop, len(where), self.max_innermost_factor)
            parts = sch.split(loop, factors)
            for level, part in zip(where, parts, strict=True):
                levels[level].append(part)
        sch.reorder(*(lp for level in levels for lp in level))
        sch.annotate(block, TILING, self.structure)

    def _sample_choices(self, sch: Schedule, block: BlockRV) -> None:
        cache = sch.sample_categorical([0, 1, 2], [1 / 3, 1 / 3, 1 / 3])
        sch.annotate(block, WRITE_CACHE, cache)
        pack = sch.sample_categorical([0, 1, 2], [1 / 3, 1 / 3, 1 / 3])
        sch.annotate(block, PACK, pack)
