"""The copies of the CPU ``Matmul`` rule (package-private; see ``matmul.py``): the streamed
operand's packed panels, the zero-filled copies of padded operands, and the padded output's
write-back."""

from __future__ import annotations

import math

from ...codegen.c import STACK_LIMIT_BYTES
from ...ir import BufferStore, Expr, Select, collect_vars, uses_var
from ...schedule import BlockRV, IndexMap, LoopRV, Schedule
from ..common import (
    attempt,
    block_node,
    const_int,
    fold_epilogue,
    localize_output,
    loop_extent,
    loop_of_iter,
    loops_below,
    vectorize_innermost,
)
from ._matmul_parts import MatmulConfig, Plan, Tiles, reduce_extent


def pack_mode(plan: Plan, cfg: MatmulConfig, nr: int, m_blocked: bool) -> str:
    """Where the ``K x nr`` panels of V are packed: ``"in_place"`` (not packed), ``"tile"``
    (under ``n_o``) or ``"before"`` (all panels before the nest, or under the batch loop)."""
    k_ext = reduce_extent(plan)
    itemsize = max(plan.v.buffer.dtype.bits // 8, 1)
    small = k_ext is not None and k_ext * nr * itemsize <= STACK_LIMIT_BYTES
    contiguous = plan.v.indices[-1] is plan.n
    n_ext = const_int(plan.doms[id(plan.n)])
    in_l1 = (
        small
        and k_ext is not None
        and n_ext is not None
        and k_ext * n_ext * itemsize <= cfg.l1d_bytes // 2
    )
    if in_l1 and contiguous and id(plan.v.buffer) not in plan.stages:
        return "in_place"
    return "before" if small or m_blocked else "tile"


def pack(sch: Schedule, plan: Plan, tiles: Tiles, cfg: MatmulConfig) -> None:
    """Copy the ``K x nr`` panel of V read under ``n_o`` to a buffer with ``n`` innermost.

    A panel small enough for the stack (C codegen's ``STACK_LIMIT_BYTES``) is not packed under
    the tile: it fits in L1 unpacked, and GCC keeps the register tile in registers only while
    no other stack array is used in its loop (measured at 12 x 128x64x128: 38 GFLOP/s packed,
    104 unpacked). It is read in place when ``n`` is its innermost index and the whole operand
    fits in half the L1; otherwise it is copied once, before the nest (under the batch loop
    when there is one, :func:`_per_batch`), into contiguous ``K x nr`` panels (rows of a wide
    operand read in place are a multiple of 4 KiB apart and
    thrash one L1 set: AVX2 1024 x 256 x 1024, 20 GFLOP/s in place, 66 packed), which also
    transposes a strided operand the micro-kernel would gather along a whole row (a key
    matrix ``K[j, k]`` of attention scores; the TinyLlama prefill's, 32 x 128 x 128 x 64:
    250 ms gathered, 1 ms transposed). A conv's staging block, which must run,
    also fills its whole im2col buffer before the nest. Without a pack when the copy cannot
    be made.
    """
    mode = pack_mode(plan, cfg, tiles.nr, tiles.m_blocked)
    v_pad = plan.v_pad
    rows = v_pad is not None and _rows_spread(sch, plan, v_pad, tiles.batch_loop)
    if v_pad is not None and (mode == "tile" or (mode == "before" and not rows)):
        # padded first, then packed from the padded copy: a panel copied as it pads holds
        # the guard of the last panel's columns, which gcc runs one element at a time
        # (AVX2 127 x 255 x 511: 0.61x numpy's GFLOP/s packed as it pads)
        plan.stages.pop(id(plan.v.buffer), None)
        plan.pads.append(v_pad)
    if mode != "in_place":
        attempt(sch, _pack_panel, sch, plan, tiles, mode == "tile")


def _pack_panel(sch: Schedule, plan: Plan, tiles: Tiles, under_tile: bool) -> None:
    pos = next(d for d, i in enumerate(plan.v.indices) if i is plan.n)
    stage = plan.stages.get(id(plan.v.buffer))
    if stage is None:
        reads = [r.buffer for r in block_node(sch, plan.main).reads]
        index = next(i for i, b in enumerate(reads) if b is plan.v.buffer)
        stage = sch.cache_read(plan.main, index, "global")
    top = tiles.n_o if under_tile else tiles.batch_loop
    if top is not None:
        sch.compute_at(stage, top)
    ndim = len(plan.v.indices)
    panels = not under_tile and not _rows_spread(sch, plan, stage, top)
    if panels:
        sch.transform_layout(stage, ("write", 0), _panel_layout(plan, tiles.nr))
    elif pos != ndim - 1:
        order = [d for d in range(ndim) if d != pos] + [pos]
        index_map = IndexMap.from_func(lambda *i: tuple(i[d] for d in order), ndim=ndim)
        sch.transform_layout(stage, ("write", 0), index_map)
    inner = loop_of_iter(sch, stage, pos, below=top)
    if pos != ndim - 1 and _transpose_by_lines(sch, plan, stage, top, inner, tiles.nr, panels):
        return
    rest = [lp for lp in loops_below(sch, stage, top) if lp.var is not inner.var]
    if panels and plan.v.indices[-1] is plan.n and _whole_panels(sch, stage, inner, tiles.nr):
        # each vector read from a row of V is stored whole into one panel row (n innermost
        # over all panels stores each vector across panels: AVX2 12 x 128 x 64 x 128, 43
        # GFLOP/s against 62). One batch's copy, in L2, goes one panel after the other; the
        # copy of a whole operand before the nest row after row, reading it at unit stride
        # (panel after panel reads 64 bytes of each row, a page apart: 1024^3 AVX-512, the
        # copy took 7% of the GEMM's time, 3.7% row after row)
        panel, inner = sch.split(inner, [None, tiles.nr])
        rest = [*rest, panel] if top is None else [panel, *rest]
    if rest:
        sch.reorder(*rest, inner)
    sch.vectorize(inner)
    fill = _split_fill(sch, stage, top)
    if top is None and rest:
        sch.parallel(rest[0])
        if fill is not None:
            attempt(sch, sch.parallel, sch.get_loops(fill)[0])


CACHE_LINE_BYTES = 64
"""Bytes of a cache line (x86-64 and the common AArch64 cores)."""
PAGE_BYTES = 4096
"""Addresses this far apart map to one L1 set (64 sets of 64-byte lines: 32 KiB, 8 ways)."""


def _transpose_by_lines(
    sch: Schedule,
    plan: Plan,
    stage: BlockRV,
    top: LoopRV | None,
    n_loop: LoopRV,
    nr: int,
    panels: bool,
) -> bool:
    """Order a transposing copy (V contiguous along ``k``, not ``n``) as a tiled transpose:
    ``[panel] k_o n k_i`` with ``k_i`` one cache line of a row of V, vectorized. Each step
    reads a whole line of one row and writes into an ``nr x line`` tile of the panel that
    stays in L1. Gathering ``n`` innermost reads one element of each of ``nr`` rows a row
    apart: rows a multiple of 4 KiB apart all map to one L1 set, so every element is a miss
    (a linear weight ``(out, in)``, 128 x 2048 x 2048 on AVX-512, one thread: 21 GFLOP/s
    gathered, 66 by lines; 128 x 5632 x 2048 packed per panel: 71 and 86). Only for rows a
    multiple of 4 KiB apart: rows 22 KiB apart (128 x 2048 x 5632) spread over two sets, where
    the gather ran at 77-81 and by lines at 74-75. False (nothing changed) then, or when
    ``k``'s loop is not the copy's other loop or a line does not divide it."""
    row = const_int(plan.v.buffer.shape[-1])
    itemsize = max(plan.v.buffer.dtype.bits // 8, 1)
    if row is None or (row * itemsize) % PAGE_BYTES:
        return False
    loops = loops_below(sch, stage, top)
    others = [lp for lp in loops if lp.var is not n_loop.var]
    k_loop = loop_of_iter(sch, stage, len(plan.v.indices) - 1, below=top)
    line = CACHE_LINE_BYTES // itemsize
    k_ext, n_ext = loop_extent(sch, k_loop), loop_extent(sch, n_loop)
    if others[-1].var is not k_loop.var or k_ext is None or k_ext % line or line < 2:
        return False
    if panels and (n_ext is None or n_ext % nr):
        return False
    k_o, k_i = sch.split(k_loop, [None, line])
    outer = others[:-1]
    if panels:
        panel, n_i = sch.split(n_loop, [None, nr])
        sch.reorder(*outer, panel, k_o, n_i, k_i)
        outer = [*outer, panel]
    else:
        sch.reorder(*outer, k_o, n_loop, k_i)
    sch.vectorize(k_i)
    if top is None and outer:
        sch.parallel(outer[0])
    return True


def _whole_panels(sch: Schedule, stage: BlockRV, loop: LoopRV, nr: int) -> bool:
    """Whether the packing copy's ``n`` loop splits into whole panels with no guard: its
    extent a multiple of ``nr`` and the copy not a zero-filled one guarded along it. (Only
    for a V contiguous along ``n``: a transposing copy reads along a stride either way.)"""
    extent = loop_extent(sch, loop)
    return extent is not None and extent % nr == 0 and not _guards_innermost(sch, stage)


def _rows_spread(sch: Schedule, plan: Plan, stage: BlockRV, top: LoopRV | None) -> bool:
    """Whether one batch's copy of V (under the batch loop ``top``) may keep its rows, ``n``
    innermost, instead of panels: its rows then are copied at unit stride on both sides (a
    copy into panels scatters each vector of a ragged row), and their stride spreads them over
    at least 16 L1 sets (rows a multiple of 4 KiB apart all map to one)."""
    if top is None:
        return False
    buf = block_node(sch, stage).writes[0].buffer
    row = const_int(buf.shape[-1]) if plan.v.indices[-1] is plan.n else None
    if row is None:
        return False
    stride = row * max(buf.dtype.bits // 8, 1)
    return 4096 // math.gcd(stride, 4096) >= 16


def _split_fill(sch: Schedule, copy: BlockRV, top: LoopRV | None) -> BlockRV | None:
    """Split a zero-filled copy (``x if in range else 0``) into a fill and an unguarded copy
    of the in-range part (``decompose_padding``), each vectorized: gcc runs a vector loop
    with a guard one element at a time. The fill block; None when the copy has no guard."""
    loops = loops_below(sch, copy, top)
    if not loops:
        return None
    got = sch.try_(sch.decompose_padding, copy, loops[0])
    return got.value if got.ok else None


def _guards_innermost(sch: Schedule, copy: BlockRV) -> bool:
    """Whether the zero-filled copy's condition uses its innermost loop (a vector loop with a
    guard), not only outer ones (a whole row in or out, which gcc hoists)."""
    loops = sch.get_loops(copy)
    store = block_node(sch, copy).body
    if not loops or not isinstance(store, BufferStore) or not isinstance(store.value, Select):
        return False
    realize = sch.get_realize(copy)
    used = {id(v) for v in collect_vars(store.value.condition)}
    inner = loops[-1].var
    return any(
        id(iv.var) in used and inner is not None and uses_var(value, inner)
        for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True)
    )


def place_pads(sch: Schedule, plan: Plan, tiles: Tiles) -> None:
    """The zero-filled copies (``pad_einsum``'s) of the operands not packed as they pad:
    under the batch loop (:func:`_per_batch`) or before the nest in parallel; a copy guarded
    along its vector loop is split into a fill and an unguarded copy, each vectorized."""
    top = tiles.batch_loop
    for copy in plan.pads:
        if top is not None:
            attempt(sch, sch.compute_at, copy, top)
        fill = _split_fill(sch, copy, top) if _guards_innermost(sch, copy) else None
        for block in (copy, fill) if fill is not None else (copy,):
            loops = loops_below(sch, block, top)
            if top is None and len(loops) > 1:
                attempt(sch, sch.parallel, loops[0])
            vectorize_innermost(sch, block, top)


def localize_padded(sch: Schedule, plan: Plan, tiles: Tiles) -> None:
    """Accumulate a padded output in a local tile written back whole to the padded buffer,
    which the unpadding copy (the epilogue inlined into it) reads after the nest, or after
    each batch: gcc runs the write-back's guard (the tile's columns past ``n``) one element
    at a time (16 x 197 x 64 x 197, AVX-512: 29 GFLOP/s with it, 55 without). Falls back
    to :func:`localize_output` (the guarded write-back) when that cannot be done."""

    def unguarded() -> None:
        consumers = fold_epilogue(sch, plan.main)
        write_back = sch.cache_write(plan.main, 0, "local")
        sch.reverse_compute_at(write_back, tiles.n_o if tiles.rows_outer else tiles.m_o)
        at = tiles.m_o if tiles.rows_outer else tiles.batch_loop
        for consumer in consumers:
            if at is not None:
                sch.reverse_compute_at(consumer, at)
            loops = loops_below(sch, consumer, at)
            if at is None and len(loops) > 1:
                sch.parallel(loops[0])
            vectorize_innermost(sch, consumer, at)

    if not attempt(sch, unguarded):
        localize_output(sch, plan.main, tiles.m_o)


def _panel_layout(plan: Plan, nr: int) -> IndexMap:
    """``V[.., k, .., n]`` -> ``V_global[batch.., n // nr, others.., n % nr]``: the panels of
    ``nr`` columns one after the other, each ``K x nr`` contiguous (read at unit stride by the
    micro-kernel, none of its rows a multiple of 4 KiB apart as a wide operand's rows are)."""
    idx = plan.v.indices
    pos = next(d for d, i in enumerate(idx) if i is plan.n)
    batch = [d for d, i in enumerate(idx) if any(i is b for b in plan.batch) and d != pos]
    rest = [d for d in range(len(idx)) if d != pos and d not in batch]

    def layout(*i: Expr) -> tuple[Expr, ...]:
        return (*(i[d] for d in batch), i[pos] // nr, *(i[d] for d in rest), i[pos] % nr)

    return IndexMap.from_func(layout, ndim=len(idx))
