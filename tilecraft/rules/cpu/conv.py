"""CPU ``Conv``: direct 2-D convolution in NCHW, register-blocked, without an im2col panel.

Takes a function with exactly one reduction block that is a convolution
``Y[n, oc, oh, ow] += X[n, chan, oh * sh + r, ow * sw + q] * W[oc, ic, r, q]``
(:func:`~tilecraft.rules.cpu._conv_match.match_conv`: dense or depthwise, any kernel size,
stride and dilation, constant extents but for a symbolic batch), the padding block before it
and injective blocks after it (batch norm, bias, activation, residual add: the epilogue).
Other functions are declined; the ``Matmul`` rule takes a declined convolution (grouped, NHWC,
symbolic image sizes, channel counts no multiple of 4) as an implicit GEMM.

Why not the implicit GEMM: its im2col panel (``K = IC * KH * KW`` rows of a tile of output
columns, copied with the padding test per element) is rebuilt for every tile of columns and
read by only ``OC / mr`` register tiles: on a ResNet-18 3x3 convolution (64 channels, 56x56)
two thirds of the kernel's time went to that copy (measured on an AVX-512 Cascade Lake).

Dense convolution (numbers from :class:`ConvConfig`, per target):

* the vector axis is the output channel: an ``mr x nv`` register tile holds ``mr`` output
  columns (``ow``) of ``nv`` vectors of output channels. Each step of the reduction
  (``ic, r, q``) loads ``nv`` weight vectors and broadcasts ``mr`` input pixels, so the
  stride does not matter (a strided input is read by broadcasts, never by gathers);
* the weight is packed before the nest into ``W_p[oc // V, ic, r, q, oc % V]`` (``V = nv *
  lanes``): the tile's weight vectors are contiguous and a panel of ``V`` output channels is
  read at unit stride. It is done on every call (``IC * KH * KW * OC`` elements, a few
  percent of the convolution);
* the padding block is split into a zero fill and a copy of the interior
  (``decompose_padding``) per channel, in parallel, vectorized: no test per element;
* ``V`` divides ``OC`` (whole vectors; half or a quarter of one for channel counts that are
  not a multiple of a vector) and ``mr`` divides ``OW``, the pair chosen for the share of
  the FMA units the tile keeps busy (:func:`~tilecraft.rules.cpu.matmul.tile_efficiency`)
  within the target's vector registers (``mr * nv`` accumulators, ``nv`` weight vectors and a
  broadcast), see :func:`register_tile`; the accumulator tile is laid out ``[ow][oc]`` so the
  compiler keeps it in registers;
* loops ``[n, oc / V, oh, ow / mr] (fused, parallel) | ic, r, q | ow_i oc_i (vectorized)``;
  the epilogue is applied as the tile is written back. ``ow_i`` is not marked ``unroll``: a
  source with ``#pragma GCC unroll`` is compiled without if-conversion (a gcc 12 miscompile,
  ``tilecraft.runtime.compiler``), which leaves a ReLU6 or ReLU epilogue scalar and branchy;
  gcc unrolls the short ``ow_i`` loop by itself (``mr`` is at most
  :attr:`ConvConfig.max_columns`: at 14 columns it no longer did, 3x slower).

Pointwise (1x1, stride 1) convolution with rows a whole number of half vectors, when
:func:`row_tile` estimates it cheaper than the dense tile (few input channels, or output
channels that are not a whole vector): the vector axis is the output row, ``mr`` output
channels by a whole row in registers, loops ``[n, oc / mr, oh] (fused, parallel) | ic |
oc_i ow (vectorized)``; the weight is read in place (one broadcast per channel and step) and
the rows are written back as vectors (MobileNetV2's 1x1 expansion, 24 -> 144 channels at
56x56: 495 us against the dense tile's 672 and the implicit GEMM's 1,385).

Depthwise convolution: every output channel reads its own input channel, so there is no
reuse across channels; the vector axis is the output row (``ow``): loops ``[n, oc]
(parallel) | oh | r, q | ow (vectorized)``, the row accumulated in a local buffer and written
back through the epilogue.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir import PrimFunc, Var
from ...schedule import BlockRV, LoopRV, Schedule
from ...target import Target
from ..base import CPURule, Decline
from ..common import attempt, block_node, localize_output, single_reduction, vectorize_innermost
from ._conv_match import ConvInfo, match_conv
from ._matmul_parts import vector_registers
from .matmul import tile_efficiency


@dataclass(frozen=True)
class ConvConfig:
    """Numbers of the CPU Conv schedule for one target.

    Attributes
    ----------
    vector_bits
        Width of a SIMD register (``Target.simd_bits``).
    registers
        SIMD registers: the accumulators, the weight vectors and one broadcast share them.
    max_vectors
        Most weight vectors (``nv``) of the register tile.
    max_columns
        Most output columns (``mr``) of the register tile: each is a broadcast per step, and
        the compiler must unroll them by itself (module docstring).
    num_cores
        Cores the parallel loop is spread over.
    """

    vector_bits: int = 256
    registers: int = 16
    max_vectors: int = 4
    max_columns: int = 8
    num_cores: int = 1

    @staticmethod
    def for_target(target: Target) -> ConvConfig:
        """The configuration of a CPU target: SIMD width and register count from it."""
        return ConvConfig(max(target.simd_bits, 128), vector_registers(target),
                          num_cores=max(target.num_cores, 1))  # fmt: skip

    def lanes(self, bits: int) -> int:
        """SIMD lanes of a ``bits``-wide element (at least 1)."""
        return max(1, self.vector_bits // max(bits, 8))


def register_tile(cfg: ConvConfig, lanes: int, channels: int, columns: int) -> tuple[int, int]:
    """``(width, mr)``: the dense convolution's register tile (module docstring), ``width``
    output channels (``nv`` vectors) by ``mr`` output columns; ``(0, 0)`` when no width fits.

    ``width`` divides ``channels``: ``nv`` whole vectors, or (channels not a multiple of a
    vector) half or a quarter of one, at least 4 lanes; ``mr`` divides ``columns``, with
    ``mr * nv + nv + 1`` registers at most. The best share of busy FMA units wins (a part of
    a vector counts its part), then the most accumulators, then the fewest loads per FMA
    (``(mr + nv) / (mr * nv)``), then the most columns (the fewest weight bytes per FMA).
    Measured on a ResNet-18 3x3 convolution (64 channels, 56x56): AVX-512 4 vectors x 4
    columns 2.4 ms, 2 x 8 2.8 ms; AVX2 2 x 4 4.1 ms, 4 x 2 5.6 ms.
    """
    widths = [nv * lanes for nv in range(1, cfg.max_vectors + 1)]
    widths += [lanes // d for d in (2, 4) if lanes // d >= 4]
    best: tuple[float, int, float, int, int] = (-1.0, 0, 0.0, 0, 0)
    for width in widths:
        if channels % width:
            continue
        nv = -(-width // lanes)
        room = min((cfg.registers - nv - 1) // nv, cfg.max_columns)
        mr = max((m for m in range(1, room + 1) if columns % m == 0), default=0)
        if mr:
            share = tile_efficiency(mr, nv) * width / (nv * lanes)
            best = max(best, (share, mr * nv, -(mr + nv) / (mr * nv), mr, width))
    return best[4], best[3]


WRITE_BACK_COST = 2.0
"""FMA slots one output element of the dense tile costs to write back: the tile is stored
``[ow][oc]`` and the output ``[oc][ow]``, so the write-back and its epilogue run per element
(a 1x1 expansion with 24 input channels: as long as its products)."""


def row_tile(cfg: ConvConfig, conv: ConvInfo) -> int:
    """Output channels (``mr``) of the row tile of a pointwise convolution, 0 when the dense
    tile is cheaper or rows do not apply.

    Rows apply to a 1x1, stride-1 convolution whose rows are a whole number of half vectors
    (28 columns on AVX-512, 16 lanes, ran 1.5x slower as rows: a 12-lane remainder). The row
    tile is ``mr`` output channels by a whole output row (``nw`` vectors, ``mr * nw + nw + 1``
    registers): the input row is loaded as vectors, each weight broadcast, the output row
    written back as vectors. Estimated cost per output element, in FMA slots: ``K / (lanes *
    share)`` for the products (``share``: :func:`tile_efficiency` times the used part of the
    vectors) plus :data:`WRITE_BACK_COST` for the dense tile's scalar write-back.
    """
    lanes = cfg.lanes(conv.weight.dtype.bits)
    cols, chans = conv.extent(conv.ow), conv.extent(conv.oc)
    one = conv.extent(conv.r) == conv.extent(conv.q) == 1
    if not one or conv.stride_w != 1 or cols % max(lanes // 2, 1):
        return 0
    nw = -(-cols // lanes)
    room = min((cfg.registers - nw - 1) // nw, cfg.max_columns)
    mr = max((m for m in range(1, room + 1) if chans % m == 0), default=0)
    if not mr:
        return 0
    k = conv.extent(conv.ic)
    rows = k / (lanes * tile_efficiency(mr, nw) * cols / (nw * lanes))
    width, dmr = register_tile(cfg, lanes, chans, cols)
    if not width:
        return mr
    nv = -(-width // lanes)
    dense = k / (lanes * tile_efficiency(dmr, nv) * width / (nv * lanes)) + WRITE_BACK_COST
    return mr if rows < dense else 0


class Conv(CPURule):
    """Direct, register-blocked NCHW convolution, dense or depthwise (module docstring).

    Parameters
    ----------
    config
        Fixed numbers; None: :meth:`ConvConfig.for_target` of the target at apply time.
    """

    Config = ConvConfig

    def schedule(
        self, func: PrimFunc, target: Target, cfg: ConvConfig, tunable: bool
    ) -> Schedule | Decline:
        """Schedule ``func`` as a convolution, or decline with the reason."""
        # Step 1. Find the convolution block; everything else is padding or epilogue.
        sch = Schedule(func)
        found = single_reduction(sch)
        if isinstance(found, str):
            return Decline(found)
        conv = match_conv(found[0])
        if isinstance(conv, str):
            return Decline(f"not a convolution: {conv}")
        main = found[0].block_rv
        # Step 2. Schedule the dense or depthwise nest.
        channel: LoopRV | None = None
        if conv.depthwise:
            got = _depthwise(sch, main, conv)
            if isinstance(got, str):
                return Decline(got)
            channel = got
        elif (rows := row_tile(cfg, conv)) > 0:
            _rows(sch, main, conv, cfg, rows)
        elif (why := _dense(sch, main, conv, cfg)) is not None:
            return Decline(why)
        # Step 3. The input's padding: a zero fill and an interior copy, per channel.
        _schedule_padding(sch, main, conv, channel)
        return sch


def _dense(sch: Schedule, main: BlockRV, conv: ConvInfo, cfg: ConvConfig) -> str | None:
    """The dense schedule (module docstring); why not when it cannot be made."""
    lanes = cfg.lanes(conv.weight.dtype.bits)
    width, mr = register_tile(cfg, lanes, conv.extent(conv.oc), conv.extent(conv.ow))
    if not width:
        return f"{conv.extent(conv.oc)} output channels: no multiple of {lanes // 4} lanes"
    loops = {id(it): lp for it, lp in zip(_iter_vars(sch, main), sch.get_loops(main), strict=True)}
    n, oc, oh, ow = (loops[id(v)] for v in (conv.n, conv.oc, conv.oh, conv.ow))
    ic, r, q = (loops[id(v)] for v in (conv.ic, conv.r, conv.q))
    # Step 2a. Pack the weight: W_p[oc // V, ic, r, q, oc % V].
    packed = sch.cache_read(main, conv.weight_read, "global")
    sch.transform_layout(packed, ("write", 0), lambda o, i, a, b: (o // width, i, a, b, o % width))
    _pack_loops(sch, packed, width, cfg)
    # Step 2b. Tile: [n, oc_o, oh, ow_o] [ic, r, q] ow_i oc_i.
    oc_o, oc_i = sch.split(oc, factors=[None, width])
    ow_o, ow_i = sch.split(ow, factors=[None, mr])
    sch.reorder(n, oc_o, oh, ow_o, ic, r, q, ow_i, oc_i)
    # Step 2c. Accumulate in a local [ow][oc] tile; the epilogue folds into its write-back.
    if not localize_output(sch, main, ow_o):
        return "cannot accumulate the output tile in a local buffer"
    sch.transform_layout(main, ("write", 0), lambda a, b, c, d: (a, c, d, b))
    attempt(sch, sch.decompose_reduction, main, ic)
    sch.vectorize(oc_i)
    fused = sch.fuse(n, oc_o, oh, ow_o)
    if cfg.num_cores > 1:
        sch.parallel(fused)
    if _reduce_extent(conv) < lanes * WRITE_BACK_COST:
        _write_back_by_channel(sch, main, fused)
    return None


def _reduce_extent(conv: ConvInfo) -> int:
    return conv.extent(conv.ic) * conv.extent(conv.r) * conv.extent(conv.q)


def _write_back_by_channel(sch: Schedule, main: BlockRV, fused: LoopRV) -> None:
    """Run the tile's write-back with the output channel innermost, vectorized: the epilogue
    is computed on vectors read from the tile, the results stored one by one. Used where the
    write-back costs more than the products (``K < lanes * WRITE_BACK_COST``): MobileNetV2's
    stem (3 input channels, ``K = 27``, ReLU6) 1.55 -> 0.95 ms; with ``K = 147`` (ResNet-18's
    stem) it was slower (3.8 -> 5.2 ms)."""
    tile = block_node(sch, main).writes[0].buffer
    for block in sch.get_child_blocks(fused):
        loops = sch.get_loops(block)[-2:]
        if block_node(sch, block).writes[0].buffer is tile or len(loops) != 2:
            continue  # the products and their init
        attempt(sch, sch.reorder, loops[1], loops[0])
        attempt(sch, sch.vectorize, loops[0])


def _rows(sch: Schedule, main: BlockRV, conv: ConvInfo, cfg: ConvConfig, mr: int) -> None:
    """The row schedule of a pointwise convolution (:func:`row_tile`): loops ``[n, oc / mr,
    oh] (fused, parallel) | ic | oc_i ow (vectorized)``, the ``mr`` rows accumulated in a
    local buffer and written back, through the epilogue, as vectors."""
    loops = {id(it): lp for it, lp in zip(_iter_vars(sch, main), sch.get_loops(main), strict=True)}
    n, oc, oh, ow = (loops[id(v)] for v in (conv.n, conv.oc, conv.oh, conv.ow))
    ic, r, q = (loops[id(v)] for v in (conv.ic, conv.r, conv.q))
    oc_o, oc_i = sch.split(oc, factors=[None, mr])
    sch.reorder(n, oc_o, oh, ic, r, q, oc_i, ow)
    localize_output(sch, main, oh)  # atomic: when it cannot, the rows accumulate in place
    attempt(sch, sch.decompose_reduction, main, ic)
    sch.vectorize(ow)
    fused = sch.fuse(n, oc_o, oh)
    if cfg.num_cores > 1:
        sch.parallel(fused)
    for block in sch.get_child_blocks(fused):
        if block.name != block_node(sch, main).name:
            vectorize_innermost(sch, block, fused)


def _depthwise(sch: Schedule, main: BlockRV, conv: ConvInfo) -> LoopRV | str:
    """The depthwise schedule (module docstring): the channel loop, or why it cannot be
    made."""
    loops = {id(it): lp for it, lp in zip(_iter_vars(sch, main), sch.get_loops(main), strict=True)}
    n, oc, oh, ow = (loops[id(v)] for v in (conv.n, conv.oc, conv.oh, conv.ow))
    ic, r, q = (loops[id(v)] for v in (conv.ic, conv.r, conv.q))
    sch.reorder(n, oc, oh, ic, r, q, ow)
    if not localize_output(sch, main, oh):
        return "cannot accumulate the output row in a local buffer"
    attempt(sch, sch.decompose_reduction, main, ic)
    sch.vectorize(ow)
    channel = sch.fuse(n, oc)
    sch.parallel(channel)  # one thread: a plain loop
    for block in sch.get_child_blocks(oh):
        if block.name != block_node(sch, main).name:
            vectorize_innermost(sch, block, oh)
    return channel


def _iter_vars(sch: Schedule, block: BlockRV) -> list[Var]:
    """The block's iterator variables in the order of the loops binding them (a normalized
    block: each loop binds one iterator, in order)."""
    return [iv.var for iv in block_node(sch, block).iter_vars]


def _pack_loops(sch: Schedule, block: BlockRV, width: int, cfg: ConvConfig) -> None:
    """Loops of the weight packing in the packed layout's order, ``[oc // V] (parallel) ic r
    q | oc % V (vectorized)``: the packed weight is written at unit stride (in the weight's
    order, with the kernel column vectorized, packing 128 x 128 x 3 x 3 took 15% of the
    convolution; in this order the convolution is 10% faster)."""
    o, *rest = sch.get_loops(block)  # (oc, ic, r, q) less the unit ones; oc is not one
    o_o, o_i = sch.split(o, factors=[None, width])
    sch.reorder(o_o, *rest, o_i)
    sch.vectorize(o_i)
    if cfg.num_cores > 1:
        attempt(sch, sch.parallel, o_o)


def _schedule_padding(
    sch: Schedule, main: BlockRV, conv: ConvInfo, channel: LoopRV | None = None
) -> None:
    """Split the padding block writing the data into a zero fill and an interior copy per
    channel (``decompose_padding``), rows vectorized: under ``channel`` (a depthwise
    convolution's channel loop: one channel's padded plane, made where it is read, stays in
    the L1 cache), else before the nest, channels in parallel."""
    for producer in sch.get_producers(main):
        node = block_node(sch, producer)
        if node.writes[0].buffer is not conv.data or len(sch.get_loops(producer)) != 4:
            continue
        if channel is not None and attempt(sch, sch.compute_at, producer, channel):
            row = sch.get_loops(producer)[1]  # the first loop under the channel loop
        else:
            loops = sch.get_loops(producer)
            attempt(sch, sch.parallel, sch.fuse(loops[0], loops[1]))
            row = loops[2]
        got = sch.try_(sch.decompose_padding, producer, row)
        if got.ok:
            vectorize_innermost(sch, got.value)
        vectorize_innermost(sch, producer)
