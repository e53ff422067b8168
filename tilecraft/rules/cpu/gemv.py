"""CPU ``GEMV``: matrix-vector products, memory-bound, scheduled to stream the matrix once.

Takes a function with exactly one reduction block that
:func:`~tilecraft.schedule.analysis.detect_gemv` calls a GEMV (``y = W x``, batch-1
``linear``, batched GEMVs such as decode attention's ``q . K``), other blocks injective. Two
layouts of the matrix, by which of its axes is contiguous:

* **rows contiguous along K** (``W[j, k]``, the ``(out, in)`` weight): each row is a dot
  product. ``k`` is split by a vector width ``L`` and factored (``rfactor``) into ``L``
  partial sums per row, kept in a local ``R x L`` tile: loops ``[batch, rows_o] (parallel)
  | k_o | rows_i (unrolled) k_i (vectorized)``, then the ``L`` partial sums are added per row
  (and the epilogue applied) under ``rows_o``;
* **columns contiguous** (``W[k, j]``, the transposed weight): ``j`` is the vector axis.
  When ``K`` splits evenly into one chunk per core, each thread streams a contiguous block
  of whole rows into its own partial output row (``rfactor`` over the chunks): ``k_p
  (parallel) | k_o | j_o | k_i (unrolled, ``stream_rows``) j_i (vectorized)``, the partial
  rows then added (and the epilogue applied) after. Column tiles reading a few hundred
  bytes of each row, 16 KiB apart at 4096 columns, defeat the prefetcher (10.8 GB/s against
  25-28 streamed on one Zen 4 core, whose read bandwidth is about 31). Otherwise
  (batched, symbolic or uneven ``K``) a local ``nr``-wide accumulator per column tile:
  ``[batch, j_o] (parallel) | k | j_i (vectorized)``, written back with the epilogue under
  ``j_o``. When no tile of whole vectors divides the columns and a whole output row fits in
  ``row_bytes`` (half the L1 data cache), the tile is the whole row: a guard inside the
  vectorized loop costs 5-8x (1000 x 333 at one row: 390 us against 48, AVX-512, one
  thread) and the C compiler masks the row's tail itself.

Every element of the matrix is read once, at unit stride, by one thread. Extents that the
vector width or the row tile do not divide shrink the tile (down to 1 row, or no ``rfactor``
for a ``K`` no vector width divides): ``rfactor`` refuses a guarded block.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir import DataType, Expr, PrimFunc, Var
from ...schedule import BlockRV, LoopRV, Schedule
from ...schedule.analysis import (
    BlockInfo,
    GEMVInfo,
    IndexRole,
    detect_gemv,
    why_not_gemv,
)
from ...target import Target
from ..base import CPURule, Decline
from ..common import (
    const_int,
    fold_epilogue,
    localize_output,
    pick_tile,
    single_reduction,
    vectorize_innermost,
)


@dataclass(frozen=True)
class GEMVConfig:
    """Numbers of the CPU GEMV schedule for one target.

    Attributes
    ----------
    vector_bits
        Width of a SIMD register (``Target.simd_bits``).
    rows
        Rows per tile of the K-contiguous layout (independent accumulators).
    k_vectors
        SIMD vectors per row in the K-contiguous layout's partial sums.
    col_vectors
        SIMD vectors per register tile of the transposed layout.
    stream_rows
        Rows of the transposed layout each register tile of columns accumulates at once.
    num_cores
        Cores the parallel loop is spread over.
    row_bytes
        Largest output row of the transposed layout kept whole as one accumulator when no
        tile of whole vectors divides the columns.
    """

    vector_bits: int = 256
    rows: int = 8
    k_vectors: int = 1
    col_vectors: int = 2
    stream_rows: int = 8
    num_cores: int = 1
    row_bytes: int = 16384

    @staticmethod
    def for_target(target: Target) -> GEMVConfig:
        """The configuration for a CPU target."""
        bits = max(target.simd_bits, 128)
        return GEMVConfig(
            vector_bits=bits,
            num_cores=max(target.num_cores, 1),
            row_bytes=max(target.l1d_bytes // 2, 4096),
        )

    def lanes(self, dtype: DataType) -> int:
        """SIMD lanes of ``dtype`` (at least 1)."""
        return max(1, self.vector_bits // max(dtype.bits, 8))


class GEMV(CPURule):
    """Matrix-vector products in either matrix layout (module docstring).

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
        # Step 1. Find the one GEMV reduction block.
        sch = Schedule(func)
        found = _match(sch)
        if isinstance(found, Decline):
            return found
        main, gemv = found
        loops = {id(it.var): it.loop_rv for it in main.iters}
        doms = {id(it.var): it.dom for it in main.iters}
        # Step 2. Schedule by the matrix's contiguous axis.
        if gemv.matrix_k_contiguous:
            _rows_schedule(sch, main.block_rv, gemv, loops, doms, cfg)
        else:
            _columns_schedule(sch, main.block_rv, gemv, loops, doms, cfg)
        return sch


def _match(sch: Schedule) -> tuple[BlockInfo, GEMVInfo] | Decline:
    """The GEMV block, or why the rule does not apply."""
    found = single_reduction(sch)
    if isinstance(found, str):
        return Decline(found)
    main = found[0]
    gemv = detect_gemv(main)
    if gemv is None:
        return Decline(f"not a GEMV: {why_not_gemv(main)}")
    if not gemv.matrix_k_contiguous and _column_axis(gemv, {}) is None:
        return Decline("the matrix's innermost index is neither K nor an output column")
    return main, gemv


def _column_axis(gemv: GEMVInfo, doms: dict[int, int | Expr]) -> Var | None:
    """The matrix's innermost indexing iterator when it is a non-batch spatial one."""
    roles = gemv.matrix.roles
    for idx, role in zip(reversed(gemv.matrix.indices), reversed(roles), strict=True):
        if role is IndexRole.CONST:
            continue
        if role in (IndexRole.ROW, IndexRole.COL) and isinstance(idx, Var):
            return idx
        return None
    return None


def _spatial_groups(gemv: GEMVInfo, axis: Var) -> tuple[list[Var], list[Var]]:
    """(outer spatial iterators: batch then the matrix's others, the vector's unit ones)."""
    e = gemv.einsum
    mat_iters = e.i_iters if gemv.matrix is e.lhs else e.j_iters
    vec_iters = e.j_iters if gemv.matrix is e.lhs else e.i_iters
    outer = [*e.batch_iters, *(v for v in mat_iters if v is not axis)]
    return outer, list(vec_iters)


def _rows_schedule(
    sch: Schedule,
    main: BlockRV,
    gemv: GEMVInfo,
    loops: dict[int, LoopRV],
    doms: dict[int, int | Expr],
    cfg: GEMVConfig,
) -> None:
    """K-contiguous matrix: R rows x L partial sums per tile (module docstring)."""
    e = gemv.einsum
    mat_iters = list(e.i_iters if gemv.matrix is e.lhs else e.j_iters)
    row = next((v for v in reversed(mat_iters) if const_int(doms[id(v)]) != 1), mat_iters[-1])
    outer, unit = _spatial_groups(gemv, row)
    lanes = cfg.lanes(e.output.buffer.dtype)
    r_ext = const_int(doms[id(row)])
    rows = _divisor_at_most(r_ext, cfg.rows)
    r_o, r_i = sch.split(loops[id(row)], factors=[None, rows])
    k_loops = [loops[id(v)] for v in e.k_iters]
    # Step 2a. Factor the innermost K loop into vector partial sums.
    k_last = e.k_iters[-1]
    k_ext = const_int(doms[id(k_last)])
    width = _divisor_at_most(k_ext, lanes * cfg.k_vectors, step=lanes)
    width = width if width > 1 else _divisor_at_most(k_ext, lanes)
    ordered = [*(loops[id(v)] for v in outer), r_o, *(loops[id(v)] for v in unit)]
    if width > 1:
        k_o, k_i = sch.split(k_loops[-1], factors=[None, width])
        sch.reorder(*ordered, *k_loops[:-1], k_o, r_i, k_i)
        rf = sch.rfactor(k_i, -1)
        # Step 2b. Partial sums in a local R x L tile; their sum and the epilogue per tile.
        localize_output(sch, rf, r_o)
        localize_output(sch, main, r_o, copy_param=False)
        init = sch.try_(sch.decompose_reduction, rf, _first_loop_below(sch, rf, r_o)).value_or(None)
        if init is not None:
            vectorize_innermost(sch, init, r_o)
        rf_loops = sch.get_loops(rf)
        sch.unroll(rf_loops[-2])
        sch.vectorize(rf_loops[-1])
    else:
        sch.reorder(*ordered, *k_loops, r_i)
        localize_output(sch, main, r_o)
    # Step 2c. Vectorized epilogue; parallel over rows.
    _vectorize_epilogue(sch, main, r_o)
    _parallel(sch, [*(loops[id(v)] for v in outer), r_o])


def _columns_schedule(
    sch: Schedule,
    main: BlockRV,
    gemv: GEMVInfo,
    loops: dict[int, LoopRV],
    doms: dict[int, int | Expr],
    cfg: GEMVConfig,
) -> None:
    """Column-contiguous matrix: whole rows streamed per thread when K splits evenly, else an
    nr-wide vector accumulator per column tile."""
    e = gemv.einsum
    col = _column_axis(gemv, doms)
    assert col is not None  # _match checked it
    outer, unit = _spatial_groups(gemv, col)
    lanes = cfg.lanes(e.output.buffer.dtype)
    nr = _column_tile(const_int(doms[id(col)]), lanes, e.output.buffer.dtype, cfg)
    chunks = _k_chunks(gemv, doms, cfg)
    if not outer and chunks:
        k_loop = loops[id(e.k_iters[0])]
        _stream_rows(sch, main, loops[id(col)], k_loop, (chunks, cfg.stream_rows, nr))
        return
    c_o, c_i = sch.split(loops[id(col)], factors=[None, nr])
    k_loops = [loops[id(v)] for v in e.k_iters]
    outer_loops = [*(loops[id(v)] for v in outer), c_o]
    sch.reorder(*outer_loops, *(loops[id(v)] for v in unit), *k_loops, c_i)
    localize_output(sch, main, c_o)
    init = sch.try_(sch.decompose_reduction, main, k_loops[0]).value_or(None)
    if init is not None:
        vectorize_innermost(sch, init, c_o)
    sch.vectorize(c_i)
    _vectorize_epilogue(sch, main, c_o)
    _parallel(sch, outer_loops)


def _column_tile(extent: int | None, lanes: int, dtype: DataType, cfg: GEMVConfig) -> int:
    """Columns per accumulator tile: whole vectors dividing ``extent``, else the whole row
    when it fits ``cfg.row_bytes``, else a guarded tile (module docstring)."""
    nr = pick_tile(extent, lanes * cfg.col_vectors, lanes)
    if extent is None or extent % nr == 0:
        return nr
    return extent if extent * max(dtype.bits // 8, 1) <= cfg.row_bytes else nr


def _k_chunks(gemv: GEMVInfo, doms: dict[int, int | Expr], cfg: GEMVConfig) -> int:
    """Row chunks (one per core) for streaming, 0 when K does not split into them evenly."""
    if len(gemv.einsum.k_iters) != 1:
        return 0
    k_ext = const_int(doms[id(gemv.einsum.k_iters[0])])
    chunks = max(cfg.num_cores, 2)
    step = chunks * cfg.stream_rows
    return chunks if k_ext is not None and k_ext >= 4 * step and k_ext % step == 0 else 0


def _stream_rows(
    sch: Schedule, main: BlockRV, col: LoopRV, k: LoopRV, sizes: tuple[int, int, int]
) -> None:
    """Each thread sums a contiguous block of rows into its own partial row (``rfactor``),
    ``rows`` rows at a time per register tile of ``nr`` columns; the partial rows are added
    after. ``sizes`` is ``(chunks, rows, nr)``."""
    chunks, rows, nr = sizes
    k_p, k_r = sch.split(k, factors=[chunks, None])
    rf = sch.rfactor(k_p, 0)
    c_o, c_i = sch.split(col, factors=[None, nr])
    k_o, k_i = sch.split(k_r, factors=[None, rows])
    sch.reorder(k_p, k_o, c_o, k_i, c_i)
    init = sch.decompose_reduction(rf, k_o)
    vectorize_innermost(sch, init)
    sch.unroll(k_i)
    sch.vectorize(c_i)
    sch.parallel(k_p)
    # the partial rows' sum: chunks outside, columns inside and vectorized
    final_loops = sch.get_loops(main)
    sch.reorder(final_loops[-1], final_loops[-2])
    final_init = sch.decompose_reduction(main, final_loops[-1])
    vectorize_innermost(sch, final_init)
    sch.vectorize(final_loops[-2])
    for block in fold_epilogue(sch, main):
        vectorize_innermost(sch, block)


def _divisor_at_most(extent: int | None, most: int, step: int = 1) -> int:
    """The largest multiple of ``step`` up to ``most`` dividing ``extent`` (1: none; symbolic
    extents get 1, since the guard of a non-dividing split stops ``rfactor``)."""
    if extent is None:
        return 1
    for t in range(min(most, extent), 0, -1):
        if t % step == 0 and extent % t == 0:
            return t
    return 1


def _vectorize_epilogue(sch: Schedule, main: BlockRV, loop: LoopRV) -> None:
    """Vectorize the innermost loop of each block reading ``main``'s output under ``loop``."""
    under = {b.name for b in sch.get_child_blocks(loop)}
    for block in sch.get_consumers(main):
        if block.name in under:
            vectorize_innermost(sch, block, loop)


def _first_loop_below(sch: Schedule, block: BlockRV, below: LoopRV) -> LoopRV:
    """The first loop under ``below`` above ``block`` (the rf block's ``k_o``)."""
    loops = sch.get_loops(block)
    ids = [id(lp.var) for lp in loops]
    return loops[ids.index(id(below.var)) + 1]


def _parallel(sch: Schedule, outer: list[LoopRV]) -> None:
    fused = sch.fuse(*outer) if len(outer) > 1 else outer[0]
    sch.parallel(fused)
