"""CPU ``Matmul``: a register-blocked GEMM schedule for any einsum reduction block.

Takes a function with exactly one reduction block, an einsum ``C[S, I, J] += A[S, I, K] *
B[S, J, K]`` in any layout (:func:`~tilecraft.schedule.analysis.classify_einsum`): matmul,
batched matmul, linear (weight ``(out, in)``, read ``W[j, k]``), and conv2d once its input
read is staged through ``reindex`` as an implicit GEMM (an im2col panel, padding folded in).
GEMVs (one operand a vector) are left to the ``GEMV`` rule. Other blocks of the function must
be injective: producers stay where they are, consumers (bias, activation, residual) become
the epilogue.

The schedule (numbers from :class:`MatmulConfig`, per target):

* the *vector axis* ``n`` is the innermost non-batch output index; the operand holding it
  (``V``) is *streamed*, the other (``U``) *broadcast*; ``m`` is the innermost non-unit
  spatial iterator of ``U``. For ``C[i, j] = A[i, k] B[k, j]``: ``n = j``, ``V = B``, ``m = i``;
* loops ``[S, m_oo, V's other, n_o] (fused, parallel; symbolic extents first, so the fused
  index is divided by constants only) | pack | [U's other, m_o] [K] m_i (unrolled) n_i
  (vectorized)``: an ``mr x nr`` register tile (``nr`` a multiple of the SIMD width)
  accumulated in a local buffer the compiler keeps in registers: the intermediate itself
  (``set_scope``) when an epilogue follows, else a ``cache_write`` copy. An output whose copy
  cannot be made is accumulated in place, where the compiler keeps one row only: ``mr = 1``,
  ``nr`` doubled;
* ``m`` and ``n`` extents that are symbolic or not a multiple of the tile are padded up to
  whole tiles (``pad_einsum``: zero-filled copies of the operands before the nest, the
  register tile written back whole to the padded output, which is copied back over the wanted
  extents after the nest), so no vector loop has a guard (see :func:`_pad_ragged`);
  an ``n`` not a whole number of vectors is padded to the multiple of the vector that pads it
  least (a conv's 28-wide rows to 32). A conv's staging block is inlined into the zero-filled
  copy of its panel, which then is the staging block;
* the ``K x nr`` panel of ``V`` read under one ``n_o`` is packed into a contiguous buffer
  (``cache_read``, or the conv's ``reindex`` block, + ``compute_at`` + ``transform_layout``
  putting ``n`` innermost): the micro-kernel reads it at unit stride. A panel small enough
  for the stack and already contiguous along ``n`` is read in place; a small strided one is
  transposed once before the nest (see :func:`_pack`);
* a batched GEMM whose operands are copied runs its batch loop alone in parallel and makes
  each batch's copies under it, where they stay in L2 (see :func:`_per_batch`); a padded one
  then unpads each row tile's output right after it;
* cache blocking: the register tile lives in registers, the packed panel (``K x nr``) in
  L2; when ``U`` does not fit in half the L2, or the parallel loop has fewer iterations than
  cores, ``m`` is blocked once more (``m_oo``) outside the panels, which then are packed once
  before the nest (see :func:`_m_blocks`). ``K`` is not blocked: the register tile is
  accumulated over the whole ``K`` (a ``K`` block's partial tiles summed through an
  ``rfactor`` buffer measured 0.80x-0.86x numpy at 1024^3 on AVX-512 against 0.91x without);
* the micro-kernel's ``K`` loop is unrolled by 2 or 4 steps (:func:`k_unroll`);
* the blocks after the reduction (bias, activation, residual...) are inlined into the
  write-back and computed per register tile (``compute_inline`` + ``reverse_compute_at``);
  when that fails they stay after the nest, reading the whole intermediate;
* the init is hoisted out of the ``K`` loops (``decompose_reduction``);
* ``tunable=True`` (a design space of the tuner) samples two numbers the machine decides
  better than the reasoning above: the count of ``m`` blocks (when ``m`` is blocked) and the
  ``K`` unroll, each a ``sample_perfect_tile`` the rule's own choice is a value of
  (:func:`m_block_factors`, :func:`sample_k_unroll`); the untuned schedule is unchanged;
* extents that cannot be padded (``pad_einsum`` declines) are split with a guard. tilecraft's
  ``decompose_reduction`` rejects a guarded block (its one-to-one check does not take a
  predicate with an outer offset), so a guarded kernel keeps its init inside: correct, slower.
"""

from __future__ import annotations

import math

from ...ir import BufferLoad, Expr, For, IntImm, PrimFunc, Var
from ...schedule import BlockRV, LoopRV, Schedule, ScheduleError
from ...schedule.analysis import (
    BlockInfo,
    classify_einsum,
    detect_gemv,
    is_multiply_accumulate,
    why_not_einsum,
    why_not_gemv,
)
from ...target import Target
from ..base import CPURule, Decline
from ..common import (
    attempt,
    block_node,
    const_int,
    loads_of,
    localize_output,
    loop_extent,
    pick_tile,
    product,
    single_reduction,
    vectorize_innermost,
    writes_param,
)
from ._matmul_copies import localize_padded, pack, pack_mode, place_pads
from ._matmul_parts import (
    FMA_CHAINS,
    MatmulConfig,
    Plan,
    Tiles,
    k_unroll,
    m_block_factors,
    reduce_extent,
    sample_k_unroll,
)


class Matmul(CPURule):
    """Register-blocked, packed, parallel GEMM for einsum reduction blocks (module docstring).

    Parameters
    ----------
    config
        Fixed numbers; None: :meth:`MatmulConfig.for_target` of the target at apply time.
    """

    Config = MatmulConfig

    def schedule(
        self, func: PrimFunc, target: Target, cfg: MatmulConfig, tunable: bool
    ) -> Schedule | Decline:
        """Schedule ``func`` as a GEMM, or decline with the reason."""
        # Step 1. Find the one einsum reduction block, staging conv-like reads (implicit GEMM).
        base = Schedule(func)
        plan = _match(base)
        if isinstance(plan, Decline):
            return plan
        # Step 2. Pick the vector axis n, the broadcast axis m and the operand to pack.
        why = _choose_roles(plan)
        if why is not None:
            return Decline(why)
        # Step 2b. Pad ragged or symbolic m and n to whole register tiles (no guard inside).
        base, plan = _pad_ragged(base, plan, cfg)
        # Step 3. Tile: [S, m_oo, V other, n_o] [U other, m_o] [K] m_i n_i.
        sch = base.copy()
        probe = base.copy()
        direct = writes_param(probe, plan.main) and not attempt(
            probe, probe.cache_write, plan.main, 0, "local"
        )
        tiles = _tile(sch, plan, cfg, direct, tunable)
        # Step 4. Accumulate in a local tile; fold the epilogue into its write-back.
        if plan.padded:
            localize_padded(sch, plan, tiles)
        else:
            localize_output(sch, plan.main, tiles.m_o)
        attempt(sch, sch.decompose_reduction, plan.main, tiles.k[0])
        # Step 5. Pack the streamed operand's panel; place the zero-filled copies.
        pack(sch, plan, tiles, cfg)
        place_pads(sch, plan, tiles)
        # Step 6. Parallel outer loops, unrolled rows, vectorized columns.
        _annotate(sch, plan, tiles)
        _unroll_k(sch, plan, tiles, cfg, tunable)
        return sch


def _match(sch: Schedule) -> Plan | Decline:
    """The einsum block and its loops, or why the rule does not apply."""
    found = single_reduction(sch)
    if isinstance(found, str):
        return Decline(found)
    main = found[0]
    stages: dict[int, BlockRV] = {}
    if classify_einsum(main) is None and is_multiply_accumulate(main.block):
        staged = _stage_computed_reads(sch, main)
        if isinstance(staged, ScheduleError):
            return Decline(f"cannot stage the implicit GEMM's input: {staged.short}")
        stages = staged
    block = block_node(sch, main.block_rv)
    einsum = classify_einsum(block)
    if einsum is None:
        return Decline(f"not an einsum: {why_not_einsum(block)}")
    if detect_gemv(block) is not None:
        return Decline("a GEMV (one operand is a vector): left to the GEMV rule")
    if "neither operand" in (why_not_gemv(block) or ""):
        return Decline("a dot product: neither operand has a non-unit spatial iterator")
    loops = {id(it.var): it.loop_rv for it in main.iters}
    doms = {id(it.var): it.dom for it in main.iters}
    return Plan(main.block_rv, einsum, loops, doms, stages)


def _stage_computed_reads(sch: Schedule, main: BlockInfo) -> dict[int, BlockRV] | ScheduleError:
    """``reindex`` each read indexed by expressions (conv2d's ``x[n, c, h + r, w + s]``) and
    inline its producer (the padding) into the new block. Returns the staging blocks by the
    id of the buffer each writes; the ScheduleError of the first ``reindex`` that fails.
    """
    stages: dict[int, BlockRV] = {}
    out = main.writes[0].buffer
    loads = loads_of(main.block.body)
    for index, region in enumerate(main.reads):
        mine = [ld for ld in loads if ld.buffer is region.buffer]
        if region.buffer is out or all(_simple(ld) for ld in mine):
            continue
        staged = sch.try_(sch.reindex, main.block_rv, ("read", index))
        if not staged:
            assert staged.error is not None
            return staged.error
        stage = staged.value
        for producer in sch.get_producers(stage):
            attempt(sch, sch.compute_inline, producer)
        stages[id(block_node(sch, stage).writes[0].buffer)] = stage
    return stages


def _simple(load: BufferLoad) -> bool:
    return all(isinstance(i, (Var, IntImm)) for i in load.indices)


def _non_unit(plan: Plan, v: Var) -> bool:
    return const_int(plan.doms[id(v)]) != 1


def _choose_roles(plan: Plan) -> str | None:
    """Fill in n, m, the operand to pack and the loop groups; a reason when impossible."""
    e = plan.einsum
    out_vars = [i for i in e.output.indices if isinstance(i, Var)]
    spatial = [v for v in out_vars if not any(v is b for b in e.batch_iters)]
    cands = [v for v in spatial if _non_unit(plan, v)]
    if not cands:
        return "the output has no non-unit, non-batch index"
    plan.n = cands[-1]
    n_in_i = any(plan.n is v for v in e.i_iters)
    v_group, u_group = (e.i_iters, e.j_iters) if n_in_i else (e.j_iters, e.i_iters)
    plan.v = e.lhs if n_in_i else e.rhs
    u_cands = [v for v in out_vars if any(v is u for u in u_group) and _non_unit(plan, v)]
    if not u_cands:
        return "the broadcast operand has no non-unit spatial iterator"
    plan.m = u_cands[-1]
    plan.batch = list(e.batch_iters)
    plan.v_other = [v for v in v_group if v is not plan.n]
    plan.u_other = [v for v in u_group if v is not plan.m]
    return None


def _tile_sizes(
    plan: Plan, cfg: MatmulConfig, direct: bool, padded: bool = False
) -> tuple[int, int]:
    """(mr, nr): the register tile (see :func:`_tile`). ``mr``: the rows that divide ``m``
    down to two thirds of ``cfg.mr``, else ``cfg.mr`` (``m`` is padded). ``padded``: the tile
    to pad ``n`` to when it is longer than a vector: the multiple of the vector that costs
    least, padded columns over the share of the FMA units the ``mr x nr`` tile keeps busy
    (:func:`tile_efficiency`),
    the wider on a tie (a 28-wide conv row: 32, where a 28-wide tile runs a vector and a
    partial one per row, 3.6x slower; 1000 columns: 2 x 8 padded to 1008, not 1 x 8 with
    half the FMA units idle)."""
    lanes = cfg.lanes(plan.einsum.output.buffer.dtype)
    n_ext, m_ext = const_int(plan.doms[id(plan.n)]), const_int(plan.doms[id(plan.m)])
    widest = lanes * cfg.nr_vectors * (2 if direct else 1)
    nr = pick_tile(n_ext, widest, lanes)
    mr = 1 if direct else pick_tile(m_ext, cfg.mr, lowest=cfg.mr - cfg.mr // 3)
    if padded and n_ext is not None and n_ext > lanes:

        def cost(t: int) -> float:  # padded columns over the share of FMA slots kept busy
            vectors = t // lanes
            return -(-n_ext // t) * t / tile_efficiency(mr, vectors)

        nr = min(range(widest, 0, -lanes), key=cost)
    return mr, nr


def tile_efficiency(mr: int, vectors: int) -> float:
    """The share of the FMA units an ``mr x vectors`` register tile keeps busy: its FMAs
    cover the FMA latency (:data:`FMA_CHAINS` independent accumulators) and outnumber its
    loads (``mr`` broadcasts and ``vectors`` panel loads a step, on as many load ports as FMA
    ports: 8 x 1 on AVX-512 issues 9 loads for 8 FMAs, measured 1000^3 71 GFLOP/s, where
    8 x 2 issues 10 for 16)."""
    fmas = mr * vectors
    return min(1.0, fmas / FMA_CHAINS) * min(1.0, fmas / (mr + vectors))


def _pad_ragged(base: Schedule, plan: Plan, cfg: MatmulConfig) -> tuple[Schedule, Plan]:
    """Pad ``m`` and ``n`` up to whole register tiles when a tile would need a guard.

    A symbolic or non-dividing extent split into register tiles gets a predicate on the
    micro-kernel, which keeps the init inside the ``K`` loop (``decompose_reduction`` rejects
    a guarded block) and the guard in the vector loop: several times slower. ``pad_einsum``
    instead runs the block over padded extents, reading zero-filled copies of the operands
    made before the nest (cheap next to the product) and copying the wanted part of the output
    back (that copy, fused into the write-back, is the only guarded step). When padding is
    not possible (a conv's staged read, an operand indexed by expressions) the guard stays.
    """
    mr, nr = _tile_sizes(plan, cfg, direct=False, padded=True)
    want = {id(plan.m): mr, id(plan.n): nr}
    padding = []
    for iv in block_node(base, plan.main).iter_vars:
        tile = want.get(id(iv.var), 1)
        ext = const_int(iv.dom.extent)
        padding.append(tile if tile > 1 and (ext is None or ext % tile) else 1)
    if all(p == 1 for p in padding):
        return base, plan
    padded = base.copy()
    if not attempt(padded, padded.pad_einsum, plan.main, padding):
        return base, plan
    again = _replan(padded, plan)
    if again is None or _choose_roles(again) is not None:
        return base, plan
    stage_names = {b.name for b in plan.stages.values()}
    for copy in padded.get_producers(again.main):  # the zero-filled copies: parallel, vector
        staged = [b for b in padded.get_producers(copy) if b.name in stage_names]
        if staged and attempt(padded, padded.compute_inline, staged[0]):
            # a conv's staging block filled by its zero-filled copy: the copy is the stage
            again.stages[id(block_node(padded, copy).writes[0].buffer)] = copy
            continue
        if block_node(padded, copy).writes[0].buffer is again.v.buffer:
            again.stages[id(again.v.buffer)] = copy  # the streamed operand: packed as it pads
            again.v_pad = copy
            continue
        again.pads.append(copy)
    again.padded = True
    return padded, again


def _replan(sch: Schedule, plan: Plan) -> Plan | None:
    """The plan of the einsum block of ``plan`` after ``pad_einsum`` rebuilt its nest.

    (``normalize_prim_func`` would reject the function: the padded copies bind unit
    iterators to constants.)
    """
    main = sch.get_block(plan.main.name)
    realize = sch.get_realize(main)
    block = realize.block
    by_var = {id(lp.var): lp for lp in sch.get_loops(main)}
    loops: dict[int, LoopRV] = {}
    for iv, value in zip(block.iter_vars, realize.iter_values, strict=True):
        if not isinstance(value, Var) or id(value) not in by_var:
            return None
        loops[id(iv.var)] = by_var[id(value)]
    einsum = classify_einsum(block)
    if einsum is None:
        return None
    doms: dict[int, int | Expr] = {id(iv.var): iv.dom.extent for iv in block.iter_vars}
    return Plan(main, einsum, loops, doms, dict(plan.stages))


def _m_blocks(plan: Plan, cfg: MatmulConfig, mr: int, parallel: int | None) -> int:
    """How many blocks to cut ``m`` into (1: none), each a whole number of row tiles.

    A block of ``m`` runs over every panel of ``V`` before the next one starts, so its rows
    of ``U`` (``mc x K``) are read once from memory and then, panel after panel, from L2 when
    they fit in half of it (the other half holds the panel and the output tile's rows).
    Blocking needs the panels packed once before the nest (:func:`pack_mode`), not repacked
    per block. Measured on a Cascade Lake, one thread, 1024^3: AVX2 0.72x numpy's GFLOP/s
    with ``U`` streamed from L3, 0.83x blocked for L2; AVX-512 0.85x and 0.91x (with the
    ``K`` loop unrolled). Only while those panels (one batch's) fit in half the last-level
    cache: a larger ``V`` (a weight of 100 MB against 128 tokens) would be written to memory
    and read back, where packed under each ``n_o`` its panels stay in L2; ``m`` then is
    blocked only when ``U`` does not fit in half the last-level cache. Blocks also give the
    parallel loop one iteration per core.
    """
    m_ext, k_ext = const_int(plan.doms[id(plan.m)]), reduce_extent(plan)
    if m_ext is None or k_ext is None or m_ext % mr:
        return 1
    tiles = m_ext // mr
    itemsize = max(plan.einsum.output.buffer.dtype.bits // 8, 1)
    v_bytes = product([k_ext, *(const_int(plan.doms[id(v)]) for v in [plan.n, *plan.v_other])])
    small_v = v_bytes is not None and v_bytes * itemsize <= cfg.l3_bytes // 2
    budget = cfg.l2_bytes // 2 if small_v else cfg.l3_bytes // 2
    want = -(-m_ext * k_ext * itemsize // max(budget, 1))
    blocks = _blocks_near(tiles, want) if want > 1 else 1
    if parallel is not None and parallel * blocks < cfg.num_cores:
        least = -(-cfg.num_cores // max(parallel, 1))
        blocks = next((b for b in range(least, tiles + 1) if tiles % b == 0), 1)
    return blocks


def _blocks_near(tiles: int, want: int) -> int:
    """A divisor of ``tiles`` near ``want``: the smallest at least ``want`` when it is within
    twice ``want`` (blocks at most half as large as asked), else the largest below it (blocks
    larger than asked: a block of one row tile would stream every panel from memory once per
    row tile)."""
    above = next((b for b in range(want, tiles + 1) if tiles % b == 0), tiles)
    if above <= 2 * want:
        return above
    return max(b for b in range(1, want + 1) if tiles % b == 0)


def _tile(sch: Schedule, plan: Plan, cfg: MatmulConfig, direct: bool, tunable: bool) -> Tiles:
    """Split n and m into register tiles and order the loops (see the module docstring).

    ``direct``: the output is accumulated in place (no local tile can be made), where only a
    one-row tile stays in registers: ``mr = 1`` and a twice wider ``nr``. A batched GEMM whose
    operands are copied (:func:`_per_batch`) runs its batch loop alone in parallel, the copies
    made under it. ``tunable``: the number of ``m`` blocks, when ``m`` is blocked, is sampled
    (:func:`m_block_factors`).
    """
    mr, nr = _tile_sizes(plan, cfg, direct)
    n_ext = const_int(plan.doms[id(plan.n)])
    n_o, n_i = sch.split(plan.loops[id(plan.n)], factors=[None, nr])
    m_o, m_i = sch.split(plan.loops[id(plan.m)], factors=[None, mr])
    loops = plan.loops
    batch = [loops[id(v)] for v in plan.batch]
    per_batch = _per_batch(plan, cfg, nr)
    extents = [const_int(plan.doms[id(v)]) for v in [*plan.batch, *plan.v_other]]
    par: int | None = None
    if per_batch:
        par = product([const_int(plan.doms[id(v)]) for v in plan.batch])
    elif n_ext is not None and all(e is not None for e in extents):
        par = -(-n_ext // nr) * math.prod(e for e in extents if e is not None)
    blocks = _m_blocks(plan, cfg, mr, par)
    outer_m: list[LoopRV] = []
    if blocks > 1:
        least = -(-cfg.num_cores // max(par, 1)) if par is not None else 1
        m_oo, m_o = sch.split(m_o, factors=m_block_factors(sch, m_o, blocks, least, tunable))
        outer_m = [m_oo]
    parallel = [*batch, *outer_m, *(loops[id(v)] for v in plan.v_other), n_o]
    # symbolic extents outermost: fusing divides the fused index by the inner extents, and a
    # division by a constant costs nothing where one by a symbolic extent is a call per use
    parallel.sort(key=lambda lp: _constant_loop(sch, lp))
    mid = [*(loops[id(v)] for v in plan.u_other), m_o]
    k = [loops[id(v)] for v in plan.einsum.k_iters]
    rows_outer = per_batch and _rows_outer(plan, cfg, nr)
    if rows_outer:
        sch.reorder(*batch, *outer_m, m_o, n_o, *k, m_i, n_i)
    else:
        sch.reorder(*parallel, *mid, *k, m_i, n_i)
    if not per_batch:
        return Tiles(nr, parallel, n_o, m_o, k, m_i, n_i, blocks > 1)
    batch_loop = sch.fuse(*batch) if len(batch) > 1 else batch[0]
    return Tiles(nr, [batch_loop], n_o, m_o, k, m_i, n_i, blocks > 1, batch_loop, rows_outer)


def _rows_outer(plan: Plan, cfg: MatmulConfig, nr: int) -> bool:
    """Whether a padded batched GEMM runs its row tiles outside its panels: when V's panels
    of one batch fit in half the L2 (read from there once per row tile) and no other loop
    lies between. The padded output's rows of one row tile then fit in L1, unpadded right
    after (16 x 197 x 64 x 197, AVX-512: 63 GFLOP/s unpadded per batch, 70 per row tile)."""
    if not plan.padded or plan.u_other or plan.v_other:
        return False
    k_ext, n_ext = reduce_extent(plan), const_int(plan.doms[id(plan.n)])
    if k_ext is None or n_ext is None:
        return False
    itemsize = max(plan.v.buffer.dtype.bits // 8, 1)
    return k_ext * -(-n_ext // nr) * nr * itemsize <= cfg.l2_bytes // 2


def _per_batch(plan: Plan, cfg: MatmulConfig, nr: int) -> bool:
    """Whether the batch loop alone runs in parallel, each batch's operand copies made under
    it: when the GEMM is batched (constant batch extents, at least one per core) and something
    is copied before the nest (zero-filled operands, a panel packed once). Each batch's copies
    then stay in L2 for its GEMM and are small allocations, where the copies of all batches at
    once are written to and read back from memory, in allocations the size of the operands
    (16 x 197 x 64 x 197, AVX-512: 29 GFLOP/s copied before the nest, 60 per batch)."""
    count = product([const_int(plan.doms[id(v)]) for v in plan.batch])
    if not plan.batch or count is None or count < cfg.num_cores:
        return False
    return plan.padded or pack_mode(plan, cfg, nr, False) == "before"


def _constant_loop(sch: Schedule, loop: LoopRV) -> bool:
    node = sch.get(loop)
    assert isinstance(node, For)
    return isinstance(node.extent, IntImm)


def _unroll_k(sch: Schedule, plan: Plan, tiles: Tiles, cfg: MatmulConfig, tunable: bool) -> None:
    """Unroll the micro-kernel's innermost ``K`` loop by the largest power of two up to
    :func:`k_unroll` that divides its extent (no guard): its steps then share one loop's
    increments and branch. ``tunable``: by a sampled divisor of the extent
    (:func:`sample_k_unroll`)."""
    extent = loop_extent(sch, tiles.k[-1])
    if extent is None:
        return
    if tunable and sample_k_unroll(sch, tiles.k[-1], extent):
        return
    mr = loop_extent(sch, tiles.m_i) or 1
    vectors = max(tiles.nr // cfg.lanes(plan.einsum.output.buffer.dtype), 1)
    factor = k_unroll(cfg, mr, vectors)
    while factor > 1 and extent % factor:
        factor //= 2
    if factor > 1:
        _, inner = sch.split(tiles.k[-1], factors=[None, factor])
        sch.unroll(inner)


def _annotate(sch: Schedule, plan: Plan, tiles: Tiles) -> None:
    """Parallel outer loops, unrolled register rows, vectorized columns."""
    outer = tiles.parallel
    fused = sch.fuse(*outer) if len(outer) > 1 else outer[0]
    sch.parallel(fused)
    sch.unroll(tiles.m_i)
    sch.vectorize(tiles.n_i)
    for block in sch.get_child_blocks(tiles.m_o):
        if block.name == plan.main.name:
            continue
        vectorize_innermost(sch, block, tiles.m_o)
