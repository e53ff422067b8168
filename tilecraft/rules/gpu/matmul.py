"""GPU ``Matmul``: a tiled GEMM for any einsum reduction block ``C[S, I, J] += A[S, I, K] *
B[S, J, K]`` (matmul, batched matmul, linear with a ``(in, out)`` or an ``(out, in)`` weight),
and conv2d as an implicit GEMM: an input read at ``x[n, c, h * s + r, w * s + q]`` is staged
by ``reindex`` (im2col-like, padding inlined), then inlined into the shared-memory fetch; the
window loops (``r``, ``q``) run whole outside the k tiles (compact shared tiles).

Takes a function with exactly one reduction block that
:func:`~tilecraft.schedule.analysis.classify_einsum` calls an einsum, both of whose operands
have a non-unit spatial iterator (GEMVs go to ``GEMV``), other blocks injective: producers
(casts, scales) are inlined into the shared-memory loads, consumers (bias, activation,
residual, a cast to fp16) into the write-back.

The iterators are re-indexed by role: ``i`` (the innermost non-unit ``I`` iterator), ``j``
(likewise in ``J``), ``k`` (the reduction iterators, fused), and the *outer* ones (batch and
the other ``I``/``J`` iterators), fused onto ``blockIdx.z``. The SIMT schedule (numbers from
:class:`MatmulConfig`):

* loops ``bz by bx | ty tx | ko | ki ii jj``: a block of ``ty x tx`` threads computes a
  ``(ty * pi) x (tx * pj)`` tile of ``C``, each thread a ``pi x pj`` register tile (a local
  accumulator, written back by the thread with the epilogue applied, in vector stores where
  the output rows allow);
* per ``k`` tile (``k_bytes`` of each row), the ``A`` and ``B`` tiles are fetched by all
  threads cooperatively into shared memory, with 16-byte vector loads where the operand's
  rows are a whole number of vectors, rows padded (``storage_align``) so a warp reading a
  column hits distinct banks; per ``ki`` each thread copies its column of ``A`` and row of
  ``B`` into registers;
* ``i``, ``j`` and ``k`` extents that are symbolic or not a multiple of the tile are padded
  (``pad_einsum``); the zero-filling copies are inlined into the shared-memory loads (scalar
  guarded loads: a guarded 16-byte load is not yet split or predicated by the code generator)
  and the copy-back of the padded output into the write-back, guarded per element;
* inner loops unrolled by ``pragma_auto_unroll_max_step``;
* ``tunable=True``: the k tile sampled (``sample_categorical``) among half, the configured and
  twice the tile where they divide ``K``; the fetch's vector width fits the smallest.

On a target with tensor cores (``MatmulConfig.tensor_cores``), an einsum of fp16 (or, with
``mma.sync``, bf16) operands accumulated in fp32 with a constant reduction extent gets the
tensor-core schedule instead (:mod:`._mm_tensor_core`: ``mma.sync``
+ ``ldmatrix`` + ``cp.async`` on sm_80+, the operand tiles XOR-swizzled in shared memory
(:mod:`._mm_swizzle`; rows padded instead with ``TensorCoreTile(swizzle=False)``), WMMA on
sm_70/75, rows padded; extents padded to whole tiles); a symbolic reduction gets the SIMT
schedule, padded. A conv2d of such operands goes there too (:mod:`._mm_conv_tc`):
normalized to ``C[o, (n h w)] += W[o, (c r q)] * X[(n h w), (c r q)]`` (one ``i``, ``j``
and ``k``; the weight is ``A``, fetched by ``cp.async``; the im2col gather with its zero
halo, guarded scalar loads, is ``B``; the epilogue is fused into the write-back; ptxas at
64 -> 64 channels, 56 x 56, 3 x 3: 80 registers on sm_80, 72 on sm_90, no spills);
symbolic image sizes, grouped and depthwise convs, fp32 and (fp16 accumulated in fp16, as
``topi.conv2d`` writes it) WMMA targets keep the SIMT implicit GEMM above. int8 operands
accumulated in int32 (a quantized linear layer, dequantized in the epilogue;
:mod:`._mm_int8`) get ``mma.sync`` m16n8k32 on sm_80+, rows padded, int8 WMMA 16x16x16 on
sm_75 (tiles in 16-column planes: :mod:`._mm_int8_wmma`), and the SIMT schedule on sm_70
(no int8 tensor cores; ``why_not_tensor_core`` says so).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...ir import Buffer, BufferLoad, BufferStore, Expr, PrimFunc
from ...schedule import BlockRV, ExprRV, LoopRV, Schedule
from ...schedule.analysis import (
    EinsumInfo,
    IndexRole,
    classify_einsum,
    detect_gemv,
    why_not_einsum,
    why_not_gemv,
)
from ...target import Target
from ..base import Decline, GPURule
from ..common import (
    attempt,
    block_node,
    const_int,
    fold_epilogue,
    loop_extent,
    loops_below,
    product,
    vectorize_innermost,
)
from . import _mm_tensor_core as tcs
from ._mm_common import (
    accumulate_locally,
    bind_unbound_roots,
    float_dtypes,
    gpu_facts,
    halvings_and_double,
    inline_producers,
    knob,
    match_single_reduction,
    stage_implicit_gemm,
)
from ._mm_conv_tc import is_implicit_gemm, normalize_conv
from ._mm_int8 import INT8_WMMA_SM, int8_dtypes, tensor_core_kind, why_not_int8_einsum


@dataclass(frozen=True)
class MatmulConfig:
    """Numbers of the GPU Matmul schedule for one target.

    Attributes
    ----------
    threads
        Threads per block along ``i`` and ``j``.
    per_thread
        Register tile of one thread along ``i`` and ``j``.
    k_bytes
        Bytes of each operand row per ``k`` tile (64: 16 fp32, 32 fp16).
    vector_bytes
        Widest global load (16 bytes: ``float4``).
    unroll
        ``pragma_auto_unroll_max_step`` of the inner loops.
    shared_bytes, shared_optin_bytes
        Static shared memory per block; dynamic shared memory a block may opt in to.
    tensor_cores
        ``"mma"``, ``"wmma"`` or ``""``: the tensor-core schedule to use (``""``: SIMT only).
    tensor_core_tile
        The largest tensor-core tile (smaller ones are tried when it does not divide).
    int8_wmma
        Whether WMMA takes int8 operands (sm_72+; ``mma.sync`` always does).
    """

    threads: tuple[int, int] = (8, 16)
    per_thread: tuple[int, int] = (4, 4)
    k_bytes: int = 64
    vector_bytes: int = 16
    unroll: int = 256
    shared_bytes: int = 48 * 1024
    shared_optin_bytes: int = 48 * 1024
    tensor_cores: str = ""
    tensor_core_tile: tcs.TensorCoreTile = field(default_factory=tcs.TensorCoreTile)
    int8_wmma: bool = False

    @staticmethod
    def for_target(target: Target) -> MatmulConfig:
        """The configuration for a CUDA target (sm_70 ... sm_90; ``sm_90a`` is sm_90): with
        ``mma`` (sm_80+) the operand tiles are swizzled, not padded (:mod:`._mm_swizzle`)."""
        facts = gpu_facts(target)
        tile = tcs.TensorCoreTile(swizzle=facts.tensor_cores == "mma")
        return MatmulConfig(shared_bytes=facts.shared_bytes,
                            shared_optin_bytes=facts.shared_optin_bytes,
                            tensor_cores=facts.tensor_cores,
                            tensor_core_tile=tile,
                            int8_wmma=facts.sm >= INT8_WMMA_SM)  # fmt: skip


@dataclass
class _Roles:
    """Positions (in the block's iterators) of each role, chosen once and kept over padding."""

    i: int
    j: int
    k: list[int]
    outer: list[int]


@dataclass(frozen=True)
class _Tile:
    """Threads, register tile and k tile; ``bm = ty * pi``, ``bn = tx * pj``."""

    ty: int
    tx: int
    pi: int
    pj: int
    bk: int

    @property
    def bm(self) -> int:
        return self.ty * self.pi

    @property
    def bn(self) -> int:
        return self.tx * self.pj


class Matmul(GPURule):
    """Tiled GEMM for einsum reduction blocks on CUDA GPUs (module docstring).

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
        # Step 1. The einsum block and the roles of its iterators.
        sch = Schedule(func)
        found = _match(sch)
        if isinstance(found, Decline):
            return found
        main, einsum, roles, doms = found
        # Step 1b. Tensor cores when the target has them and the operands fit.
        tensor = _tensor_core(func, main.name, roles, doms, cfg)
        if tensor is not None:
            return tensor
        tile = _choose_tile(einsum, roles, doms, cfg, const_int(doms[_k_main(roles, doms)]))
        # Step 2. Pad i, j and k to whole tiles.
        padded = _pad(sch, main, roles, doms, (tile.bm, tile.bn, tile.bk))
        if isinstance(padded, Decline):
            return padded
        main = sch.get_block(main.name)
        # Step 3. Tile: bz by bx | ty tx | ko | ki ii jj; accumulate in registers. Tunable:
        # the k tile is sampled among those dividing an unpadded K.
        k_ext = const_int(doms[_k_main(roles, doms)])
        k_choices = [tile.bk]
        if tunable and k_ext is not None and k_ext % tile.bk == 0:
            k_choices = halvings_and_double(tile.bk, lambda c: k_ext % c == 0)
        bk = knob(sch, tunable, tile.bk, k_choices)
        loops = _tile(sch, main, roles, tile, _k_main(roles, doms), bk)
        accumulate_locally(sch, main, loops["tx"])
        # Step 4. Operands through shared memory (cooperative fetch) and registers.
        for operand in _operands(sch, main):
            _stage_operand(sch, main, operand, loops, tile, cfg, min(k_choices))
        attempt(sch, sch.decompose_reduction, main, loops["k_first"])
        # Step 5. Vector stores, unrolling, kernels for what stayed outside the nest.
        _finish(sch, main, loops, tile, cfg, padded)
        if not bind_unbound_roots(sch):
            return Decline("a block outside the GEMM nest could not be given its own kernel")
        return sch


def _match(sch: Schedule) -> tuple[BlockRV, EinsumInfo, _Roles, dict[int, int | Expr]] | Decline:
    """The einsum block, its classification, roles and extents; or why the rule declines."""
    why = float_dtypes(sch.func)
    if why is not None and int8_dtypes(sch.func) is not None:
        return Decline(f"{why} (or int8 operands accumulated in int32)")
    found = match_single_reduction(sch)
    if isinstance(found, Decline):
        return found
    staged = stage_implicit_gemm(sch, found[0])
    if staged is not None:
        return staged
    block_rv = found[0].block_rv
    block = block_node(sch, block_rv)
    einsum = classify_einsum(block)
    if einsum is None:
        return Decline(f"not an einsum: {why_not_einsum(block)}")
    if why is not None and (why_int8 := why_not_int8_einsum(einsum)) is not None:
        return Decline(why_int8)
    if detect_gemv(block) is not None:
        return Decline("a GEMV (one operand is a vector): left to the GEMV rules")
    if "neither operand" in (why_not_gemv(block) or ""):
        return Decline("a dot product: neither operand has a non-unit spatial iterator")
    pos = {id(iv.var): n for n, iv in enumerate(block.iter_vars)}
    doms = {id(iv.var): iv.dom.extent for iv in block.iter_vars}
    i = _innermost_non_unit(einsum.i_iters, doms)
    j = _innermost_non_unit(einsum.j_iters, doms)
    if i is None or j is None:
        return Decline("an operand has no non-unit spatial iterator")
    inner = {id(i), id(j)}
    outer = [v for v in (*einsum.batch_iters, *einsum.i_iters, *einsum.j_iters)
             if id(v) not in inner]  # fmt: skip
    roles = _Roles(pos[id(i)], pos[id(j)], [pos[id(v)] for v in einsum.k_iters],
                   sorted(pos[id(v)] for v in outer))  # fmt: skip
    by_pos = {n: iv.dom.extent for n, iv in enumerate(block.iter_vars)}
    return block_rv, einsum, roles, {n: by_pos[n] for n in by_pos}


def _innermost_non_unit(iters: tuple[object, ...], doms: dict[int, Expr]) -> object | None:
    for v in reversed(iters):
        if const_int(doms[id(v)]) != 1:
            return v
    return None


def _k_main(roles: _Roles, doms: dict[int, int | Expr]) -> int:
    """The reduction iterator the SIMT schedule tiles (the others, a conv's window, run whole
    outside the k tiles): the one of largest constant extent, a symbolic one first."""
    return max(roles.k, key=lambda p: (const_int(doms[p]) is None, const_int(doms[p]) or 0))


def _k_extent(roles: _Roles, doms: dict[int, int | Expr]) -> int | None:
    total = 1
    for p in roles.k:
        ext = const_int(doms[p])
        if ext is None:
            return None
        total *= ext
    return total


def _choose_tile(
    einsum: EinsumInfo, roles: _Roles, doms: dict[int, int | Expr], cfg: MatmulConfig,
    k_ext: int | None,
) -> _Tile:  # fmt: skip
    """Shrink the configured tile for extents smaller than it; the k tile from ``k_bytes``
    (a divisor of a constant ``K``, a whole number of vectors, when one of at least half the
    tile exists)."""
    (ty, tx), (pi, pj) = cfg.threads, cfg.per_thread
    ty, pi = _shrink(const_int(doms[roles.i]), ty, pi)
    tx, pj = _shrink(const_int(doms[roles.j]), tx, pj)
    itemsize = max(einsum.lhs.buffer.dtype.bits // 8, 1)
    bk = max(cfg.k_bytes // itemsize, 1)
    step = max(min(cfg.vector_bytes // itemsize, bk), 1)
    if k_ext is not None:
        if k_ext <= bk:
            bk = k_ext
        else:
            bk = next((t for t in range(bk, bk // 2 - 1, -step) if k_ext % t == 0), bk)
    return _Tile(ty, tx, pi, pj, bk)


def _shrink(ext: int | None, threads: int, per: int) -> tuple[int, int]:
    """Halve the register tile, then the threads, while the tile covers twice the extent."""
    if ext is None:
        return threads, per
    while per > 1 and threads * per >= 2 * ext:
        per //= 2
    while threads > 1 and threads * per >= 2 * ext:
        threads //= 2
    return threads, per


def _pad(
    sch: Schedule, main: BlockRV, roles: _Roles, doms: dict[int, int | Expr],
    tile: tuple[int, int, int], fused_k: bool = False,
) -> set[int] | Decline:  # fmt: skip
    """Pad i, j and the tiled k (:func:`_k_main`; all of k when the tile spans several
    reduction iterators, as a tensor-core tile does) to whole ``(bm, bn, bk)`` tiles; the
    positions padded, or why it failed."""
    bm, bn, bk = tile
    want = {roles.i: bm, roles.j: bn}
    if len(roles.k) == 1 or not fused_k:
        want[_k_main(roles, doms)] = bk
    elif (k_ext := _k_extent(roles, doms)) is None or k_ext % bk:
        return Decline("several reduction iterators whose product the k tile does not divide")
    padding, padded = [], set()
    for n in range(len(doms)):
        t = want.get(n, 1)
        ext = const_int(doms[n])
        if t > 1 and (ext is None or ext % t):
            padding.append(t)
            padded.add(n)
        else:
            padding.append(1)
    if padded:
        res = sch.try_(sch.pad_einsum, main, padding)
        if not res:
            assert res.error is not None
            return Decline(f"cannot pad to whole tiles: {res.error.short}")
    return padded


def _tile(
    sch: Schedule, main: BlockRV, roles: _Roles, tile: _Tile, k_main: int, bk: int | ExprRV
) -> dict[str, LoopRV]:
    """Split and bind the einsum nest; the loops by name (bz when there are outer iterators).
    The reduction iterators other than ``k_main`` run whole, outside the k tiles."""
    by_iter = _loops_by_iter(sch, main)
    outer = [by_iter[p] for p in roles.outer]
    k_outer = [by_iter[p] for p in roles.k if p != k_main]
    k = by_iter[k_main]
    sch.reorder(*outer, by_iter[roles.i], by_iter[roles.j], *k_outer, k)
    by, ty, ii = sch.split(by_iter[roles.i], [None, tile.ty, tile.pi])
    bx, tx, jj = sch.split(by_iter[roles.j], [None, tile.tx, tile.pj])
    ko, ki = sch.split(k, [None, bk])
    loops = {"by": by, "bx": bx, "ty": ty, "tx": tx, "ko": ko, "ki": ki, "ii": ii, "jj": jj,
             "k_first": k_outer[0] if k_outer else ko}  # fmt: skip
    head: list[LoopRV] = []
    if outer:
        bz = sch.fuse(*outer) if len(outer) > 1 else outer[0]
        sch.bind(bz, "blockIdx.z")
        loops["bz"] = bz
        head = [bz]
    sch.reorder(*head, by, bx, ty, tx, *k_outer, ko, ki, ii, jj)
    sch.bind(by, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    return loops


def _loops_by_iter(sch: Schedule, main: BlockRV) -> dict[int, LoopRV]:
    """The loop binding each iterator of ``main``, by the iterator's position."""
    realize = sch.get_realize(main)
    by_var = {id(lp.var): lp for lp in sch.get_loops(main)}
    return {n: by_var[id(v)] for n, v in enumerate(realize.iter_values)}


def _operands(sch: Schedule, main: BlockRV) -> list[tuple[str, IndexRole]]:
    """The einsum's operands as (buffer name, role of their innermost index)."""
    einsum = classify_einsum(block_node(sch, main))
    assert einsum is not None  # padding keeps the einsum
    out = []
    for op in (einsum.lhs, einsum.rhs):
        roles = [r for r in op.roles if r is not IndexRole.CONST]
        out.append((op.buffer.name, roles[-1] if roles else IndexRole.CONST))
    return out


def _read_index(sch: Schedule, block: BlockRV, name: str) -> int:
    reads = block_node(sch, block).reads
    return next(n for n, r in enumerate(reads) if r.buffer.name == name)


def _stage_operand(
    sch: Schedule, main: BlockRV, operand: tuple[str, IndexRole], loops: dict[str, LoopRV],
    tile: _Tile, cfg: MatmulConfig, bk_min: int,
) -> None:  # fmt: skip
    """global -> shared (per ko, all threads, vector loads) -> registers (per ki). The vector
    width fits the smallest k tile a tunable schedule may draw (``bk_min``)."""
    name, inner = operand
    shared = sch.cache_read(main, _read_index(sch, main, name), "shared")
    sch.compute_at(shared, loops["ko"])
    inline_producers(sch, shared)
    node = block_node(sch, shared)
    plain = isinstance(node.body, BufferStore) and isinstance(node.body.value, BufferLoad)
    src = node.reads[0].buffer if plain and len(node.reads) == 1 else None
    dst = node.writes[0].buffer
    itemsize = max(dst.dtype.bits // 8, 1)
    fetch = loops_below(sch, shared, loops["ko"])
    extents = [loop_extent(sch, lp) for lp in fetch]
    threads = tile.ty * tile.tx
    bk_now = loop_extent(sch, loops["ki"]) or bk_min
    elems = product(extents)
    if elems is not None and extents and extents[-1] is not None:
        elems = elems // bk_now * bk_min  # one fetch dimension is the k tile
        if inner is IndexRole.REDUCE:
            extents = [*extents[:-1], extents[-1] // bk_now * bk_min]
    lanes = _fetch_lanes(src, extents, elems, threads, cfg.vector_bytes // itemsize)
    fused = sch.fuse(*fetch) if len(fetch) > 1 else fetch[0]
    if lanes > 1:
        _, fy, fx, vec = sch.split(fused, [None, tile.ty, tile.tx, lanes])
        sch.vectorize(vec)
    else:
        _, fy, fx = sch.split(fused, [None, tile.ty, tile.tx])
    sch.bind(fy, "threadIdx.y")
    sch.bind(fx, "threadIdx.x")
    if len(dst.shape) >= 2:
        attempt(sch, sch.storage_align, shared, 0, len(dst.shape) - 2,
                max(64 // itemsize, 1), max(16 // itemsize, 1))  # fmt: skip
    local = sch.cache_read(main, _read_index(sch, main, dst.name), "local")
    sch.compute_at(local, loops["ki"])
    if inner in (IndexRole.ROW, IndexRole.COL):
        per = tile.pi if inner is IndexRole.ROW else tile.pj
        if per * itemsize <= cfg.vector_bytes and per & (per - 1) == 0:
            vectorize_innermost(sch, local, loops["ki"])


def _fetch_lanes(
    src: Buffer | None, extents: list[int | None], elems: int | None, threads: int, widest: int
) -> int:
    """The widest vector (a power of two up to ``widest``) dividing the source's rows, the
    tile's rows and the tile's elements per thread; 1 for a guarded (padded) or symbolic copy."""
    if src is None or elems is None or not extents or extents[-1] is None:
        return 1
    row = const_int(src.shape[-1])
    if row is None:
        return 1
    lanes = widest
    while lanes > 1 and (row % lanes or extents[-1] % lanes or elems % (threads * lanes)):
        lanes //= 2
    return max(lanes, 1)


def _finish(
    sch: Schedule, main: BlockRV, loops: dict[str, LoopRV], tile: _Tile, cfg: MatmulConfig,
    padded: set[int],
) -> None:  # fmt: skip
    """Vector stores of the write-back, the unroll pragma."""
    tx = loops["tx"]
    under = {b.name for b in sch.get_child_blocks(tx)}
    for block in sch.get_consumers(main):
        if block.name in under and not padded:
            out = block_node(sch, block).writes[0].buffer
            row = const_int(out.shape[-1])
            width = tile.pj * max(out.dtype.bits // 8, 1)
            if row is not None and row % tile.pj == 0 and width <= cfg.vector_bytes:
                vectorize_innermost(sch, block, tx)
    top = loops.get("bz", loops["by"])
    sch.annotate(top, "pragma_auto_unroll_max_step", cfg.unroll)


def _tensor_core(
    func: PrimFunc, name: str, roles: _Roles, doms: dict[int, int | Expr], cfg: MatmulConfig
) -> Schedule | None:
    """The tensor-core schedule (:mod:`._mm_tensor_core`), or None when it does not fit (the
    SIMT schedule is used)."""
    if not cfg.tensor_cores:
        return None
    sch = Schedule(func)
    if is_implicit_gemm(sch, name):  # C[o, (n h w)] += W[o, (c r q)] * X[(n h w), (c r q)]
        normalized = sch.try_(normalize_conv, sch, name)
        if not normalized or normalized.value is not None:
            return None
        ivs = block_node(sch, sch.get_block(name)).iter_vars
        roles, doms = _Roles(0, 1, [2], []), {n: iv.dom.extent for n, iv in enumerate(ivs)}
    main = sch.get_block(name)
    kind, largest = tensor_core_kind(
        block_node(sch, main), cfg.tensor_cores, cfg.tensor_core_tile, cfg.int8_wmma
    )
    if not kind or tcs.why_not_tensor_core(func, main, sch, kind) is not None:
        return None
    if len(roles.k) != 1 or not tcs.tile_matrices_innermost(
        block_node(sch, main), roles.i, roles.j, roles.k[0]
    ):
        return None
    extents = (const_int(doms[roles.i]), const_int(doms[roles.j]), _k_extent(roles, doms))
    tile = tcs.fit_tile(extents, kind, largest)
    if tile is None:  # pad to whole tiles (zero-filled loads, a guarded copy-back kernel)
        tile = tcs.padded_tile(extents, kind, largest)
        if tile is None or isinstance(_pad(sch, main, roles, doms, tile.sizes, True), Decline):
            return None
        main = sch.get_block(name)
        fold_epilogue(sch, main)  # the copy-back inlined into the epilogue: one more kernel
    einsum = classify_einsum(block_node(sch, main))
    assert einsum is not None
    reads = block_node(sch, main).reads
    index = {r.buffer.name: n for n, r in enumerate(reads)}
    b_transposed = [r for r in einsum.rhs.roles if r is not IndexRole.CONST][-1] is IndexRole.REDUCE
    operands = (index[einsum.lhs.buffer.name], index[einsum.rhs.buffer.name], b_transposed)
    b_nk = b_transposed or kind == "mma_s8"  # B kept (n, k) in shared memory
    tile = tcs.fit_stages(tile, b_nk, cfg.shared_optin_bytes)

    def build() -> None:
        by_iter = _loops_by_iter(sch, main)
        outer = [by_iter[p] for p in roles.outer]
        k_loops = [by_iter[p] for p in roles.k]
        sch.reorder(*outer, by_iter[roles.i], by_iter[roles.j], *k_loops)
        k = sch.fuse(*k_loops) if len(k_loops) > 1 else k_loops[0]
        loops = (outer, by_iter[roles.i], by_iter[roles.j], k)
        tcs.schedule_tensor_core(sch, main, loops, tile, kind, operands)

    if not sch.try_(build) or not bind_unbound_roots(sch):
        return None
    return sch
