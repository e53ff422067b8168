"""GPU ``GEMV``: matrix-vector products (decode projections, batched ``q . K``), memory-bound,
scheduled so each element of the matrix is read once, by one thread, in vector loads.

Takes a function with exactly one reduction block that
:func:`~tilecraft.schedule.analysis.detect_gemv` calls a GEMV, other blocks injective (the
epilogue: bias, activation, cast). Two layouts of the matrix, by its contiguous axis:

* **reduction contiguous** (``W[j, k]``, the ``(out, in)`` weight): a block of ``threads``
  threads computes ``rows`` rows; each thread walks ``k`` in vector chunks (one vector load of
  the vector operand per chunk, of the matrix per row and chunk) into per-thread partial sums
  (``rfactor`` over the thread axis, in registers), combined by a cross-thread reduction
  (warp shuffles, then shared memory across warps). Thread ``r`` applies the epilogue to row
  ``r``: each output element is written once. Loops: ``bx (outer iterators and row tiles) |
  tx | ko | ri kv``;
* **reduction strided** (``W[k, j]``, the ``(in, out)`` weight, or ``attn . V``): a block of
  ``k_threads x col_threads`` threads covers ``col_threads x lanes`` columns; thread ``(ty,
  tx)`` accumulates its vector of columns over the rows ``k = ko * k_threads + ty`` (the
  threads of a warp read consecutive vectors of one row: coalesced), and the ``k_threads``
  partial sums of each column are combined across ``threadIdx.y`` (through shared memory);
  the result, in shared memory, is read by the epilogue spread over all threads, each element
  written once.

The numbers are in :class:`GEMVConfig`; ``tunable=True`` samples ``rows`` (reduction-contiguous
layout) and ``k_threads`` (strided layout) with ``sample_categorical``. Reductions that the
thread tile does not divide are guarded (a guarded contribution adds zero; those loads are
scalar, since a guarded vector load is not yet predicated by the code generator); row counts
that ``rows`` does not divide take fewer rows per block (one for a symbolic count); a column
count that no column tile divides (or a symbolic one) is declined.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir import Expr, PrimFunc, Var
from ...schedule import BlockRV, LoopRV, Schedule
from ...schedule.analysis import GEMVInfo, IndexRole, detect_gemv, why_not_gemv
from ...target import Target
from ..base import Decline, GPURule
from ..common import (
    attempt,
    block_node,
    const_int,
    fold_epilogue,
    localize_output,
    loop_extent,
    loops_below,
    product,
    writes_param,
)
from ._mm_common import (
    bind_unbound_roots,
    float_dtypes,
    gpu_facts,
    halvings_and_double,
    knob,
    match_single_reduction,
)


@dataclass(frozen=True)
class GEMVConfig:
    """Numbers of the GPU GEMV schedule for one target.

    Attributes
    ----------
    threads
        Threads per block along the reduction (reduction-contiguous layout).
    rows
        Rows per block (reduction-contiguous layout).
    vector_bytes
        Widest load (16 bytes).
    col_threads, k_threads
        Threads per block along the columns and along the reduction (strided layout).
    unroll
        ``pragma_auto_unroll_max_step`` of the inner loops.
    sm_count
        Multiprocessors: the strided layout trades column threads for reduction threads
        until there are two blocks per multiprocessor.
    """

    threads: int = 128
    rows: int = 4
    vector_bytes: int = 16
    col_threads: int = 32
    k_threads: int = 8
    unroll: int = 256
    sm_count: int = 1

    @staticmethod
    def for_target(target: Target) -> GEMVConfig:
        """The configuration for a CUDA target (the same tile for sm_70 ... sm_90)."""
        return GEMVConfig(sm_count=gpu_facts(target).sm_count)


@dataclass
class GEMVMatch:
    """The GEMV block, its classification, and its iterators by role (shared with
    ``LowBatchGEMV``)."""

    main: BlockRV
    gemv: GEMVInfo
    loops: dict[int, LoopRV]  # id(iterator var) -> loop
    doms: dict[int, int | Expr]
    axis: Var  # the matrix's innermost non-unit spatial iterator (row or column)
    outer: list[Var]  # batch, the matrix's other spatial iterators, the vector's unit ones

    def extent(self, var: Var) -> int | None:
        """The constant extent of an iterator; None when symbolic."""
        return const_int(self.doms[id(var)])


class GEMV(GPURule):
    """Matrix-vector products in either matrix layout on CUDA GPUs (module docstring).

    Parameters
    ----------
    config
        Fixed numbers; None: :meth:`GEMVConfig.for_target` of the target at apply time.
    """

    Config = GEMVConfig

    def schedule(
        self, func: PrimFunc, target: Target, cfg: GEMVConfig, tunable: bool
    ) -> Schedule | Decline:
        """Schedule ``func`` as a GEMV, or decline with the reason."""
        # Step 1. The GEMV block and the roles of its iterators.
        sch = Schedule(func)
        found = match_gemv(sch)
        if isinstance(found, Decline):
            return found
        # Step 2. Schedule by the matrix's contiguous axis.
        if found.gemv.matrix_k_contiguous:
            _rows_schedule(sch, found, cfg, tunable)
        else:
            why = _columns_schedule(sch, found, cfg, tunable)
            if why is not None:
                return why
        # Step 3. A kernel for what stayed outside (an epilogue that could not be fused).
        if not bind_unbound_roots(sch):
            return Decline("a block outside the GEMV nest could not be given its own kernel")
        return sch


def match_gemv(sch: Schedule) -> GEMVMatch | Decline:
    """The GEMV block of the function and its roles, or why it is not one."""
    why = float_dtypes(sch.func)
    if why is not None:
        return Decline(why)
    found = match_single_reduction(sch)
    if isinstance(found, Decline):
        return found
    info = found[0]
    gemv = detect_gemv(info)
    if gemv is None:
        return Decline(f"not a GEMV: {why_not_gemv(info)}")
    e = gemv.einsum
    doms = {id(it.var): it.dom for it in info.iters}
    mat_iters = e.i_iters if gemv.matrix is e.lhs else e.j_iters
    vec_iters = e.j_iters if gemv.matrix is e.lhs else e.i_iters
    axis = next((v for v in reversed(mat_iters) if const_int(doms[id(v)]) != 1), None)
    if axis is None:
        return Decline("the matrix has no non-unit spatial iterator")
    if not gemv.matrix_k_contiguous and _innermost(gemv) is not axis:
        return Decline("the matrix's innermost index is neither the reduction nor a column")
    outer = [*e.batch_iters, *(v for v in mat_iters if v is not axis), *vec_iters]
    loops = {id(it.var): it.loop_rv for it in info.iters}
    return GEMVMatch(info.block_rv, gemv, loops, doms, axis, outer)


def _innermost(gemv: GEMVInfo) -> Expr | None:
    """The matrix's innermost non-constant index."""
    pairs = zip(gemv.matrix.indices, gemv.matrix.roles, strict=True)
    found = [i for i, r in pairs if r is not IndexRole.CONST]
    return found[-1] if found else None


def lanes_for(itemsize: int, vector_bytes: int) -> int:
    """Elements of one vector load."""
    return max(vector_bytes // itemsize, 1)


def k_split(k_ext: int | None, threads: int, widest: int) -> tuple[int, int]:
    """(threads, lanes) whose product divides ``k_ext``, widest vector first, then most
    threads (down to a warp); ``(threads, 1)`` with a guard when none does."""
    if k_ext is not None:
        lanes = widest
        while lanes >= 1:
            t = threads
            while t >= 32:
                if k_ext % (t * lanes) == 0:
                    return t, lanes
                t //= 2
            lanes //= 2
    return threads, 1


def _divisor_at_most(ext: int | None, most: int) -> int:
    if ext is None:
        return 1
    return next(t for t in range(min(most, ext), 0, -1) if ext % t == 0)


def reduce_loop(sch: Schedule, m: GEMVMatch) -> LoopRV:
    """The reduction loops of the GEMV block, reordered innermost and fused into one."""
    k_loops = [m.loops[id(v)] for v in m.gemv.einsum.k_iters]
    if len(k_loops) == 1:
        return k_loops[0]
    spatial = [m.loops[id(v)] for v in (*m.outer, m.axis)]
    sch.reorder(*spatial, *k_loops)
    return sch.fuse(*k_loops)


def _rows_schedule(sch: Schedule, m: GEMVMatch, cfg: GEMVConfig, tunable: bool) -> None:
    """Reduction-contiguous matrix: ``rows`` rows per block (tunable: sampled among the
    divisors of the row count near it), threads along ``k``."""
    itemsize = max(m.gemv.matrix.buffer.dtype.bits // 8, 1)
    k = reduce_loop(sch, m)
    k_ext = loop_extent(sch, k)
    threads, lanes = k_split(k_ext, cfg.threads, lanes_for(itemsize, cfg.vector_bytes))
    guarded = k_ext is None or k_ext % (threads * lanes) != 0
    rows = _divisor_at_most(m.extent(m.axis), cfg.rows)
    n_rows = m.extent(m.axis) or 1
    ro, ri = sch.split(m.loops[id(m.axis)], [None, knob(sch, tunable, rows, halvings_and_double(
        rows, lambda c: n_rows % c == 0))])  # fmt: skip
    ko, tx, kv = sch.split(k, [None, threads, lanes])
    outer = [m.loops[id(v)] for v in m.outer]
    sch.reorder(*outer, ro, tx, ko, ri, kv)
    # Step 2a. Per-thread partial sums in registers: rfactor over the thread axis of k.
    rf = sch.rfactor(tx, 0)
    rf_loops = sch.get_loops(rf)
    n_out = len(outer) + 1
    bx = sch.fuse(*rf_loops[:n_out]) if n_out > 1 else rf_loops[0]
    tx, ko, ri = sch.get_loops(rf)[1:4]
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.set_scope(rf, 0, "local")
    # Step 2b. Vector loads through registers: a chunk of the vector per ko, of the matrix
    # per row and ko.
    if not guarded:
        vec, mat = m.gemv.vector.buffer.name, m.gemv.matrix.buffer.name
        for name, at in ((vec, ko), (mat, ri)):
            cache_vector(sch, rf, name, at)
    attempt(sch, sch.decompose_reduction, rf, ko)
    # Step 2c. The cross-thread reduction and the epilogue, row r by thread r.
    sch.reverse_compute_at(m.main, bx)
    sch.bind(sch.get_loops(m.main)[-1], "threadIdx.x")
    fuse_epilogue(sch, m.main, bx, threads)
    sch.annotate(bx, "pragma_auto_unroll_max_step", cfg.unroll)


def cache_vector(sch: Schedule, block: BlockRV, name: str, at: LoopRV) -> None:
    """Load ``block``'s read of buffer ``name`` into registers under ``at``, vectorized."""
    reads = block_node(sch, block).reads
    index = next(n for n, r in enumerate(reads) if r.buffer.name == name)
    cache = sch.cache_read(block, index, "local")
    sch.compute_at(cache, at)
    inner = loops_below(sch, cache, at)
    if inner:
        attempt(sch, sch.vectorize, inner[-1])


def fuse_epilogue(
    sch: Schedule, main: BlockRV, bx: LoopRV, threads: int, scope: str = "local"
) -> None:
    """Apply the epilogue after the cross-thread reduction, in the same block, each element
    written once: ``main``'s output becomes ``scope`` (``local``: every thread holds every
    result; ``shared``: written once, read after a barrier), the epilogue's loops under
    ``bx`` are fused and bound to ``threadIdx.x`` (split by ``threads`` when longer).
    Unchanged when it fails (the epilogue then gets its own kernel)."""
    if writes_param(sch, main):
        return

    def move() -> None:
        consumers = fold_epilogue(sch, main)
        for block in consumers:
            sch.reverse_compute_at(block, bx)
            loops = loops_below(sch, block, bx)
            fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
            ext = loop_extent(sch, fused)
            if ext is None or ext > threads:
                fused = sch.split(fused, [None, threads])[1]
            sch.bind(fused, "threadIdx.x")
        sch.set_scope(main, 0, scope)

    attempt(sch, move)


def _columns_schedule(
    sch: Schedule, m: GEMVMatch, cfg: GEMVConfig, tunable: bool
) -> Decline | None:
    """Reduction-strided matrix: threads along the columns and along ``k`` (tunable: the
    threads along ``k`` sampled, at least ``lanes`` so the write-back split holds)."""
    cols = m.extent(m.axis)
    if cols is None:
        return Decline("the matrix's columns are contiguous and their count is symbolic")
    itemsize = max(m.gemv.matrix.buffer.dtype.bits // 8, 1)
    lanes = lanes_for(itemsize, cfg.vector_bytes)
    while cols % lanes:
        lanes //= 2
    tx_n = _divisor_at_most(cols // lanes, cfg.col_threads)
    ty_n = cfg.k_threads
    blocks = cols // (tx_n * lanes) * (product([m.extent(v) for v in m.outer]) or 1)
    while blocks < 2 * cfg.sm_count and tx_n > 4 and tx_n % 2 == 0:
        tx_n, ty_n, blocks = tx_n // 2, ty_n * 2, blocks * 2  # more blocks, same threads
    k = reduce_loop(sch, m)
    k_ext = m_k_extent(m)
    fits = k_ext is not None and k_ext % ty_n == 0
    choices = halvings_and_double(ty_n, lambda c: c >= lanes and c * tx_n <= 1024
                                  and (not fits or k_ext % c == 0))  # fmt: skip
    ty_k = knob(sch, tunable, ty_n, choices if lanes <= ty_n else [ty_n])
    bx, tx, v = sch.split(m.loops[id(m.axis)], [None, tx_n, lanes])
    ko, ty = sch.split(k, [None, ty_k])
    outer = [m.loops[id(v_)] for v_ in m.outer]
    sch.reorder(*outer, bx, ty, tx, ko, v)
    # Step 2a. Per-thread partial sums of a vector of columns over rows ty, ty + k_threads...
    rf = sch.rfactor(ty, 0)
    rf_loops = sch.get_loops(rf)
    n_out = len(outer) + 1
    b = sch.fuse(*rf_loops[:n_out]) if n_out > 1 else rf_loops[0]
    ty, tx, ko = sch.get_loops(rf)[1:4]
    sch.bind(b, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    sch.set_scope(rf, 0, "local")
    if fits:
        cache_vector(sch, rf, m.gemv.matrix.buffer.name, ko)
    # Step 2b. The partial sums through shared memory; thread c adds those of column c.
    partial = block_node(sch, rf).writes[0].buffer.name
    reads = block_node(sch, m.main).reads
    staged = sch.cache_read(m.main, next(n for n, r in enumerate(reads)
                                         if r.buffer.name == partial), "shared")  # fmt: skip
    sch.reverse_compute_at(staged, tx)
    attempt(sch, sch.decompose_reduction, rf, ko)
    sch.reverse_compute_at(m.main, b)
    c = sch.get_loops(m.main)[-2]
    if lanes <= ty_n:  # tx_n * lanes columns on lanes x tx_n threads: an exact region
        cy, cx = sch.split(c, [lanes, tx_n])
    else:
        cy, cx = sch.split(c, [None, ty_k, tx_n])[1:]
    sch.bind(cy, "threadIdx.y")
    sch.bind(cx, "threadIdx.x")
    localize_output(sch, m.main, cx, copy_param=False)
    sch.annotate(b, "pragma_auto_unroll_max_step", cfg.unroll)
    return None


def m_k_extent(m: GEMVMatch) -> int | None:
    """The product of the reduction extents; None when one is symbolic."""
    total = 1
    for v in m.gemv.einsum.k_iters:
        ext = m.extent(v)
        if ext is None:
            return None
        total *= ext
    return total
