"""RewriteTilingCache: apply the write cache and packing a tiling rule sampled.

Before: a block tiled by :class:`~tilecraft.tune.space.MultiLevelTiling` carries
:data:`~.keys.TILING` (its structure, e.g. ``"SSRSRS"``), :data:`~.keys.WRITE_CACHE` and
:data:`~.keys.PACK` (ints), and its loops are still the tiles in level order.
After: with ``PACK`` 1 or 2, the streamed operand (the read indexed by the block's innermost
spatial iterator and a reduction iterator) is copied (``cache_read``) under the last loop of
the second spatial level (1) or of the first reduction level (2), into a panel whose
dimension of that iterator is innermost (``transform_layout`` when it was not); with
``WRITE_CACHE`` L >= 1 the block accumulates into a local buffer written back under the last
loop of spatial level L. The annotations are gone. A step a block does not allow is skipped
(the candidate keeps its meaning); a value that is not an int drops the candidate.
"""

from __future__ import annotations

from ...ir import Block, BufferLoad, Expr, IntImm, IterKind, Var, post_order_visit
from ...rules.common import localize_output
from ...schedule import BlockRV, IndexMap, LoopRV, Schedule
from .base import Postproc
from .keys import PACK, TILING, WRITE_CACHE


def _value(v: object) -> int | None:
    if isinstance(v, Expr):
        v = v.value if isinstance(v, IntImm) else None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _level_ends(structure: str, n_s: int, n_r: int) -> list[tuple[str, int]]:
    """(kind, index of the last loop) of every level in ``structure``."""
    ends, pos = [], -1
    for c in structure:
        pos += n_s if c == "S" else n_r
        ends.append((c, pos))
    return ends


def _streamed_read(block: Block) -> tuple[int, int] | None:
    """(read index, dimension of the innermost spatial iterator) of the streamed operand."""
    spatial = [iv.var for iv in block.iter_vars if iv.kind is IterKind.SPATIAL]
    reduce = {id(iv.var) for iv in block.iter_vars if iv.kind is IterKind.REDUCE}
    if not spatial:
        return None
    inner = spatial[-1]
    outputs = {id(w.buffer) for w in block.writes}
    loads: list[BufferLoad] = []
    post_order_visit(block.body, lambda n: loads.append(n) if isinstance(n, BufferLoad) else None)
    for load in loads:
        if id(load.buffer) in outputs or len(load.indices) < 2:
            continue
        dims = [d for d, i in enumerate(load.indices) if isinstance(i, Var) and i is inner]
        if not dims or not any(isinstance(i, Var) and id(i) in reduce for i in load.indices):
            continue
        index = next(k for k, r in enumerate(block.reads) if r.buffer is load.buffer)
        return index, dims[0]
    return None


def _pack(sch: Schedule, block: BlockRV, loop: LoopRV) -> None:
    found = _streamed_read(_node(sch, block))
    if found is None:
        return
    index, dim = found
    ndim = len(_node(sch, block).reads[index].region)

    def pack() -> None:
        panel = sch.cache_read(block, index, "global")
        sch.compute_at(panel, loop)
        if dim != ndim - 1:
            order = [d for d in range(ndim) if d != dim] + [dim]
            index_map = IndexMap.from_func(lambda *i: tuple(i[d] for d in order), ndim=ndim)
            sch.transform_layout(panel, ("write", 0), index_map)

    sch.try_(pack)


def _node(sch: Schedule, block: BlockRV) -> Block:
    node = sch.get(block)
    assert isinstance(node, Block)
    return node


def _rewrite(sch: Schedule, block: BlockRV, structure: str, cache: int, pack: int) -> None:
    node = _node(sch, block)
    n_s = sum(iv.kind is IterKind.SPATIAL for iv in node.iter_vars)
    n_r = len(node.iter_vars) - n_s
    loops = sch.get_loops(block)
    if len(loops) != structure.count("S") * n_s + structure.count("R") * n_r:
        return  # the nest is not the tiling any more
    ends = _level_ends(structure, n_s, n_r)
    s_ends = [pos for c, pos in ends if c == "S" and pos >= 0]
    r_ends = [pos for c, pos in ends if c == "R" and pos >= 0]
    pack_at = {1: s_ends[1:2], 2: r_ends[0:1]}.get(pack, [])
    if pack_at:
        _pack(sch, block, loops[pack_at[0]])
    if 1 <= cache <= len(s_ends) and n_s:
        sch.try_(localize_output, sch, block, sch.get_loops(block)[s_ends[cache - 1]])


class RewriteTilingCache(Postproc):
    """Apply the sampled write cache and packing of tiled blocks (module docstring)."""

    name = "rewrite_tiling_cache"

    def apply(self, sch: Schedule) -> bool:
        """Rewrite every tiled block; False when a choice is not an int."""
        tiled: list[tuple[str, dict[str, object]]] = []

        def visit(node: object) -> None:
            if isinstance(node, Block) and TILING in node.annotations:
                tiled.append((node.name, dict(node.annotations)))

        post_order_visit(sch.func.body, visit)
        for name, anns in tiled:
            cache, pack = _value(anns.get(WRITE_CACHE, 0)), _value(anns.get(PACK, 0))
            structure = anns[TILING]
            if cache is None or pack is None or not isinstance(structure, str):
                return False
            block = sch.get_block(name)
            for key in (TILING, WRITE_CACHE, PACK):
                if key in anns:
                    sch.unannotate(block, key)
            _rewrite(sch, block, structure, cache, pack)
        return True
