"""RewriteTilingCache: apply the write cache and packing a tiling rule sampled.

Before: a block tiled by :class:`~tilecraft.tune.space.MultiLevelTiling` carries
:data:`~.keys.TILING` (its structure, e.g. ``"SSRSRS"``), :data:`~.keys.WRITE_CACHE` and
:data:`~.keys.PACK` (ints), and its loops are still the tiles in level order.
After: with ``PACK`` 1 or 2, the streamed operand (the read indexed by the block's innermost
spatial iterator and a reduction iterator) is copied (``cache_read``) under the last loop of
the second spatial level (1) or of the first reduction level (2), into a panel whose
dimension of that iterator is innermost (``transform_layout`` when it was not); with
``WRITE_CACHE`` L >= 1 the reduction levels outside spatial level L are first moved just
inside it, and the block accumulates into a local buffer written back under the last loop of
spatial level L; when that buffer is the innermost spatial tile (the register tile, L = the
number of spatial levels minus one) its row loops are unrolled and PACK 2 means under the
first spatial level (the first reduction level now lies inside the register tile's loops).
The annotations are gone. A step a block does not allow is skipped
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


def _levels(loops: list[LoopRV], structure: str, n_s: int, n_r: int) -> list[list[LoopRV]]:
    """The loops of each level of ``structure``, outermost first."""
    out, pos = [], 0
    for c in structure:
        width = n_s if c == "S" else n_r
        out.append(loops[pos : pos + width])
        pos += width
    return out


def _hoisted(structure: str, cache: int) -> list[int]:
    """Level indices in their new order: with a write cache under spatial level ``cache``, the
    reduction levels outside it move just inside it (the local tile sees the whole reduction)."""
    s_idx = [i for i, c in enumerate(structure) if c == "S"]
    if not 1 <= cache <= len(s_idx):
        return list(range(len(structure)))
    cut = s_idx[cache - 1]
    outer = [i for i in range(cut + 1) if structure[i] == "S"]
    return outer + [i for i in range(len(structure)) if i not in outer]


def _rewrite(sch: Schedule, block: BlockRV, structure: str, cache: int, pack: int) -> None:
    node = _node(sch, block)
    n_s = sum(iv.kind is IterKind.SPATIAL for iv in node.iter_vars)
    n_r = len(node.iter_vars) - n_s
    loops = sch.get_loops(block)
    if len(loops) != structure.count("S") * n_s + structure.count("R") * n_r or not n_s:
        return  # the nest is not the tiling any more
    levels = _levels(loops, structure, n_s, n_r)
    order = _hoisted(structure, cache)
    if order != sorted(order) and not sch.try_(
        sch.reorder, *(lp for i in order for lp in levels[i])
    ):
        return  # the reduction cannot move inside: leave the candidate as it is
    ends = {i: levels[i][-1] for i in range(len(structure)) if levels[i]}
    s_idx = [i for i, c in enumerate(structure) if c == "S"]
    r_idx = [i for i, c in enumerate(structure) if c == "R"]
    hoisted = bool(r_idx) and order.index(r_idx[0]) > order.index(s_idx[min(cache, len(s_idx)) - 1])
    if pack == 1 and len(s_idx) > 1:
        _pack(sch, block, ends[s_idx[1]])
    elif pack == 2 and r_idx:
        _pack(sch, block, ends[s_idx[0]] if hoisted and cache >= 1 else ends[r_idx[0]])
    if 1 <= cache <= len(s_idx):
        done = sch.try_(localize_output, sch, block, ends[s_idx[cache - 1]]).value_or(False)
        if done and cache == len(s_idx) - 1:
            for row in levels[s_idx[-1]][:-1]:  # the register tile's rows
                sch.try_(sch.unroll, row)


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
