"""The ``(in, out)``-weight schedule of ``LowBatchGEMV``: ``Y[b, j] = X[b, k] . W[k, j]``.

The weight's contiguous axis is the output column ``j``, so the threads run along it (the
``GEMV`` reduction-strided schedule with a bucket of batch rows): a block of ``k_threads x
col_threads`` threads covers ``col_threads x lanes`` columns and ``bucket`` batch rows; thread
``(ty, tx)`` walks the rows ``k = ko * k_threads + ty`` of the weight, loads its vector of
``lanes`` columns of row ``k`` once (one 16-byte load; the threads of a warp read consecutive
vectors of one row: coalesced) and the ``bucket`` activations ``X[b, k]`` (one address per
warp: a broadcast), and accumulates ``bucket x lanes`` partial sums in registers. The
``k_threads`` partial sums of each output are combined across ``threadIdx.y`` through shared
memory, and the epilogue is spread over all threads, each element written once. Loops:
``bx (outer, bucket and column tiles) | ty tx | ko | (weight load) bi v``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...schedule import BlockRV, LoopRV, Schedule
from ..common import (
    attempt,
    block_node,
    fold_epilogue,
    localize_output,
    loop_extent,
    loops_below,
    writes_param,
)
from ._mm_common import halvings_and_double, knob
from .gemv import cache_vector, lanes_for

if TYPE_CHECKING:
    from ...schedule import ExprRV
    from .low_batch_gemv import LowBatchGEMVConfig


def thread_shape(cols: int, itemsize: int, cfg: LowBatchGEMVConfig) -> tuple[int, int, int]:
    """(lanes, column threads, reduction threads) for ``cols`` output columns: the widest
    vector dividing ``cols``, then column threads traded for reduction threads (same block
    size) until there are two column tiles per multiprocessor."""
    lanes = lanes_for(itemsize, cfg.vector_bytes)
    while cols % lanes:
        lanes //= 2
    tx_n = next(t for t in range(min(cfg.col_threads, cols // lanes), 0, -1)
                if (cols // lanes) % t == 0)  # fmt: skip
    ty_n = cfg.k_threads
    tiles = cols // (tx_n * lanes)
    while tiles < 2 * cfg.sm_count and tx_n > 8 and tx_n % 2 == 0:
        tx_n, ty_n, tiles = tx_n // 2, ty_n * 2, tiles * 2
    while ty_n > 1 and not fits_shared(ty_n, tx_n, lanes, cfg):
        ty_n //= 2
    return lanes, tx_n, ty_n


def fits_shared(ty: int, tx: int, lanes: int, cfg: LowBatchGEMVConfig) -> bool:
    """Whether the fp32 partial sums of ``ty`` reduction threads fit in shared memory, with
    the combined bucket x columns tile (read by a padded batch's epilogue)."""
    return (ty + 1) * cfg.bucket * tx * lanes * 4 <= cfg.shared_bytes


def columns_tile(
    sch: Schedule, main: BlockRV, nest: tuple[list[LoopRV], LoopRV, LoopRV, LoopRV],
    weight: str, cfg: LowBatchGEMVConfig, padded: bool, tunable: bool,
) -> None:  # fmt: skip
    """Schedule the einsum block ``main`` (module docstring); ``nest`` holds its loops by
    role: the outer ones, ``b``, ``j`` and ``k`` (the fused reduction, constant extent)."""
    outer, b, j, k = nest
    cols, k_ext = loop_extent(sch, j), loop_extent(sch, k)
    assert cols is not None  # _match checked it
    assert k_ext is not None
    itemsize = max(block_node(sch, main).reads[0].buffer.dtype.bits // 8, 1)
    lanes, tx_n, ty_n = thread_shape(cols, itemsize, cfg)
    fits = k_ext % ty_n == 0
    ty_k, wb_y = _reduction_threads(sch, (lanes, tx_n, ty_n), k_ext, cfg, tunable)
    bo, bi = sch.split(b, [None, cfg.bucket])
    jo, tx, v = sch.split(j, [None, tx_n, lanes])
    ko, ty = sch.split(k, [None, ty_k])
    sch.reorder(*outer, bo, jo, ty, tx, ko, bi, v)
    # Step 1. Per-thread partial sums of bucket x lanes outputs over rows ty, ty + k_threads...
    rf = sch.rfactor(ty, 0)
    rf_loops = sch.get_loops(rf)
    bx = sch.fuse(*rf_loops[: len(outer) + 2])
    ty, tx, ko = sch.get_loops(rf)[1:4]
    sch.bind(bx, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    sch.set_scope(rf, 0, "local")
    # Step 2. The weight's vector of row k loaded once for the whole bucket; the activations.
    if fits:
        cache_vector(sch, rf, weight, ko)
    _stage_activations(sch, rf, weight, ko, padded, fits)
    # Step 3. The partial sums through shared memory; combined and written by all threads.
    partial = block_node(sch, rf).writes[0].buffer.name
    reads = block_node(sch, main).reads
    staged = sch.cache_read(main, next(n for n, r in enumerate(reads)
                                       if r.buffer.name == partial), "shared")  # fmt: skip
    sch.reverse_compute_at(staged, tx)
    attempt(sch, sch.decompose_reduction, rf, ko)
    _combine(sch, main, bx, (wb_y, tx_n), padded)
    sch.annotate(bx, "pragma_auto_unroll_max_step", cfg.unroll)


def _reduction_threads(
    sch: Schedule, shape: tuple[int, int, int], k_ext: int, cfg: LowBatchGEMVConfig,
    tunable: bool,
) -> tuple[int | ExprRV, int]:  # fmt: skip
    """(threads along ``k``, sampled when ``tunable``; threads along ``y`` of the
    write-back). Every choice fits the block and its shared memory and divides a ``k`` it
    divided; the write-back's ``bucket x lanes`` outputs per column thread go on at most the
    fewest ``threadIdx.y`` any choice launches, an exact split: no guard."""
    lanes, tx_n, ty_n = shape
    fits = k_ext % ty_n == 0
    choices = halvings_and_double(ty_n, lambda c: c * tx_n <= 1024 and fits_shared(
        c, tx_n, lanes, cfg) and (not fits or k_ext % c == 0))  # fmt: skip
    ty_k = knob(sch, tunable, ty_n, choices)
    per_col = cfg.bucket * lanes
    fewest = min([ty_n, *choices]) if tunable else ty_n
    return ty_k, next(t for t in range(min(per_col, fewest), 0, -1) if per_col % t == 0)


def _combine(
    sch: Schedule, main: BlockRV, bx: LoopRV, threads: tuple[int, int], padded: bool
) -> None:
    """``main`` (the sum over ``threadIdx.y``'s partials) under ``bx``, its outputs spread
    over ``threads`` (y, x), and the epilogue after it: in registers where each thread's
    outputs are a box, through shared memory for a padded (guarded) batch."""
    sch.reverse_compute_at(main, bx)
    bi_c, c = sch.get_loops(main)[-3:-1]
    cx = _spread(sch, sch.fuse(bi_c, c), *threads)[1]
    if padded or not localize_output(sch, main, cx, copy_param=False):
        _shared_epilogue(sch, main, bx, *threads)


def _spread(sch: Schedule, loop: LoopRV, ty: int, tx: int) -> tuple[LoopRV, LoopRV]:
    """Split ``loop`` as ``[serial, ty, tx]`` and bind the two inner loops to the threads."""
    cy, cx = sch.split(loop, [None, ty, tx])[1:]
    sch.bind(cy, "threadIdx.y")
    sch.bind(cx, "threadIdx.x")
    return cy, cx


def _stage_activations(
    sch: Schedule, rf: BlockRV, weight: str, ko: LoopRV, padded: bool, fits: bool
) -> None:
    """The bucket's activations of row ``k`` into registers under ``ko`` (the zero-filled
    padded copy inlined into guarded loads); left in place when that fails."""
    node = block_node(sch, rf)
    out = node.writes[0].buffer.name
    index = next(n for n, r in enumerate(node.reads) if r.buffer.name not in (weight, out))

    def stage() -> None:
        cache = sch.cache_read(rf, index, "local")
        sch.compute_at(cache, ko)
        if padded:
            for producer in sch.get_producers(cache):
                sch.compute_inline(producer)

    if padded or fits:
        attempt(sch, stage)


def _shared_epilogue(sch: Schedule, main: BlockRV, bx: LoopRV, ty: int, tx: int) -> None:
    """The combined sums in shared memory, read after a barrier by the epilogue spread over
    the block's threads (a guarded write-back of padded rows); unchanged when it fails."""
    if writes_param(sch, main):
        return

    def move() -> None:
        for block in fold_epilogue(sch, main):
            sch.reverse_compute_at(block, bx)
            inner = loops_below(sch, block, bx)
            _spread(sch, sch.fuse(*inner) if len(inner) > 1 else inner[0], ty, tx)
        sch.set_scope(main, 0, "shared")

    attempt(sch, move)
