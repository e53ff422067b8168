"""The numbers and the plan of the CPU ``Matmul`` rule (package-private; see ``matmul.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...ir import DataType, Expr, Var
from ...schedule import BlockRV, ExprRV, LoopRV, Schedule
from ...schedule.analysis import EinsumInfo, EinsumOperand
from ...target import Target
from ..common import const_int


@dataclass(frozen=True)
class MatmulConfig:
    """Numbers of the CPU Matmul schedule for one target.

    Attributes
    ----------
    vector_bits
        Width of a SIMD register (``Target.simd_bits``).
    mr
        Rows of the register tile.
    nr_vectors
        Columns of the register tile, in SIMD vectors of the accumulator's dtype.
    num_cores
        Cores the parallel loop is spread over.
    l1d_bytes, l2_bytes, l3_bytes
        Cache sizes (``Target.l1d_bytes`` ...).
    k_unroll
        Most steps of the micro-kernel's ``K`` loop unrolled into one iteration (see
        :data:`K_UNROLL`); 1: not unrolled.
    registers
        SIMD registers (:func:`vector_registers`).
    """

    vector_bits: int = 256
    mr: int = 6
    nr_vectors: int = 2
    num_cores: int = 1
    l1d_bytes: int = 32 * 1024
    l2_bytes: int = 1024 * 1024
    l3_bytes: int = 8 * 1024 * 1024
    k_unroll: int = 4
    registers: int = 16

    @staticmethod
    def for_target(target: Target) -> MatmulConfig:
        """The configuration for a CPU target: the register tile from its SIMD width and
        vector register count (:func:`register_tile`), caches and cores from the target."""
        nr_vectors = 2
        registers = vector_registers(target)
        return MatmulConfig(
            vector_bits=max(target.simd_bits, 128),
            mr=register_tile(registers, nr_vectors),
            nr_vectors=nr_vectors,
            num_cores=max(target.num_cores, 1),
            l1d_bytes=target.l1d_bytes or 32 * 1024,
            l2_bytes=target.l2_bytes or 1024 * 1024,
            l3_bytes=target.l3_bytes or 8 * 1024 * 1024,
            k_unroll=K_UNROLL,
            registers=registers,
        )

    def lanes(self, dtype: DataType) -> int:
        """SIMD lanes of ``dtype`` (at least 1)."""
        return max(1, self.vector_bits // max(dtype.bits, 8))


FMA_CHAINS = 8
"""Independent accumulators that keep the FMA units busy: 4 cycles of latency times 2 ports
(x86 since Haswell and Zen 2). A register tile with fewer leaves FMA slots idle."""
K_UNROLL = 4
"""Most ``K`` steps of the micro-kernel per loop iteration (see :func:`k_unroll`)."""
LOOP_INSTRUCTIONS = 3
"""Instructions of the micro-kernel's ``K`` loop itself: two pointer increments and a fused
compare-and-branch. One step of an ``mr x nr_vectors`` tile issues ``mr * nr_vectors`` FMAs
and ``mr + nr_vectors`` loads on a 4-wide front end: AVX2's 4 x 2 tile, 14 instructions for
4 cycles of FMAs, is bound by the front end, not by the FMA ports, and the loop's share
counts."""
ROW_POINTERS = 8
"""Most rows of the broadcast operand one micro-kernel step reads: each row is an address
register in the inner loop (x86-64 has 16 general registers, the loop needs the others); at
14 rows gcc reloads row offsets from the stack on every step (measured 1024^3 AVX-512: 74
GFLOP/s at 14 rows, 100 at 8)."""


def vector_registers(target: Target) -> int:
    """SIMD registers of a CPU target: 32 with AVX-512 and on AArch64, else 16."""
    return 32 if "avx512f" in target.features or target.arch == "aarch64" else 16


def k_unroll(cfg: MatmulConfig, mr: int, nr_vectors: int) -> int:
    """``K`` steps to unroll for an ``mr x nr_vectors`` tile: the fewest (a power of two, at
    most ``cfg.k_unroll``) that bring the loop's :data:`LOOP_INSTRUCTIONS` under a tenth of
    the steps' own, and at most 2 when the tile leaves fewer registers free than a step loads.

    Measured on a Cascade Lake, one thread, against numpy: AVX2's 4 x 2 tile (512^3): 0.85x
    rolled by 2, 0.91x by 4; AVX-512's 8 x 2 tile is unrolled by 2, where by 4 gcc keeps a
    pointer per row and rotates the accumulators through other registers (124 instructions
    for 64 FMAs against 56 for 32): 128 x 2048 x 5632 (rows 8 KiB apart) 0.59x by 2, 0.46x by
    4. AVX2's 6 x 2 tile uses 15 of 16 registers: unrolled by 4, gcc spills an accumulator.
    """
    step = mr * nr_vectors + mr + nr_vectors
    factor = 1
    while factor < cfg.k_unroll and step * factor < LOOP_INSTRUCTIONS * 10:
        factor *= 2
    free = cfg.registers - mr * nr_vectors - nr_vectors - 1
    return factor if free >= nr_vectors + 1 else min(factor, 2)


K_UNROLL_SAMPLED = 8
"""Most ``K`` steps a tunable rule's sample unrolls (:func:`sample_k_unroll`)."""


def sample_k_unroll(sch: Schedule, loop: LoopRV, extent: int) -> bool:
    """Split the micro-kernel's ``K`` loop by a sampled divisor of ``extent`` up to
    :data:`K_UNROLL_SAMPLED` (``sample_perfect_tile``, which the tile-size mutator moves) and
    unroll the inner part: the tunable rule's ``K`` unroll. False (nothing done) for a loop
    of one step.

    :func:`k_unroll`'s choice is not always the fastest: gcc's code for a given unroll
    depends on the tile and the registers left (AVX-512's 8 x 2 tile at 512^3, one thread
    on a shared Cascade Lake: unrolled by 4, 0.99-1.19x the speed unrolled by 2 from run to
    run, where the rule picks 2, measured faster on 128 x 2048 x 5632).
    """
    if extent <= 1:
        return False
    factors = sch.sample_perfect_tile(loop, 2, max_innermost_factor=K_UNROLL_SAMPLED)
    _, inner = sch.split(loop, factors)
    sch.unroll(inner)
    return True


def m_block_factors(
    sch: Schedule, loop: LoopRV, blocks: int, least: int, tunable: bool
) -> list[int | ExprRV | None]:
    """The split of the row-tile loop ``loop`` into ``m`` blocks: ``blocks`` of them, or when
    ``tunable`` a ``sample_perfect_tile`` with at least ``least`` blocks (one per core).

    The rule sizes a block to half the L2; how much of the L2 really is free (a sibling
    hyperthread shares it) and what streaming the blocks from L3 costs vary by machine:
    1024^3, one thread on a Cascade Lake, 2 blocks of 512 rows (each twice the L2) ran
    1.04-1.13x the speed of the rule's 8 on AVX-512, and 2 or 4 blocks 1.14x its 16 on AVX2.
    """
    if not tunable:
        return [blocks, None]
    node = sch.get(loop)
    tiles = getattr(getattr(node, "extent", None), "value", None)
    if not isinstance(tiles, int) or tiles < 2:
        return [blocks, None]
    limit = max(tiles // max(least, 1), 1)
    return list(sch.sample_perfect_tile(loop, 2, max_innermost_factor=limit))


def register_tile(registers: int, nr_vectors: int) -> int:
    """Rows ``mr`` of an ``mr x nr_vectors`` accumulator tile: every register not holding the
    ``nr_vectors`` streamed vectors or the one broadcast value accumulates (AVX2: 6 x 2 = 12
    accumulators of 16), at most :data:`ROW_POINTERS` rows."""
    return max(1, min((registers - nr_vectors - 1) // nr_vectors, ROW_POINTERS))


@dataclass
class Plan:
    """What the rule found and chose; the loop handles are filled in by :func:`_tile`."""

    main: BlockRV
    einsum: EinsumInfo
    loops: dict[int, LoopRV]  # id(iterator var) -> the loop binding it
    doms: dict[int, int | Expr]
    stages: dict[int, BlockRV]  # id(buffer) -> the reindex block writing it (conv-like reads)
    padded: bool = False  # pad_einsum ran: the output is copied back from a padded one
    pads: list[BlockRV] = field(default_factory=list)  # zero-filled copies of U (and others)
    v_pad: BlockRV | None = None  # V's zero-filled copy, packed as it pads (a stage of V)
    n: Var = field(init=False)
    m: Var = field(init=False)
    v: EinsumOperand = field(init=False)
    batch: list[Var] = field(init=False)
    v_other: list[Var] = field(init=False)
    u_other: list[Var] = field(init=False)


@dataclass
class Tiles:
    """Loop handles after tiling, and the register tile's width."""

    nr: int
    parallel: list[LoopRV]
    n_o: LoopRV
    m_o: LoopRV
    k: list[LoopRV]
    m_i: LoopRV
    n_i: LoopRV
    m_blocked: bool = False
    batch_loop: LoopRV | None = None  # the parallel batch loop copies are made under
    rows_outer: bool = False  # m_o outside n_o: a padded output is unpadded per row tile


def reduce_extent(plan: Plan) -> int | None:
    total = 1
    for v in plan.einsum.k_iters:
        ext = const_int(plan.doms[id(v)])
        if ext is None:
            return None
        total *= ext
    return total
