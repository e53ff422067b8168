"""GPU ``LowBatchGEMV``: ``Y[b, j] = X[b, k] . W[j, k]`` for a small batch ``b`` (symbolic, or
a constant up to ``max_batch``): decode projections of a batch of sequences. Memory-bound on
``W``, so each weight tile is loaded once and used for a whole bucket of batch rows.

Takes a function with exactly one einsum reduction block whose one operand (the *weight*) has
constant extents and whose other operand has exactly one non-unit spatial iterator ``b``
outside the batch group (the *batch rows*; a symbolic one must be the activations' outermost
dimension, as a decode batch ``(b, k)`` or ``(b, 1, k)`` is: the symbolic sequence of a
prompt, ``(1, seq, k)``, is left to ``Matmul``), other blocks injective (the epilogue). Two
weight layouts, by the weight's contiguous axis: the reduction (``(out, in)`` weights, the
layout linear layers use) or the output column (``(in, out)`` weights, ``x @ W``; a constant
column count); a weight whose innermost index is neither is declined.

Both schedules (numbers from :class:`LowBatchGEMVConfig`) pad ``b`` to whole buckets; the
``(in, out)`` one is in :mod:`._low_batch_cols`. The ``(out, in)`` one is the ``GEMV`` rows
schedule with a bucket: ``b`` is padded to a multiple of ``bucket`` (``pad_einsum``: the
zero-filled copy of ``X`` is inlined into its register loads, the copy-back into the guarded
epilogue); a block of ``threads`` threads computes ``bucket x rows`` outputs; each thread
walks ``k`` in vector chunks, loading the chunk of each of its ``rows`` weight rows once (one
16-byte load) and the chunk of each of the ``bucket`` activation rows, and accumulates
``bucket x rows`` partial sums in registers (``rfactor``); a cross-thread reduction (warp
shuffles) combines them and thread ``t`` applies the epilogue to output ``t`` of the tile,
each element written once. Loops: ``bx (outer, bucket and row tiles) | tx | ko | ji (weight
load) bi kv``. ``tunable=True`` samples ``rows`` (``k_threads`` for ``(in, out)`` weights)
with ``sample_categorical``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir import Expr, PrimFunc, Var
from ...schedule import BlockRV, LoopRV, Schedule
from ...schedule.analysis import (
    EinsumInfo,
    EinsumOperand,
    IndexRole,
    classify_einsum,
    why_not_einsum,
)
from ...target import Target
from ..base import Decline, GPURule
from ..common import attempt, block_node, const_int, loop_extent
from ._low_batch_cols import columns_tile
from ._mm_common import (
    bind_unbound_roots,
    float_dtypes,
    gpu_facts,
    halvings_and_double,
    knob,
    match_single_reduction,
)
from .gemv import cache_vector, fuse_epilogue, k_split, lanes_for


@dataclass(frozen=True)
class LowBatchGEMVConfig:
    """Numbers of the GPU LowBatchGEMV schedule for one target.

    Attributes
    ----------
    bucket
        Batch rows per block, sharing each weight load.
    rows
        Weight rows per block (``(out, in)`` weights).
    threads
        Threads per block along the reduction (``(out, in)`` weights).
    col_threads, k_threads
        Threads per block along the columns and along the reduction (``(in, out)`` weights).
    sm_count
        Multiprocessors: the ``(in, out)`` schedule trades column threads for reduction
        threads until there are two column tiles per multiprocessor.
    shared_bytes
        Static shared memory per block: the ``(in, out)`` schedule's fp32 partial sums
        (``k_threads x bucket x columns per block``) stay within it.
    vector_bytes
        Widest load (16 bytes).
    max_batch
        Largest constant batch taken (a symbolic batch is always taken).
    unroll
        ``pragma_auto_unroll_max_step`` of the inner loops.
    """

    bucket: int = 4
    rows: int = 2
    threads: int = 128
    vector_bytes: int = 16
    max_batch: int = 16
    unroll: int = 256
    col_threads: int = 32
    k_threads: int = 8
    sm_count: int = 1
    shared_bytes: int = 48 * 1024

    @staticmethod
    def for_target(target: Target) -> LowBatchGEMVConfig:
        """The configuration for a CUDA target (the same tile for sm_70 ... sm_90)."""
        facts = gpu_facts(target)
        return LowBatchGEMVConfig(sm_count=facts.sm_count, shared_bytes=facts.shared_bytes)


@dataclass
class _Roles:
    """Positions of the iterators, by role, in the einsum block's iterators."""

    b: int
    j: int
    k: list[int]
    outer: list[int]
    weight: str
    k_contiguous: bool


class LowBatchGEMV(GPURule):
    """Weight-stationary GEMV over a small (symbolic) batch on CUDA GPUs (module docstring).

    Parameters
    ----------
    config
        Fixed numbers; None: :meth:`LowBatchGEMVConfig.for_target` of the target at apply time.
    """

    Config = LowBatchGEMVConfig

    def schedule(
        self, func: PrimFunc, target: Target, cfg: LowBatchGEMVConfig, tunable: bool
    ) -> Schedule | Decline:
        """Schedule ``func`` as a low-batch GEMV, or decline with the reason."""
        # Step 1. The einsum block: a constant weight, a small batch of activation rows.
        sch = Schedule(func)
        found = _match(sch, cfg)
        if isinstance(found, Decline):
            return found
        main, roles, doms = found
        # Step 2. Pad the batch rows to whole buckets.
        padding = [cfg.bucket if n == roles.b else 1 for n in range(len(doms))]
        b_ext = const_int(doms[roles.b])
        padded = b_ext is None or b_ext % cfg.bucket != 0
        if padded:
            res = sch.try_(sch.pad_einsum, main, padding)
            if not res:
                assert res.error is not None
                return Decline(f"cannot pad the batch to whole buckets: {res.error.short}")
            main = sch.get_block(main.name)
        # Step 3. Tile, rfactor over the threads, registers, cross-thread reduction.
        _tile(sch, main, roles, cfg, padded, tunable)
        if not bind_unbound_roots(sch):
            return Decline("a block outside the GEMV nest could not be given its own kernel")
        return sch


def _match(
    sch: Schedule, cfg: LowBatchGEMVConfig
) -> tuple[BlockRV, _Roles, dict[int, int | Expr]] | Decline:
    """The einsum block and its roles, or why the rule declines."""
    why = float_dtypes(sch.func)
    if why is not None:
        return Decline(why)
    found = match_single_reduction(sch)
    if isinstance(found, Decline):
        return found
    info = found[0]
    e = classify_einsum(info)
    if e is None:
        return Decline(f"not an einsum: {why_not_einsum(info)}")
    block = info.block
    pos = {id(iv.var): n for n, iv in enumerate(block.iter_vars)}
    doms: dict[int, int | Expr] = {n: iv.dom.extent for n, iv in enumerate(block.iter_vars)}
    sides = _sides(e, pos, doms)
    if isinstance(sides, Decline):
        return sides
    weight, act, j, b = sides
    if const_int(doms[pos[id(b)]]) is None and _position(act, b) > 0:
        return Decline("the symbolic rows are not the activations' outermost dimension (a "
                       "sequence, as in (1, seq, k)): left to Matmul")  # fmt: skip
    if not weight.reduce_innermost:
        last = [i for i, r in zip(weight.indices, weight.roles, strict=True)
                if r is not IndexRole.CONST]  # fmt: skip
        if not last or last[-1] is not j:
            return Decline("the weight's innermost index is neither the reduction nor a column")
    b_ext = const_int(doms[pos[id(b)]])
    if b_ext is not None and b_ext > cfg.max_batch:
        return Decline(f"the batch {b_ext} is larger than max_batch = {cfg.max_batch}")
    if any(const_int(doms[pos[id(v)]]) is None for v in e.k_iters):
        return Decline("the reduction extent is symbolic")
    inner = {id(b), id(j)}
    outer = [pos[id(v)] for v in (*e.batch_iters, *e.i_iters, *e.j_iters) if id(v) not in inner]
    roles = _Roles(pos[id(b)], pos[id(j)], [pos[id(v)] for v in e.k_iters], sorted(outer),
                   weight.buffer.name, weight.reduce_innermost)  # fmt: skip
    return info.block_rv, roles, doms


def _position(operand: EinsumOperand, var: Var) -> int:
    """The dimension of ``operand`` that ``var`` indexes (-1: none)."""
    return next((n for n, i in enumerate(operand.indices) if i is var), -1)


def _sides(
    e: EinsumInfo, pos: dict[int, int], doms: dict[int, int | Expr]
) -> tuple[EinsumOperand, EinsumOperand, Var, Var] | Decline:
    """(weight, activations, the weight's row iterator, the batch-row iterator)."""
    groups = ((e.rhs, e.j_iters, e.lhs, e.i_iters), (e.lhs, e.i_iters, e.rhs, e.j_iters))
    for weight, w_iters, act, a_iters in groups:
        w_non_unit = [v for v in w_iters if const_int(doms[pos[id(v)]]) != 1]
        a_non_unit = [v for v in a_iters if const_int(doms[pos[id(v)]]) != 1]
        constant = all(const_int(doms[pos[id(v)]]) is not None for v in w_iters)
        if len(w_non_unit) == 1 and len(a_non_unit) == 1 and constant and not e.batch_iters:
            return weight, act, w_non_unit[0], a_non_unit[0]
    return Decline("needs a constant 2-D weight and exactly one non-unit batch-row iterator")


def _tile(
    sch: Schedule, main: BlockRV, roles: _Roles, cfg: LowBatchGEMVConfig, padded: bool,
    tunable: bool = False,
) -> None:  # fmt: skip
    """``bx | tx | ko | ji bi kv`` with per-thread partial sums (module docstring); tunable:
    the weight rows per block sampled among the divisors of the row count near ``rows``."""
    realize = sch.get_realize(main)
    by_var = {id(lp.var): lp for lp in sch.get_loops(main)}
    loops = {n: by_var[id(v)] for n, v in enumerate(realize.iter_values)}
    k_loops = [loops[p] for p in roles.k]
    outer = [loops[p] for p in roles.outer]
    sch.reorder(*outer, loops[roles.b], loops[roles.j], *k_loops)
    k = sch.fuse(*k_loops) if len(k_loops) > 1 else k_loops[0]
    if not roles.k_contiguous:
        nest = (outer, loops[roles.b], loops[roles.j], k)
        columns_tile(sch, main, nest, roles.weight, cfg, padded, tunable)
        return
    k_ext = loop_extent(sch, k)
    assert k_ext is not None  # _match checked it
    itemsize = max(block_node(sch, main).reads[0].buffer.dtype.bits // 8, 1)
    threads, lanes = k_split(k_ext, cfg.threads, lanes_for(itemsize, cfg.vector_bytes))
    j_ext = loop_extent(sch, loops[roles.j])
    rows = next(t for t in range(min(cfg.rows, j_ext or 1), 0, -1) if (j_ext or 1) % t == 0)
    bo, bi = sch.split(loops[roles.b], [None, cfg.bucket])
    rows_k = knob(sch, tunable, rows, halvings_and_double(rows, lambda c: (j_ext or 1) % c == 0))
    jo, ji = sch.split(loops[roles.j], [None, rows_k])
    ko, tx, kv = sch.split(k, [None, threads, lanes])
    sch.reorder(*outer, bo, jo, tx, ko, ji, bi, kv)
    # Step 3a. Per-thread partial sums of the bucket x rows tile, in registers.
    rf = sch.rfactor(tx, 0)
    rf_loops = sch.get_loops(rf)
    n_out = len(outer) + 2
    bx = sch.fuse(*rf_loops[:n_out])
    tx, ko, ji = sch.get_loops(rf)[1:4]
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.set_scope(rf, 0, "local")
    # Step 3b. Each weight chunk loaded once per row; the activations' chunks per ko.
    guarded = k_ext % (threads * lanes) != 0
    if not guarded:
        cache_vector(sch, rf, roles.weight, ji)
    act = _activations(sch, rf, roles.weight)
    staged = _inline_padding(sch, rf, act, ko) if padded else None
    if staged is None and not guarded:
        cache_vector(sch, rf, act, ko)
    attempt(sch, sch.decompose_reduction, rf, ko)
    # Step 3c. Cross-thread reduction; output t of the tile by thread t.
    sch.reverse_compute_at(main, bx)
    sch.bind(sch.get_loops(main)[-1], "threadIdx.x")
    # a guarded (padded) write-back reads the results from shared memory: the box of a local
    # tile read under the guard is not a constant one
    fuse_epilogue(sch, main, bx, threads, "shared" if padded else "local")
    sch.annotate(bx, "pragma_auto_unroll_max_step", cfg.unroll)


def _activations(sch: Schedule, rf: BlockRV, weight: str) -> str:
    """The name of the activations ``rf`` reads (the padded copy after ``pad_einsum``)."""
    node = block_node(sch, rf)
    out = node.writes[0].buffer.name
    return next(r.buffer.name for r in node.reads if r.buffer.name not in (weight, out))


def _inline_padding(sch: Schedule, rf: BlockRV, name: str, at: LoopRV) -> BlockRV | None:
    """Load the padded activations ``name`` into registers under ``at`` straight from the
    unpadded ones (the zero-filling copy inlined: scalar guarded loads); None when that
    fails."""
    reads = block_node(sch, rf).reads
    index = next(n for n, r in enumerate(reads) if r.buffer.name == name)

    def stage() -> BlockRV:
        cache = sch.cache_read(rf, index, "local")
        sch.compute_at(cache, at)
        for producer in sch.get_producers(cache):
            sch.compute_inline(producer)
        return cache

    res = sch.try_(stage)
    return res.value if res else None
