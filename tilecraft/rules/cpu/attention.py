"""CPU ``Attention``: softmax attention fused per block of query rows, scores kept in cache.

Takes the function :func:`tilecraft.topi.attention` builds (the graph's ``attention`` op:
scores ``Q K^T``, scale and causal mask, row max, exponentials, row sum, the weighted sum of
``V`` and its normalization, with any layout copies around them), matched by dataflow
(:func:`._attention_match.match_attention`); declines anything else with the reason.

The schedule, per (batch..., head) and block of ``bq`` query rows (numbers from
:class:`AttentionConfig`, per target):

* ``K`` is packed once per head, transposed to ``(d, t)`` so the scores' inner loop reads
  keys at unit stride; a ``V`` copy (the graph's layout transpose) is made per head too,
  contiguous; a ``Q`` copy is inlined (the scores broadcast single elements of it);
* every stage runs under the query-block loop: the ``bq x T`` scores and exponentials stay
  in L2 (``bq`` is chosen so that two such row blocks fit in an eighth of it) and are never
  written to memory as a whole ``S x T`` matrix;
* scores: an ``mr x nr`` register tile (``nr`` two SIMD vectors along the keys, ``mr`` rows
  from the register count as the ``Matmul`` rule's), accumulated over the head dimension in
  a local tile, scaled and masked as it is written back. The tile's row loop is not marked
  ``unroll``: gcc unrolls it completely by itself, and a ``#pragma GCC unroll`` in the source
  turns if-conversion off for the whole kernel (``runtime.compiler.UNROLL_GUARD_FLAGS``),
  which leaves the row max and the causal mask's selects scalar (measured s = 1024, AVX-512,
  one thread: 107 ms with the pragma, 71 without; causal 212 and 80);
* the row max and the row sum are vectorized reductions (partial vectors + a fold), the
  exponentials a vectorized loop (``expf`` through the vector math library);
* weighted sum: an ``mr x nr`` tile over (rows, head dimension) accumulated over the keys,
  written back per tile; the normalization (and the layout transpose after it) runs per
  query block;
* causal: every stage over the keys runs only the key chunks (a scores tile's ``nr``
  keys) starting at or before the query block's last visible key (``Schedule.guard``, the
  test hoisted above the chunk's loops), as torch skips the blocks above the diagonal. The
  legalization weighs a hidden key exactly 0 in a stage of its own, so the skipped work
  changes no bit (:mod:`._causal_skip`); where the row reductions' chunks do not divide
  ``nr`` (a ragged key count) nothing is skipped;
* the (batch..., head) loops are fused and run in parallel on the target's cores.

Measured on an AVX-512 Xeon (2.5 GHz, one thread each side, a shared machine with load 3-5,
against ``torch.nn.functional.scaled_dot_product_attention`` in the same process,
``benchmarks/attention_bench.py``; 12 heads of 64), medians of time over torch's in three
runs: s = 128 0.82-0.89 (causal 0.60-0.68), s = 1024 0.89-0.95 (causal 0.70-0.80). The
schedule before skipping, alternated with these runs: causal 0.88 at s = 128, 1.12-1.44 at
s = 1024.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir import Expr, PrimFunc, Var
from ...schedule import BlockRV, IndexMap, LoopRV, Schedule, ScheduleError
from ...schedule.analysis import normalize_prim_func
from ...target import Target
from ..base import CPURule, Decline
from ..common import attempt, block_node, const_int, loop_extent
from ._attention_match import AttentionMatch, match_attention
from ._causal_skip import causal_shift, skip_hidden_keys
from ._matmul_parts import register_tile, vector_registers
from ._vector_config import VectorConfig
from ._vector_nest import schedule_reduction


@dataclass(frozen=True)
class AttentionConfig:
    """Numbers of the CPU attention schedule for one target.

    Attributes
    ----------
    vector_bits
        Width of a SIMD register (``Target.simd_bits``).
    registers
        SIMD registers (32 with AVX-512, else 16).
    nr_vectors
        Columns of both register tiles, in SIMD vectors.
    mr
        Rows of both register tiles: every register not holding the streamed vectors or
        the broadcast value accumulates (:func:`register_tile`).
    l2_bytes
        L2 size: the query block's score and exponential rows take at most an eighth.
    max_row_tiles
        Most register tiles of rows in one query block (short sequences).
    num_cores
        Cores the (batch, head) loop is spread over.
    skip_hidden
        With a causal mask, skip the key chunks hidden from a whole query block. The
        result is the same bits either way: False gives the same schedule without the
        guards, to check that and to measure what skipping saves.
    """

    vector_bits: int = 256
    registers: int = 16
    nr_vectors: int = 2
    mr: int = 6
    l2_bytes: int = 1024 * 1024
    max_row_tiles: int = 4
    num_cores: int = 1
    skip_hidden: bool = True

    @staticmethod
    def for_target(target: Target) -> AttentionConfig:
        """The configuration for a CPU target (vector width, registers, L2, cores)."""
        registers = vector_registers(target)
        return AttentionConfig(
            vector_bits=max(target.simd_bits, 128),
            registers=registers,
            nr_vectors=2,
            mr=register_tile(registers, 2),
            l2_bytes=target.l2_bytes or 1024 * 1024,
            max_row_tiles=4,
            num_cores=max(target.num_cores, 1),
        )

    def lanes(self, bits: int) -> int:
        """SIMD lanes of a ``bits``-wide element."""
        return max(1, self.vector_bits // max(bits, 8))

    def row_tile(self, rows: int | None) -> int:
        """Rows of the register tile: ``mr``, or the largest of ``mr .. mr/2`` dividing a
        static ``rows`` (no guarded tile then)."""
        if rows is None:
            return self.mr
        for r in range(self.mr, (self.mr + 1) // 2 - 1, -1):
            if r > 0 and rows % r == 0:
                return r
        return self.mr

    def column_tile(self, extent: int | None, lanes: int) -> int:
        """Columns of a register tile: ``nr_vectors`` vectors, or one when that divides a
        static ``extent`` and the full width does not (a head dimension of 16 on AVX-512)."""
        full = self.nr_vectors * lanes
        if extent is not None and extent % full != 0 and extent % lanes == 0:
            return lanes
        return full

    def query_block(self, mr: int, keys: int | None, elem_bytes: int, rows: int | None) -> int:
        """Query rows per block: a multiple of ``mr`` whose two ``rows x keys`` buffers fit
        in an eighth of the L2 (the head's packed K and V, ``2 x keys x dim``, share it), at
        least ``mr``, at most ``max_row_tiles`` tiles; among those the largest dividing a
        static ``rows`` (no guarded block), if any. Measured s = 1024, AVX-512 (1 MiB L2):
        16 rows a block ran 3-5% faster than 32."""
        fit = self.max_row_tiles
        if keys is not None:
            fit = min(fit, self.l2_bytes // 8 // max(2 * keys * elem_bytes, 1) // mr)
        tiles = max(1, fit)
        if rows is not None:
            tiles = next((t for t in range(tiles, 0, -1) if rows % (t * mr) == 0), tiles)
        return mr * tiles


class Attention(CPURule):
    """Fused softmax attention per query block (module docstring).

    Parameters
    ----------
    config
        Fixed numbers; None: :meth:`AttentionConfig.for_target` of the target at apply time.
    """

    Config = AttentionConfig

    def schedule(
        self, func: PrimFunc, target: Target, cfg: AttentionConfig, tunable: bool
    ) -> Schedule | Decline:
        """Schedule ``func`` as fused attention, or decline with the reason."""
        # Step 1. Match the stages by dataflow.
        sch = Schedule(func)
        match = match_attention(sch)
        if isinstance(match, str):
            return Decline(match)
        # Step 2. Tile and fuse; a primitive refusing any step declines the whole rule.
        done = sch.try_(_schedule, sch, match, cfg)
        if not done:
            assert done.error is not None
            return Decline(f"the schedule failed: {done.error.short}")
        return sch


def _schedule(sch: Schedule, m: AttentionMatch, cfg: AttentionConfig) -> None:
    """Every step of the schedule (module docstring), in order."""
    shift = causal_shift(sch, m)
    # Step 2a. Inline Q's copy and the normalization into the layout copy after it.
    _inline_operand_copy(sch, m, 0)
    anchor = sch.get_block(m.norm)
    after = sch.get_consumers(anchor)
    if len(after) == 1 and attempt(sch, sch.compute_inline, anchor):
        anchor = after[0]
    # Step 2b. Anchor loops: [batch..., rows, head dim]; rows split into query blocks.
    batch, rows, dim = _anchor_loops(sch, anchor, m)
    scores_out = block_node(sch, sch.get_block(m.scores)).writes[0].buffer
    elem_bits = scores_out.dtype.bits
    n_rows = loop_extent(sch, rows)
    mr = cfg.row_tile(n_rows)
    bq = cfg.query_block(mr, const_int(scores_out.shape[-1]), elem_bits // 8, n_rows)
    lanes = cfg.lanes(elem_bits)
    nr_keys = cfg.column_tile(const_int(scores_out.shape[-1]), lanes)
    nr_dim = cfg.column_tile(loop_extent(sch, dim), lanes)
    head = sch.fuse(*batch) if len(batch) > 1 else batch[0]
    q_block, _ = sch.split(rows, [None, bq])
    # Step 2c. Every stage under the query block; K packed (d, t) and V copied per head.
    wb = sch.get_block(m.weighted)
    write_back = sch.cache_write(wb, 0, "local")
    sch.compute_at(sch.get_block(m.row_sum), q_block)
    sch.compute_at(write_back, q_block)
    stages = (m.weighted, m.exp, *m.between[::-1], m.row_max, m.masked, m.scores)
    for name in stages:
        sch.compute_at(sch.get_block(name), q_block)
    _pack_key(sch, m, head, nr_keys)
    _stage_value(sch, m, head)
    _spread_rows(sch, m, elem_bits)
    # Step 3. Register tiles of the two matmuls; vectorized softmax stages.
    _register_tile(sch, sch.get_block(m.scores), sch.get_block(m.masked), mr, nr_keys)
    _weighted_tile(sch, wb, write_back, mr, nr_dim, nr_keys if shift is not None else None)
    vcfg = VectorConfig(vector_bits=cfg.vector_bits, num_cores=1)
    for name in (m.row_max, m.row_sum):
        block = sch.get_block(name)
        schedule_reduction(sch, vcfg, block, sch.get_loops(block)[-2:], standalone=False)
    for name in (*m.between, m.exp):
        keys = sch.get_loops(sch.get_block(name))[-1]
        if shift is not None:  # in chunks of a scores tile, each skipped as a whole
            keys = sch.split(keys, [None, nr_keys])[1]
        attempt(sch, sch.vectorize, keys)
    attempt(sch, sch.vectorize, sch.get_loops(anchor)[-1])
    # Step 3b. Causal: skip the key chunks the mask hides from the whole query block.
    if shift is not None and cfg.skip_hidden:
        attempt(sch, skip_hidden_keys, sch, m, q_block, bq, shift, nr_keys)
    # Step 4. The (batch, head) loop in parallel.
    if cfg.num_cores > 1:
        attempt(sch, sch.parallel, head)


def _spread_rows(sch: Schedule, m: AttentionMatch, elem_bits: int) -> None:
    """Rows of the query block's scores and exponentials one cache line further apart when
    their length is a multiple of 1 KiB: the register tiles read ``mr`` rows at once, which
    would otherwise share a few L1 sets (``storage_align``)."""
    keys = const_int(block_node(sch, sch.get_block(m.scores)).writes[0].buffer.shape[-1])
    line = 64 * 8 // max(elem_bits, 8)
    if keys is None or (keys * elem_bits // 8) % 1024:
        return
    for name in (m.masked, *m.between, m.exp):
        block = sch.get_block(name)
        rank = len(block_node(sch, block).writes[0].buffer.shape)
        attempt(sch, sch.storage_align, block, 0, rank - 2, keys, line)


def _inline_operand_copy(sch: Schedule, m: AttentionMatch, index: int) -> None:
    """Inline the copy block producing the scores' operand ``index``, if there is one."""
    scores = sch.get_block(m.scores)
    buf = block_node(sch, scores).reads[index].buffer
    for producer in sch.get_producers(scores):
        if block_node(sch, producer).writes[0].buffer is buf:
            attempt(sch, sch.compute_inline, producer)


def _anchor_loops(
    sch: Schedule, anchor: BlockRV, m: AttentionMatch
) -> tuple[list[LoopRV], LoopRV, LoopRV]:
    """The anchor's loops over (batch..., rows, head dim), reordered in that order."""
    infos = normalize_prim_func(sch)
    name = block_node(sch, anchor).name
    info = next((b for b in infos or [] if b.name == name), None)
    weighted = block_node(sch, sch.get_block(m.weighted)).writes[0].buffer
    region = next((r for r in info.reads if r.buffer is weighted), None) if info else None
    if info is None or region is None:
        raise ScheduleError("Attention", f'block "{name}" does not read the weighted sum')
    loops: list[LoopRV] = []
    for rng in region.region:
        it = next((i for i in info.iters if isinstance(rng.min, Var) and i.var is rng.min), None)
        if it is None:
            raise ScheduleError("Attention", f'block "{name}" reads the weighted sum reindexed')
        loops.append(it.loop_rv)
    if len(loops) != len(info.iters):
        raise ScheduleError("Attention", f'block "{name}" has loops beyond the weighted sum')
    sch.reorder(*loops)
    return loops[:-2], loops[-2], loops[-1]


def _pack_key(sch: Schedule, m: AttentionMatch, head: LoopRV, nr: int) -> None:
    """K per head packed in panels of ``nr`` keys, ``(t // nr, d, t % nr)``: a copy (the
    layout's, or a new one) under ``head``. A register tile reads its panel contiguously; a
    plain ``(d, t)`` transpose (the fallback for a ragged ``t``) puts the panel's rows
    ``4 t`` bytes apart, one L1 set for all of them at ``t = 1024``."""
    scores = sch.get_block(m.scores)
    copy = next(
        (p for p in sch.get_producers(scores) if block_node(sch, p).writes[0].buffer is m.key),
        None,
    )
    if copy is None:
        copy = sch.cache_read(scores, m.key_index, "global")
    sch.compute_at(copy, head)
    rank = m.rank

    def panels(*idx: Expr) -> tuple[Expr, ...]:
        t, d = idx[rank - 2], idx[rank - 1]
        return (*idx[: rank - 2], t // nr, d, t % nr)

    def transpose(*idx: Expr) -> tuple[Expr, ...]:
        return (*idx[: rank - 2], idx[rank - 1], idx[rank - 2])

    keys = const_int(m.key.shape[-2])
    if (
        keys is None
        or keys % nr
        or not attempt(
            sch, sch.transform_layout, copy, ("write", 0), IndexMap.from_func(panels, rank)
        )
    ):
        sch.transform_layout(copy, ("write", 0), IndexMap.from_func(transpose, rank))
        return
    # the copy's loops [t_o, d, t_i]: affine indices, a panel row written as one vector
    t, d = sch.get_loops(copy)[-2:]
    t_o, t_i = sch.split(t, [None, nr])
    sch.reorder(t_o, d, t_i)
    attempt(sch, sch.vectorize, t_i)


def _stage_value(sch: Schedule, m: AttentionMatch, head: LoopRV) -> None:
    """A V copy (the layout's transpose) made per head, contiguous; none for a parameter."""
    wb = sch.get_block(m.weighted)
    buf = block_node(sch, wb).reads[1].buffer
    for producer in sch.get_producers(wb):
        if block_node(sch, producer).writes[0].buffer is buf:
            sch.compute_at(producer, head)
            attempt(sch, sch.vectorize, sch.get_loops(producer)[-1])


def _register_tile(sch: Schedule, block: BlockRV, epilogue: BlockRV, mr: int, nr: int) -> None:
    """Scores: ``[rows_o, keys_o] [d] rows_i keys_i (vectorized)`` in a local tile written
    back through ``epilogue`` (scale and mask). ``rows_i`` is left to gcc, which unrolls it
    completely (see the module docstring)."""
    rows, cols, red = sch.get_loops(block)[-3:]
    r_o, r_i = sch.split(rows, [None, mr])
    c_o, c_i = sch.split(cols, [None, nr])
    sch.reorder(r_o, c_o, red, r_i, c_i)
    sch.reverse_compute_at(epilogue, c_o)
    sch.set_scope(block, 0, "local")
    sch.decompose_reduction(block, red)
    sch.vectorize(c_i)
    attempt(sch, sch.vectorize, sch.get_loops(epilogue)[-1])


def _weighted_tile(
    sch: Schedule, block: BlockRV, write_back: BlockRV, mr: int, nr: int, keys: int | None
) -> None:
    """Weighted sum: ``[rows_o, dim_o] [keys] rows_i dim_i (vectorized)`` in a local tile,
    ``write_back`` (its ``cache_write`` copy) moved under each tile; the keys in chunks of
    ``keys`` when given (a causal mask skips them whole, one test per chunk)."""
    rows, cols, red = sch.get_loops(block)[-3:]
    r_o, r_i = sch.split(rows, [None, mr])
    c_o, c_i = sch.split(cols, [None, nr])
    sch.reorder(r_o, c_o, red, r_i, c_i)
    sch.reverse_compute_at(write_back, c_o)
    if keys is not None:
        red = sch.split(red, [None, keys])[0]
    sch.decompose_reduction(block, red)
    sch.vectorize(c_i)
    attempt(sch, sch.vectorize, sch.get_loops(write_back)[-1])
