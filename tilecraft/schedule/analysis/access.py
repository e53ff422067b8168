"""Read accesses of a block and the *dominant* read.

The dominant read is the input that decides how a rule lays out loops (the matrix of a GEMV,
the tensor a reduction walks over). Precisely, among the regions in the block's ``T.reads``
of buffers the block does not also write (all its reads when every one is also written):

1. the region whose index expressions use the most distinct block iterators wins;
2. among those tied, when the footprint of every one is a constant, the largest footprint
   wins: the number of elements the region covers over the whole iteration domain (each
   dimension's extent relaxed over the iterators' domains, capped at the buffer's extent);
3. remaining ties go to the first in ``T.reads`` order.

So ``x[i, k]`` dominates ``max[i]`` in softmax, ``A[i, k]`` (64 x 32) dominates ``x[k]`` (32) in
a GEMV, and in ``take`` the gathered table ``x[0:8, j]`` (512 elements) dominates the
indices ``idx[i]`` (5).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...arith import eval_region
from ...errors import TilecraftError
from ...ir import Block, BufferRegion, Expr, IntImm, IterKind, Range, Var
from ._util import vars_of
from .block_info import BlockInfo, block_of


@dataclass(frozen=True, slots=True, eq=False)
class ReadAccess:
    """One entry of a block's ``T.reads``.

    Attributes
    ----------
    index
        Its position in the block's reads (what ``cache_read`` takes).
    region
        The region read.
    iters
        The block iterators its index expressions use, in declaration order.
    footprint
        Elements covered over the whole iteration domain; None when symbolic or unbounded.
    """

    index: int
    region: BufferRegion
    iters: tuple[Var, ...]
    footprint: int | None


def _dim_extent(r: Range, dom: dict[int, Range], block: Block) -> Expr | None:
    """The extent ``r`` covers over the block's iterators (fast paths first), or None."""
    if isinstance(r.extent, IntImm) and r.extent.value == 1:
        if isinstance(r.min, IntImm):
            return r.extent
        if isinstance(r.min, Var) and id(r.min) in dom:
            return dom[id(r.min)].extent
    elif isinstance(r.min, IntImm):
        return r.extent
    try:
        (relaxed,) = eval_region([r], {iv.var: iv.dom for iv in block.iter_vars})
    except TilecraftError:
        return None
    return relaxed.extent


def _footprint(region: BufferRegion, block: Block) -> int | None:
    dom = {id(iv.var): iv.dom for iv in block.iter_vars}
    total = 1
    for r, size in zip(region.region, region.buffer.shape, strict=True):
        ext = _dim_extent(r, dom, block)
        if not isinstance(ext, IntImm):
            return None
        value = ext.value if not isinstance(size, IntImm) else min(ext.value, size.value)
        total *= max(value, 0)
    return total


def region_iters(region: BufferRegion, block: Block) -> tuple[Var, ...]:
    """The block iterators the region's bounds use, in declaration order."""
    ivars = [iv.var for iv in block.iter_vars]
    used: list[Var] = []
    for r in region.region:
        for e in (r.min, r.extent):
            used.extend(v for v in vars_of(e, ivars) if all(v is not u for u in used))
    return tuple(v for v in ivars if any(v is u for u in used))


def read_accesses(block: Block | BlockInfo) -> list[ReadAccess]:
    """Every read region of ``block`` with its iterators and footprint, in ``T.reads`` order.

    Parameters
    ----------
    block
        A Block or a BlockInfo.

    Returns
    -------
    list of ReadAccess
        One per read region.
    """
    b = block_of(block, "read_accesses")
    return [ReadAccess(n, r, region_iters(r, b), _footprint(r, b)) for n, r in enumerate(b.reads)]


def dominant_read(block: Block | BlockInfo) -> ReadAccess | None:
    """The dominant read of ``block`` (defined in the module docstring).

    Parameters
    ----------
    block
        A Block or a BlockInfo.

    Returns
    -------
    ReadAccess or None
        None when the block reads nothing.
    """
    b = block_of(block, "dominant_read")
    reads = read_accesses(b)
    written = {id(w.buffer) for w in b.writes}
    pool = [r for r in reads if id(r.region.buffer) not in written] or reads
    if not pool:
        return None
    most = max(len(r.iters) for r in pool)
    tied = [r for r in pool if len(r.iters) == most]
    sizes = [r.footprint for r in tied]
    if len(tied) > 1 and all(s is not None for s in sizes):
        biggest = max(s for s in sizes if s is not None)
        tied = [r for r in tied if r.footprint == biggest]
    return tied[0]


def dims_iters(ranges: Sequence[Range], block: Block) -> list[tuple[Var, ...]]:
    """Per dimension, the block iterators its range uses (declaration order)."""
    ivars = [iv.var for iv in block.iter_vars]
    out: list[tuple[Var, ...]] = []
    for r in ranges:
        used = vars_of(r.min, ivars) + vars_of(r.extent, ivars)
        out.append(tuple(v for v in ivars if any(v is u for u in used)))
    return out


def reduce_iters_innermost(region: BufferRegion, block: Block) -> bool:
    """Whether the block's reduce iterators index the innermost dimensions of ``region``.

    Dimensions that use no iterator are ignored. True when the dimensions that do use one
    split into an outer part using no reduce iterator and a non-empty inner part using only
    reduce iterators, together all of them: ``x[i, k]`` and ``x[k0, k1]`` yes, ``x[k, i]`` and
    ``x[i, g * 4 + k]`` (a dimension mixing both kinds) no.
    """
    reduce = [iv.var for iv in block.iter_vars if iv.kind is IterKind.REDUCE]
    dims = [d for d in dims_iters(region.region, block) if d]
    if not reduce:
        return False

    def only_reduce(d: tuple[Var, ...]) -> bool:
        return all(any(v is r for r in reduce) for v in d)

    inner = 0
    while inner < len(dims) and only_reduce(dims[len(dims) - 1 - inner]):
        inner += 1
    outer, tail = dims[: len(dims) - inner], dims[len(dims) - inner :]
    if any(any(v is r for r in reduce) for d in outer for v in d):
        return False
    return all(any(r is v for d in tail for v in d) for r in reduce)
