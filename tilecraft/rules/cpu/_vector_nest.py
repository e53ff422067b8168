"""Vectorized, parallel loop nests of one block: the building blocks of the CPU rules.

Two entry points, each working on the loops of one block that it is given (all its loops for a
block at the root, or the loops under a shared row loop after ``compute_at``):

* :func:`schedule_spatial`: a block without reduction. The innermost loop is vectorized
  whole (the C compiler strip-mines it, so odd and symbolic extents need no guard); at the
  root the outer loops are fused and run in parallel, and a block left with a single loop
  (an elementwise block fuses all its loops into one) is cut into parallel chunks of a few
  vectors. A transposed access (the input's contiguous axis is not the output's) is cut
  into blocks of tiles on both axes so each tile's reads and writes stay in the L1 cache.
* :func:`schedule_reduction`: a reduction block, in the first of three forms that applies:

  A. reduce axes innermost in the input and a reduction length with a divisor of vector
     size: split the (fused) reduce loop by ``w`` lanes, ``rfactor`` the inner part into a
     ``w``-wide partial result whose lane loop is spatial and vectorized, fold the lanes
     afterwards (a plain loop: see :func:`_form_a`);
  B. otherwise, when the output's contiguous axis is contiguous in an input: vectorize that
     spatial axis, with the reduce loops outside the lane loop (``out[v] += x[k, v]``);
  C. otherwise a scalar reduction (spatial loops outside, parallel at the root).

Every step runs through ``Schedule.try_`` as one transaction per form, so a form that does
not fit leaves the schedule as it was and the next one is tried; nothing here raises.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...ir import Block, BufferStore, IntImm, IterKind, Var, collect_vars
from ...schedule import BlockRV, LoopRV, Schedule
from ...schedule.analysis import ReductionInfo, detect_reduction, dominant_read, read_accesses
from ..common import (
    block_node,
    iter_var_of_loop,
    loop_extent,
    loop_kinds,
    product,
    store_dtype,
)
from ._vector_config import VectorConfig


def vector_factor(extent: int | None, width: int) -> int | None:
    """The split factor cutting a loop of ``extent`` into vectors of about ``width``.

    None when the loop is no longer than ``width`` (it is one vector). Else ``width`` when it
    divides the extent (or the extent is symbolic), else the largest multiple of 4 from
    ``width / 2`` up that divides it, else ``width`` with a guard on the last vector.
    """
    if extent is not None and extent <= width:
        return None
    if extent is None or extent % width == 0:
        return width
    return next((w for w in range(width - 4, width // 2 - 1, -4) if extent % w == 0), width)


def split_for_vector(
    sch: Schedule, loop: LoopRV, width: int
) -> tuple[LoopRV | None, LoopRV | None]:
    """Split ``loop`` into (outer, vector) parts of about ``width``; either may be None.

    A loop of at most ``width`` iterations is one vector (no outer part); a loop of one
    iteration, or one whose split fails, has no vector part.
    """
    ext = loop_extent(sch, loop)
    if ext is not None and ext < 2:
        return loop, None
    factor = vector_factor(ext, width)
    if factor is None:
        return None, loop
    parts = sch.try_(sch.split, loop, [None, factor]).value_or(None)
    if parts is None:
        return loop, None
    return parts[0], parts[1]


def parallelize(
    sch: Schedule, cfg: VectorConfig, loops: Sequence[LoopRV], work: int | None
) -> LoopRV | None:
    """Fuse adjacent outer ``loops`` into one and run it in parallel when worth it.

    Returns the fused loop (the row loop later stages attach to), or None without loops.
    """
    if not loops:
        return None
    fused = loops[0] if len(loops) == 1 else sch.try_(sch.fuse, *loops).value_or(None)
    if fused is None:  # not adjacent: parallel over the outermost only
        if cfg.worth_parallel(work, loop_extent(sch, loops[0])):
            sch.try_(sch.parallel, loops[0])
        return loops[-1]
    if cfg.worth_parallel(work, loop_extent(sch, fused)):
        sch.try_(sch.parallel, fused)
    return fused


def _lanes_of(cfg: VectorConfig, block: Block | None) -> int:
    dtype = store_dtype(block) if block is not None else None
    return cfg.lanes(dtype) if dtype is not None else 4


def _work(sch: Schedule, loops: Sequence[LoopRV]) -> int | None:
    return product([loop_extent(sch, lp) for lp in loops])


# -- spatial blocks ---------------------------------------------------------------------------
def transposed_pair(
    sch: Schedule, block: BlockRV, node: Block, loops: Sequence[LoopRV]
) -> tuple[LoopRV, LoopRV] | None:
    """(loop of the input's contiguous axis, innermost loop) when the two differ, else None.

    The output's innermost index must be the iterator of the innermost loop, and the dominant
    read's last used dimension exactly another iterator bound to one of ``loops``.
    """
    store = node.body
    read = dominant_read(node)
    if not isinstance(store, BufferStore) or not store.indices or read is None:
        return None
    used = [r for r in read.region.region if not isinstance(r.min, IntImm)]
    if not used or not isinstance(used[-1].min, Var):
        return None
    read_inner, out_inner = used[-1].min, store.indices[-1]
    if read_inner is out_inner or not isinstance(out_inner, Var):
        return None
    by_iter = {id(iter_var_of_loop(sch, block, lp)): lp for lp in loops}
    a, b = by_iter.get(id(read_inner)), by_iter.get(id(out_inner))
    if a is None or b is None or b is not loops[-1]:
        return None
    return a, b


def _tile_transpose(
    sch: Schedule,
    cfg: VectorConfig,
    loops: Sequence[LoopRV],
    pair: tuple[LoopRV, LoopRV],
    tiles: tuple[int, int],
    work: int | None,
) -> list[LoopRV | None]:
    """Tile the two axes of a transposed access (one transaction).

    ``tiles`` is (tile, block): each axis is cut into blocks of ``block`` elements made of
    tiles of ``tile``; blocks outermost (parallel), then the tiles of a block, then one tile
    with the output's axis vectorized. A block's rows stay within the TLB's and L2's reach,
    a tile's within L1.
    """
    a, b = pair
    pos = [lp.var for lp in loops].index(a.var)
    head, mid = list(loops[:pos]), list(loops[pos + 1 : -1])
    a_parts, b_parts = _tile_axis(sch, a, *tiles), _tile_axis(sch, b, *tiles)
    a_out, b_out = a_parts[:1] if len(a_parts) > 1 else [], b_parts[:1] if len(b_parts) > 1 else []
    order = [*a_out, *mid, *b_out, *a_parts[1:-1], *b_parts[1:-1], a_parts[-1], b_parts[-1]]
    sch.reorder(*order)
    sch.vectorize(b_parts[-1])
    return [parallelize(sch, cfg, [*head, *a_out, *mid, *b_out], work)]


def _tile_axis(sch: Schedule, loop: LoopRV, tile: int, block: int) -> list[LoopRV]:
    """``loop`` cut into blocks of tiles, outermost first; the last is the loop in a tile."""
    ext = loop_extent(sch, loop)
    if ext is not None and ext <= tile:
        return [loop]
    if block <= tile or (ext is not None and ext <= block):
        return sch.split(loop, [None, tile])
    return sch.split(loop, [None, block // tile, tile])


def schedule_spatial(
    sch: Schedule,
    cfg: VectorConfig,
    block: BlockRV,
    loops: Sequence[LoopRV],
    *,
    standalone: bool,
    elementwise: bool = False,
    transpose_tiles: tuple[int, int] = (0, 0),
) -> LoopRV | None:
    """Vectorize a spatial block's innermost loop; at the root, parallel its outer loops.

    Parameters
    ----------
    sch, cfg
        The schedule and the rule's numbers.
    block, loops
        The block and the loops of it to arrange, outermost first (all spatial).
    standalone
        Whether ``loops`` are the block's whole nest at the root (then the outer loops are
        fused and made parallel, and the returned loop is that fused loop).
    elementwise
        Whether every access uses the output's indices: all loops fuse into one.
    transpose_tiles
        (tile, block) edges for transposed accesses (tile 0: no tiling).

    Returns
    -------
    LoopRV or None
        The fused outer loop at the root (None inside a row loop or without outer loops).
    """
    node = block_node(sch, block)
    loops = list(loops)
    if not loops:
        return None
    lanes, work = _lanes_of(cfg, node), _work(sch, loops)
    if standalone and transpose_tiles[0] > 1 and len(loops) > 1:
        pair = transposed_pair(sch, block, node, loops)
        if pair is not None:
            done = sch.try_(_tile_transpose, sch, cfg, loops, pair, transpose_tiles, work).value_or(
                None
            )
            if done is not None:
                return done[0]
    if elementwise and len(loops) > 1:
        fused = sch.try_(sch.fuse, *loops).value_or(None)
        loops = [fused] if fused is not None else loops
    outer = _vectorize_innermost(sch, loops, lanes * cfg.chunk_vectors if standalone else 0)
    if not standalone:
        return None
    return parallelize(sch, cfg, loops[:-1] + ([outer] if outer is not None else []), work)


def _vectorize_innermost(sch: Schedule, loops: Sequence[LoopRV], chunk: int) -> LoopRV | None:
    """Vectorize the innermost of ``loops``; returns what is left of it outside the vector.

    With ``chunk`` and a single loop, the loop is first cut into chunks of about ``chunk``
    elements (the outer part, returned, can run in parallel). Otherwise the whole loop is
    vectorized (the compiler strip-mines it: no guard, no split).
    """
    if chunk and len(loops) == 1:
        outer, inner = split_for_vector(sch, loops[0], chunk)
    else:
        outer, inner = None, loops[-1]
        if loop_extent(sch, inner) == 1:
            outer, inner = inner, None
    if inner is not None:
        sch.try_(sch.vectorize, inner)
    return outer


# -- reduction blocks -------------------------------------------------------------------------
def partial_width(extent: int | None, lanes: int, vectors: int) -> int | None:
    """Width of the partial result of form A: a divisor of ``extent``, a multiple of 4.

    Prefers ``vectors * lanes``, then ``lanes``, then the largest multiple of 4 up to twice
    ``vectors * lanes`` dividing the extent; None when there is none. A symbolic extent gets
    ``vectors * lanes``: the split's guard becomes a select of the identity in the partial
    sums (``rfactor``), where a scalar chain through memory ran a softmax row of symbolic
    length 13x slower than its static compile.
    """
    top = max(lanes, vectors * lanes)
    if extent is None:
        return top
    if extent < 4:
        return None
    for w in (top, lanes):
        if extent % w == 0:
            return w
    return next((w for w in range(2 * top, 3, -4) if extent % w == 0), None)


def _form_a(
    sch: Schedule,
    cfg: VectorConfig,
    block: BlockRV,
    groups: tuple[list[LoopRV], list[LoopRV]],
    info: ReductionInfo,
    width: int,
) -> list[LoopRV | None]:
    """Form A (module docstring), one transaction; returns [the spatial loop or None]."""
    spatial, reduce = groups
    if spatial:
        sch.reorder(*spatial, *reduce)
    s = spatial[0] if len(spatial) == 1 else (sch.fuse(*spatial) if spatial else None)
    r = reduce[0] if len(reduce) == 1 else sch.fuse(*reduce)
    _, ri = sch.split(r, [None, width])
    rf = sch.rfactor(ri, factor_axis=len(info.indices))
    # the rf nest keeps the original loops; the fold gets new ones: put the rf under the fold's
    row = sch.get_loops(block)[-2] if s is not None else None
    if row is not None:
        sch.compute_at(rf, row)
    rf_init = sch.decompose_reduction(rf, _first_reduce_loop(sch, rf))
    sch.vectorize(sch.get_loops(rf)[-1])
    sch.vectorize(sch.get_loops(rf_init)[-1])
    fold = sch.get_loops(block)[-1]
    sch.try_(sch.decompose_reduction, block, fold)
    # the fold stays a plain loop (gcc unrolls a short one by itself): a ``#pragma GCC
    # unroll`` in the source turns off if-conversion for all of it (runtime.compiler's
    # UNROLL_GUARD_FLAGS), and a max reduction's NaN-propagating select then runs one
    # element at a time (softmax 4096 x 1024, AVX-512: 3.4 GB/s with it, 5.1 without)
    return [row]


def reduce_contiguous(node: Block) -> bool:
    """Whether every read using a reduce iterator has them in its innermost dimensions only.

    Then form A reads each input contiguously along the reduction (``x[i, k]``, ``W[j, k]``);
    a matmul's ``B[k, j]`` is not, and form B (vectorize ``j``) suits it better.
    """
    iters = {id(iv.var) for iv in node.iter_vars}
    reduce = {id(iv.var) for iv in node.iter_vars if iv.kind is IterKind.REDUCE}
    found = False
    for acc in read_accesses(node):
        dims = [{id(v) for v in collect_vars(r.min)} & iters for r in acc.region.region]
        dims = [d for d in dims if d]
        uses = [bool(d & reduce) for d in dims]
        if not any(uses):
            continue
        found = True
        if not all(d <= reduce for d in dims[uses.index(True) :]):
            return False
    return found


def _first_reduce_loop(sch: Schedule, block: BlockRV) -> LoopRV:
    """The outermost loop of ``block`` binding a reduce iterator (else its innermost loop:
    ``compute_at`` drops a reduce loop of one iteration)."""
    loops = sch.get_loops(block)
    kinds = loop_kinds(sch, block, loops)
    return next((lp for lp, k in zip(loops, kinds, strict=True) if IterKind.REDUCE in k), loops[-1])


def vector_loop(
    sch: Schedule, block: BlockRV, node: Block, info: ReductionInfo, spatial: Sequence[LoopRV]
) -> LoopRV | None:
    """Form B's lane loop: the loop of the output's last index when a reduced input is
    contiguous along it (its last used dimension reads that iterator, possibly with reduce
    iterators: ``x[k, v]``, a pooling window's ``x[v * 2 + r]``)."""
    if not info.indices or not isinstance(info.indices[-1], Var):
        return None
    last = info.indices[-1]
    for acc in read_accesses(node):
        if acc.region.buffer is info.buffer or not any(
            any(v is r for r in info.reduce_iters) for v in acc.iters
        ):  # the accumulator itself, or a value broadcast along the reduction
            continue
        used = [r for r in acc.region.region if not isinstance(r.min, IntImm)]
        if used and any(v is last for v in collect_vars(used[-1].min)):
            break
    else:
        return None
    return next((lp for lp in spatial if iter_var_of_loop(sch, block, lp) is last), None)


def _form_b(
    sch: Schedule,
    block: BlockRV,
    groups: tuple[list[LoopRV], list[LoopRV]],
    vec: LoopRV,
    width: int,
) -> list[LoopRV]:
    """Form B (module docstring), one transaction; returns the loops outside the reduction."""
    spatial, reduce = groups
    others = [lp for lp in spatial if lp.var is not vec.var]
    factor = vector_factor(loop_extent(sch, vec), width)
    heads, vi = list(others), vec
    if factor is not None:
        vo, vi = sch.split(vec, [None, factor])
        heads.append(vo)
    sch.reorder(*heads, *reduce, vi)
    # a guarded last vector keeps the init inside (decompose_reduction refuses the guard)
    init = sch.try_(sch.decompose_reduction, block, reduce[0]).value_or(None)
    sch.vectorize(vi)
    if init is not None:
        sch.vectorize(sch.get_loops(init)[-1])
    return heads


def _pure_groups(
    sch: Schedule, block: BlockRV, loops: Sequence[LoopRV]
) -> tuple[list[LoopRV], list[LoopRV]] | None:
    """Loops binding only spatial / only reduce iterators; None when one mixes or binds none."""
    spatial: list[LoopRV] = []
    reduce: list[LoopRV] = []
    for lp, kinds in zip(loops, loop_kinds(sch, block, loops), strict=True):
        if kinds == {IterKind.SPATIAL}:
            spatial.append(lp)
        elif kinds == {IterKind.REDUCE}:
            reduce.append(lp)
        else:
            return None
    return spatial, reduce


def schedule_reduction(
    sch: Schedule,
    cfg: VectorConfig,
    block: BlockRV,
    loops: Sequence[LoopRV],
    *,
    standalone: bool,
) -> LoopRV | None:
    """Vectorize a reduction block (forms A, B, C of the module docstring).

    Parameters
    ----------
    sch, cfg
        The schedule and the rule's numbers.
    block, loops
        The reduction block and the loops of it to arrange, outermost first.
    standalone
        Whether ``loops`` are the block's whole nest at the root: its outer spatial loops are
        then fused and made parallel when there is enough work.

    Returns
    -------
    LoopRV or None
        The loop over the block's spatial (row) elements that later stages can be attached
        to with ``reverse_compute_at``; None when there is none.
    """
    node = block_node(sch, block)
    info = detect_reduction(node)
    groups = _pure_groups(sch, block, loops) if info is not None else None
    if info is None or groups is None or not groups[1]:
        return _serial(sch, cfg, block, loops, standalone)
    spatial, reduce = groups
    lanes, work = cfg.lanes(info.buffer.dtype), _work(sch, loops)
    width = partial_width(_work(sch, reduce), lanes, cfg.reduce_vectors)
    if width is not None and reduce_contiguous(node):
        done = sch.try_(_form_a, sch, cfg, block, groups, info, width).value_or(None)
        if done is not None:
            return _finish(sch, cfg, done[0], work, standalone)
    vec = vector_loop(sch, block, node, info, spatial)
    if vec is not None and loop_extent(sch, vec) != 1:
        heads = sch.try_(_form_b, sch, block, groups, vec, lanes * cfg.reduce_vectors).value_or(
            None
        )
        if heads is not None:
            if standalone:
                return parallelize(sch, cfg, heads, work)
            return heads[-1] if heads else None
    if spatial:
        sch.try_(sch.reorder, *spatial, *reduce)
    return _serial(sch, cfg, block, sch.get_loops(block)[-len(loops) :], standalone)


def parallel_outer(
    sch: Schedule, cfg: VectorConfig, block: BlockRV, loops: Sequence[LoopRV]
) -> LoopRV | None:
    """Fuse the leading loops of ``block`` that bind only spatial iterators; run them parallel."""
    return _serial(sch, cfg, block, loops, True)


def _finish(
    sch: Schedule, cfg: VectorConfig, row: LoopRV | None, work: int | None, standalone: bool
) -> LoopRV | None:
    if standalone and row is not None and cfg.worth_parallel(work, loop_extent(sch, row)):
        sch.try_(sch.parallel, row)
    return row


def _serial(
    sch: Schedule, cfg: VectorConfig, block: BlockRV, loops: Sequence[LoopRV], standalone: bool
) -> LoopRV | None:
    """Form C: leave the reduction scalar; fuse and parallelize its leading spatial loops."""
    lead: list[LoopRV] = []
    for lp, kinds in zip(loops, loop_kinds(sch, block, loops), strict=True):
        if kinds != {IterKind.SPATIAL}:
            break
        lead.append(lp)
    if not lead:
        return None
    if not standalone:
        return lead[-1] if len(lead) == 1 else sch.try_(sch.fuse, *lead).value_or(None)
    return parallelize(sch, cfg, lead, _work(sch, loops))
