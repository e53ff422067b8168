"""MultiLevelTiling: tile a block with data reuse into levels of spatial (S) and reduction (R)
loops, with sampled tile sizes, write cache and packing."""

from __future__ import annotations

from ...ir import Block, BufferLoad, BufferStore, IntImm, IterKind, Var, post_order_visit
from ...schedule import BlockRV, LoopRV, Schedule
from ...target import Target
from ..postproc.keys import PACK, REGISTER_TILE, TILING, WRITE_CACHE
from .rule import SearchRule, block_of, is_reduction, is_root, simple_loops

CPU_STRUCTURE = "SSRSRS"
MAX_INNERMOST = 64
"""Largest innermost reduction tile a sample may draw."""
MAX_ROWS = 8
"""Largest innermost tile of a spatial iterator other than the vector axis (register rows)."""
WRITE_CACHE_PROBS = {0: 0.15, 1: 0.15, 2: 0.15, REGISTER_TILE: 0.55}
"""Probability of each write-cache level; the register tile is the one that runs fast."""


def max_vectors(target: Target) -> int:
    """Largest number of SIMD vectors in a register tile's row: 4 with 32 vector registers
    (512-bit SIMD), else 2."""
    return 4 if target.simd_bits >= 512 else 2


def vector_axis(block: Block) -> Var | None:
    """The spatial iterator that is the last index of the block's store (stride 1 in its
    output), or None."""
    store = block.body
    if not isinstance(store, BufferStore) or not store.indices:
        return None
    last = store.indices[-1]
    spatial = [iv.var for iv in block.iter_vars if iv.kind is IterKind.SPATIAL]
    return last if isinstance(last, Var) and any(last is v for v in spatial) else None


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
    level by level (CPU ``"SSRSRS"``: ``S0 S1 R0 S2 R1 S3``, the last level the register
    tile). The vector axis (the iterator that is the output's last index) is first split by
    the SIMD lanes of the output's dtype (when they divide it) and its innermost tile is a
    sampled number of whole vectors (at most :func:`max_vectors`) fused with the lanes, so the
    register tile's row is contiguous; the other spatial iterators' innermost tiles (the
    register tile's rows) are at most ``max_rows``. Two choices are sampled with
    ``sample_categorical`` and left as block annotations for
    :class:`~tilecraft.tune.postproc.RewriteTilingCache`, which applies them once the loop
    nest is final:

    * :data:`~tilecraft.tune.postproc.keys.WRITE_CACHE`: accumulate in a local buffer written
      back under the first, second or third spatial level (the third: the register tile,
      :data:`~tilecraft.tune.postproc.keys.REGISTER_TILE`, the likeliest), or not (0);
    * :data:`~tilecraft.tune.postproc.keys.PACK`: copy the streamed operand into a contiguous
      panel under the second spatial level or the first reduction level, or not (0).

    Parameters
    ----------
    structure
        The tile levels, outermost first.
    max_innermost_factor
        Largest innermost reduction tile of a sample.
    max_rows
        Largest innermost tile of the spatial iterators other than the vector axis.
    """

    name = "multi_level_tiling"

    def __init__(
        self,
        structure: str = CPU_STRUCTURE,
        max_innermost_factor: int = MAX_INNERMOST,
        max_rows: int = MAX_ROWS,
    ) -> None:
        self.structure = structure
        self.max_innermost_factor = max_innermost_factor
        self.max_rows = max_rows

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
        if not self.applies(sch, block):
            return [sch]
        done = sch.try_(self._tile, sch, block, target)
        if done:
            self._sample_choices(sch, block)
        return [sch]

    def _tile(self, sch: Schedule, block: BlockRV, target: Target) -> None:
        levels: list[list[LoopRV]] = [[] for _ in self.structure]
        s_levels = [i for i, c in enumerate(self.structure) if c == "S"]
        r_levels = [i for i, c in enumerate(self.structure) if c == "R"]
        loops = simple_loops(sch, block)
        assert loops is not None
        node = block_of(sch, block)
        vec = vector_axis(node)
        for loop, iv in zip(loops, node.iter_vars, strict=True):
            spatial = iv.kind is IterKind.SPATIAL
            where = s_levels if spatial else r_levels
            if spatial and iv.var is vec and len(where) > 1:
                parts = self._split_vector(sch, loop, len(where), target, node)
            else:
                limit = self.max_rows if spatial else self.max_innermost_factor
                parts = sch.split(loop, sch.sample_perfect_tile(loop, len(where), limit))
            for level, part in zip(where, parts, strict=True):
                levels[level].append(part)
        sch.reorder(*(lp for level in levels for lp in level))
        sch.annotate(block, TILING, self.structure)

    def _split_vector(
        self, sch: Schedule, loop: LoopRV, n: int, target: Target, node: Block
    ) -> list[LoopRV]:
        """``loop`` in ``n`` tiles, the innermost a sampled number of whole SIMD vectors
        (plain sampled tiles when the lanes do not divide the extent)."""
        store = node.body
        assert isinstance(store, BufferStore)
        lanes = max(target.simd_bits, 128) // max(store.buffer.dtype.bits, 8)
        extent = getattr(sch.get(loop), "extent", None)
        if not isinstance(extent, IntImm) or lanes < 2 or extent.value % lanes:
            return sch.split(loop, sch.sample_perfect_tile(loop, n, self.max_rows))
        outer, lane = sch.split(loop, [None, lanes])
        parts = sch.split(outer, sch.sample_perfect_tile(outer, n, max_vectors(target)))
        return [*parts[:-1], sch.fuse(parts[-1], lane)]

    def _sample_choices(self, sch: Schedule, block: BlockRV) -> None:
        levels = [lv for lv in WRITE_CACHE_PROBS if lv <= self.structure.count("S") - 1]
        total = sum(WRITE_CACHE_PROBS[lv] for lv in levels)
        cache = sch.sample_categorical(levels, [WRITE_CACHE_PROBS[lv] / total for lv in levels])
        sch.annotate(block, WRITE_CACHE, cache)
        pack = sch.sample_categorical([0, 1, 2], [1 / 3, 1 / 3, 1 / 3])
        sch.annotate(block, PACK, pack)
