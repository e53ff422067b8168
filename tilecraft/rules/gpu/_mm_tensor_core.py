"""The tensor-core schedule of the GPU ``Matmul`` rule: fp16/bf16 operands, fp32 accumulation
(or fp16, where the function accumulates fp16 operands in fp16: ``mma`` only); int8 operands,
int32 accumulation (``mma`` m16n8k32, below).

``mma.sync`` m16n8k16 + ``ldmatrix`` + a ``cp.async`` pipeline of ``TensorCoreTile.stages``
shared-memory versions (2 by default; 3-4 for 128 x 128 tiles, cut to what the target's
opt-in shared memory holds; operand tiles above 48 KiB in dynamic shared memory) on sm_80+,
WMMA 16x16x16 on sm_70/75, with the intrinsics of :mod:`tilecraft.schedule.tensor_intrin_cuda`.
A block of ``warps_m x warps_n`` warps computes a ``block_m x block_n`` tile of ``C`` in warp
fragments; per ``block_k`` step the A and B tiles are fetched by all threads cooperatively
(16-byte loads) into shared memory, rows padded (``TensorCoreTile.pad``) or, on ``mma``,
XOR-swizzled without padding (``TensorCoreTile.swizzle``, :mod:`._mm_swizzle`: the default of
the sm_80+ presets), and loaded into fragments per 16-wide ``k``; the
accumulators are stored to the output, or, when an epilogue follows (the cast of an fp16
output, bias, activation), fused into the write-back: each warp stores a 16 x 16 tile at a
time (two ``mma`` fragment tiles, one WMMA tile) to shared memory (one tile per warp:
``[.., i // wm, j // wn, .., i % 16, j % 16]``) and its 32 threads apply the epilogue to it
and write the output in 16-byte vectors (8 fp16 or 4 fp32 outputs per store), one kernel in
all. B's fragments load two ``n8`` tiles per ``ldmatrix.x4``; a weight stored ``(n, k)``
(``(out, in)``, K in QK^T) stays ``(n, k)`` in shared memory (16-byte fetch) and loads with
``ldmatrix`` without ``.trans`` (a ``(k, n)`` one with ``.trans``); with WMMA it loads into a
``col_major`` ``matrix_b`` fragment (scope ``wmma.matrix_b_col``), no transpose either.

Extents the tiles do not divide, symbolic ``i`` and ``j`` (a prefill's sequence length)
included, are padded (``pad_einsum``): the zero-filling copies are inlined into the
shared-memory fetch (16-byte loads predicated as a whole, ``cp.async`` in its zero-fill form,
where the guard holds for all 8 lanes; one guarded load per lane where not) and the copy-back
to the unpadded output (with the epilogue) fused into the write-back as above, guarded. A
symbolic reduction is not taken: the caller uses the SIMT schedule.

int8 operands accumulated in int32 (kind ``"mma_s8"``, tile from :func:`._mm_int8.int8_tile`):
``mma.sync`` m16n8k32 ``.s32.s8.s8.s32``, 64 int8 per ``k`` step (the fp16 tile's bytes),
8 warps of 32 x 64. ``ldmatrix`` loads 16 int8 per row and cannot transpose 8-bit elements,
so B is always ``(n, k)`` in shared memory: an ``(n, k)`` weight (a quantized linear layer's)
is fetched as it is (16-byte ``cp.async``), a ``(k, n)`` one is transposed on its way in
(``transform_layout``; scalar fetch). The epilogue (the dequantizing scale, bias, cast)
is fused into the write-back through an int32 staging tile, as for fp16. On WMMA targets with
int8 WMMA (kind ``"wmma_s8"``, sm_75; tile from :func:`._mm_int8.int8_wmma_tile`): WMMA
16x16x16 ``s8``/``s32`` fragments, B loaded as it is stored (``col_major`` for ``(n, k)``), the
shared tiles in 16-column planes so that every 16 x 16 tile is 32-byte aligned
(:mod:`._mm_int8_wmma`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...ir import Block, BufferLoad, BufferStore, Expr, PrimFunc, Var
from ...schedule import BlockRV, IndexMap, LoopRV, Schedule
from ...schedule.analysis import IndexRole, classify_einsum
from ..common import attempt, block_node, fold_epilogue, loop_extent, loops_below, writes_param
from ._mm_common import inline_producers
from ._mm_int8_wmma import k16_planes
from ._mm_swizzle import swizzle_shared

_SCOPES = {
    "mma": ("m16n8k16.matrixA", "m16n8k16.matrixB", "m16n8k16.accumulator"),
    "mma_s8": ("m16n8k32.matrixA", "m16n8k32.matrixB", "m16n8k32.accumulator"),
    "wmma": ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator"),
    "wmma_s8": ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator"),
}
_WMMA = ("wmma", "wmma_s8")


STATIC_SHARED = 48 * 1024
"""Static shared memory one block may declare; operand tiles above it are ``shared.dyn``."""


@dataclass(frozen=True)
class TensorCoreTile:
    """Block tile, warps per block, the shared-memory row padding (elements), the fetch
    vector (elements), the ``cp.async`` pipeline (``stages`` shared-memory versions of
    the operand tiles when ``pipeline``; fewer when ``k`` has fewer block steps), the
    shared layout: rows padded by ``pad``, or, with ``swizzle`` (``mma`` only: WMMA loads
    take a pointer and a leading dimension), XOR-swizzled in 16-byte chunks without padding
    (:mod:`._mm_swizzle`); ``elem_bytes``: the operands' element size (1: int8, whose tiles
    :func:`._mm_int8.int8_tile` makes)."""

    block_m: int = 128
    block_n: int = 128
    block_k: int = 32
    warps_m: int = 2
    warps_n: int = 2
    pad: int = 8
    vector: int = 8
    pipeline: bool = True
    stages: int = 2
    elem_bytes: int = 2
    swizzle: bool = False

    @property
    def row_pad(self) -> int:
        """Elements after each shared row: ``pad``, none when swizzled."""
        return 0 if self.swizzle else self.pad

    @property
    def sizes(self) -> tuple[int, int, int]:
        """``(block_m, block_n, block_k)``."""
        return self.block_m, self.block_n, self.block_k

    def operand_bytes(self, b_nk: bool) -> int:
        """Shared memory of the operand tiles, every pipeline stage, padded rows;
        ``b_nk``: B is kept ``(n, k)`` (rows of ``block_k``)."""
        a = self.block_m * (self.block_k + self.row_pad)
        b = self.block_n * (self.block_k + self.row_pad) if b_nk else (
            self.block_k * (self.block_n + self.row_pad))  # fmt: skip
        return self.elem_bytes * (a + b) * (self.stages if self.pipeline else 1)


def fit_stages(tile: TensorCoreTile, b_nk: bool, limit: int) -> TensorCoreTile:
    """``tile`` with as many of its pipeline stages (two at least) as ``limit`` bytes of
    shared memory hold, with the epilogue's staging (one fp32 16 x 16 tile per warp)."""
    staging = tile.warps_m * tile.warps_n * 16 * 16 * 4
    while tile.pipeline and tile.stages > 2 and tile.operand_bytes(b_nk) + staging > limit:
        tile = replace(tile, stages=tile.stages - 1)
    return tile


def why_not_tensor_core(func: PrimFunc, main: BlockRV, sch: Schedule, kind: str) -> str | None:
    """Why the tensor-core schedule does not fit ``main``; None when it does."""
    if kind not in _SCOPES:
        return "the target has no tensor cores"
    block = block_node(sch, main)
    einsum = classify_einsum(block)
    if einsum is None:
        return "not an einsum"
    dts = {str(einsum.lhs.buffer.dtype), str(einsum.rhs.buffer.dtype)}
    if kind in ("mma_s8", "wmma_s8"):  # int8 into int32 (the caller checked the dtypes)
        return None if _last_role(einsum.lhs.roles) is IndexRole.REDUCE else (
            "the left operand is not contiguous along the reduction")  # fmt: skip
    allowed = {"float16", "bfloat16"} if kind == "mma" else {"float16"}
    if "int8" in dts and kind == "wmma":
        return "int8 operands: this target's WMMA takes float16 only (int8 WMMA needs sm_72+)"
    if len(dts) != 1 or not dts <= allowed:
        return f"operands {sorted(dts)}: tensor cores take {sorted(allowed)}"
    out = str(einsum.output.buffer.dtype)
    if out != "float32" and not (out == "float16" == next(iter(dts)) and kind == "mma"):
        return f"the accumulator is {out}: tensor cores accumulate in float32 (float16 for "
        "float16 operands on mma)"
    if _last_role(einsum.lhs.roles) is not IndexRole.REDUCE:
        return "the left operand is not contiguous along the reduction"
    return None


def tile_matrices_innermost(block: Block, i_pos: int, j_pos: int, k_pos: int) -> bool:
    """Whether the fragments are the innermost two dimensions of every matrix: the output
    ``[.., i, j]``, ``A`` ``[.., i, k]``, ``B`` ``[.., k, j]`` or ``[.., j, k]`` (a grouped
    query's ``[.., group, 1, d]`` output, with a unit axis between ``i`` and ``j``, is not:
    the fragment intrinsics would not match, so the SIMT schedule is used without trying)."""
    einsum = classify_einsum(block)
    if einsum is None:
        return False
    iv = [v.var for v in block.iter_vars]
    i, j, k = iv[i_pos], iv[j_pos], iv[k_pos]

    def last_two(indices: tuple[Expr, ...], *allowed: tuple[Var, Var]) -> bool:
        tail = tuple(indices[-2:])
        return len(tail) == 2 and any(all(a is b for a, b in zip(tail, pair, strict=True))
                                      for pair in allowed)  # fmt: skip

    return (
        last_two(einsum.output.indices, (i, j))
        and last_two(einsum.lhs.indices, (i, k))
        and last_two(einsum.rhs.indices, (k, j), (j, k))
    )


def _last_role(roles: tuple[IndexRole, ...]) -> IndexRole | None:
    kept = [r for r in roles if r is not IndexRole.CONST]
    return kept[-1] if kept else None


def fit_tile(
    extents: tuple[int | None, int | None, int | None], kind: str, largest: TensorCoreTile
) -> TensorCoreTile | None:
    """The largest tile, from ``largest`` down to 32 x 32 x 16, dividing ``(i, j, k)``."""
    m, n, k = extents
    if m is None or n is None or k is None:
        return None
    for bm in _halvings(largest.block_m, 32):
        for bn in _halvings(largest.block_n, 32):
            for bk in _halvings(largest.block_k, 32 if kind == "mma_s8" else 16):
                warps_m = min(largest.warps_m, bm // 32)
                warps_n = min(largest.warps_n, bn // 32)
                if m % bm or n % bn or k % bk:
                    continue
                if kind in _WMMA and (bn // warps_n) % 16:
                    continue
                stages = min(largest.stages, k // bk)  # S stages need S steps
                pipeline = largest.pipeline and stages >= 2
                return replace(largest, block_m=bm, block_n=bn, block_k=bk, warps_m=warps_m,
                               warps_n=warps_n, pipeline=pipeline, stages=max(stages, 2),
                               swizzle=largest.swizzle and kind == "mma")  # fmt: skip
    return None


def padded_tile(
    extents: tuple[int | None, int | None, int | None], kind: str, largest: TensorCoreTile
) -> TensorCoreTile | None:
    """The tile to pad ``(i, j, k)`` to: ``largest``, halved (down to 32) along an extent it
    covers twice over; None for a symbolic reduction."""
    m, n, k = extents
    if k is None:
        return None
    bm, bn = largest.block_m, largest.block_n
    while bm > 32 and m is not None and bm >= 2 * m:
        bm //= 2
    while bn > 32 and n is not None and bn >= 2 * n:
        bn //= 2
    padded_k = -(-k // largest.block_k) * largest.block_k
    tile = fit_tile((bm, bn, padded_k), kind, replace(largest, block_m=bm, block_n=bn))
    return tile


def _halvings(start: int, least: int) -> list[int]:
    out = []
    while start >= least:
        out.append(start)
        start //= 2
    return out


def schedule_tensor_core(
    sch: Schedule, main: BlockRV, loops: tuple[list[LoopRV], LoopRV, LoopRV, LoopRV],
    tile: TensorCoreTile, kind: str, operands: tuple[int, int, bool],
) -> None:  # fmt: skip
    """Tile ``main`` (``loops``: outer, i, j, k) for tensor cores (module docstring);
    ``operands``: the read indices of A and B, and whether B is stored ``(n, k)``. A refusing
    primitive raises ScheduleError: the caller runs this under ``Schedule.try_``."""
    outer, i, j, k = loops
    tn = 16 if kind in _WMMA else 8
    tk = 32 if kind == "mma_s8" else 16  # the k of one mma: 32 int8, 16 fp16 (WMMA: 16)
    wm, wn = tile.block_m // tile.warps_m, tile.block_n // tile.warps_n
    node = block_node(sch, main)
    short = "f16" if str(node.reads[0].buffer.dtype) == "float16" else "bf16"
    acc16 = str(node.writes[0].buffer.dtype) == "float16"  # an fp16 accumulator (mma only)
    # Step 1. Block, warp and tensor-core tiles; warps on threadIdx.y.
    by, wy, mi, i16 = sch.split(i, [None, tile.warps_m, wm // 16, 16])
    bx, wx, ni, jt = sch.split(j, [None, tile.warps_n, wn // tn, tn])
    ko, kk, k16 = sch.split(k, [None, tile.block_k // tk, tk])
    head: list[LoopRV] = []
    if outer:
        head = [sch.fuse(*outer) if len(outer) > 1 else outer[0]]
        sch.bind(head[0], "blockIdx.z")
    sch.reorder(*head, by, bx, ko, wy, wx, kk, mi, ni, i16, jt, k16)
    sch.bind(by, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(sch.fuse(wy, wx), "threadIdx.y")
    threads = 32 * tile.warps_m * tile.warps_n
    # Step 2. Accumulators in warp fragments, stored back per warp tile.
    scopes = _SCOPES[kind]
    if kind in _WMMA and operands[2]:  # an (n, k) B loads into a col_major fragment
        scopes = (scopes[0], "wmma.matrix_b_col", scopes[2])
    acc, (smi, sni, pair, s16) = _accumulators(sch, main, bx, tile, (tn, scopes[2]))
    staged_n = tn * _pair(wn, tn)  # the columns a warp stages at a time
    # Step 2b. The epilogue (cast, bias, activation) fused into the write-back: each warp
    # stores a 16-row fragment tile (two mma tiles side by side) to shared memory and
    # applies the epilogue to it, in 16-byte vectors.
    staged = fuse_epilogue_at(sch, acc, sni, 16 * staged_n)
    # Step 3. Operands: global -> shared (per ko) -> warp fragments (per 16-wide k).
    b_transposed = operands[2]
    # B kept (n, k) in shared memory: an (n, k) B as it is (mma loads it with ldmatrix
    # without .trans, WMMA into a col_major fragment), and every int8 B
    b_nk = b_transposed or kind == "mma_s8"
    # a (k, n) int8 B is transposed on its way in (ldmatrix cannot transpose 8-bit elements)
    through = kind == "mma_s8" and not b_transposed
    # static shared memory holds the tiles only if the epilogue's staging fits beside them
    # (three swizzled 128 x 128 x 32 stages are exactly 48 KiB)
    staging = tile.warps_m * tile.warps_n * 16 * staged_n * 4 if staged else 0
    scope = "shared.dyn" if tile.operand_bytes(b_nk) + staging > STATIC_SHARED else "shared"
    frag_loads, frag_tiles, shared, b_width = _stage(sch, main, kk, (*scopes, scope), tn,
                                                     operands)  # fmt: skip
    b_cols = tile.block_k if b_nk else tile.block_n
    for sh, cols, transposed in zip(shared, (tile.block_k, b_cols),
                                    (False, through), strict=True):  # fmt: skip
        sch.compute_at(sh, ko)
        # a guarded (padded) copy too: 16-byte loads, predicated as a whole (cp.async in its
        # zero-fill form) where the guard holds for all 8 lanes, else split per lane
        _fetch(sch, sh, threads, tile, cols, 1 if transposed else tile.vector)
    init = sch.decompose_reduction(main, ko)
    init_loops = sch.get_loops(init)[-4:]
    # Step 4. Tensorize: fill, store, fragment loads, multiply-accumulate.
    names = _intrinsics(kind, short, "shared" if staged else "global", (b_transposed, b_width),
                        "f16" if acc16 else "f32")  # fmt: skip
    sch.tensorize(init_loops[2], names[3])
    acc_name = acc.name
    sch.tensorize(s16, names[4])
    if staged:  # one fragment tile per warp in shared memory (laid out once tensorized)
        stage = sch.get_block(acc_name + "_o")
        frag = (wm, wn, 16, staged_n)
        sch.transform_layout(stage, ("write", 0), _per_warp_tiles(sch, stage, frag))
    sch.tensorize(frag_loads[0], names[0])
    sch.tensorize(frag_loads[1], names[1])
    if kind == "wmma_s8":  # 32-byte aligned 16 x 16 int8 tiles (:mod:`._mm_int8_wmma`)
        for sh in shared:
            k16_planes(sch, sh)
    sch.tensorize(i16, names[2])
    # Step 5. Unroll the per-warp loops so fragments are indexed by constants; pipeline.
    for loop in (kk, mi, ni, smi, sni, pair, *init_loops[:2], *frag_tiles):
        sch.unroll(loop)
    if tile.pipeline:
        sch.annotate(ko, "software_pipeline_stage", [0, 0, tile.stages - 1])
        sch.annotate(ko, "software_pipeline_order", [0, 1, 2])


def _pair(wn: int, tn: int) -> int:
    """Fragment tiles a warp stores side by side at a time: two 8-wide mma tiles (16 columns,
    so that 32 threads write 16 bytes each) where the warp tile has an even number."""
    return 2 if tn < 16 and (wn // tn) % 2 == 0 else 1


def _accumulators(
    sch: Schedule, main: BlockRV, bx: LoopRV, tile: TensorCoreTile, frag: tuple[int, str]
) -> tuple[BlockRV, tuple[LoopRV, LoopRV, LoopRV, LoopRV]]:
    """The accumulator fragments (``frag``: tile width, scope), stored back per warp tile
    under ``bx``; the store block and its (row tiles, column tile pairs (see :func:`_pair`),
    the tiles of a pair, the 16-row store loop)."""
    tn, scope = frag
    wm, wn = tile.block_m // tile.warps_m, tile.block_n // tile.warps_n
    pair = _pair(wn, tn)
    acc = sch.cache_write(main, 0, scope)
    sch.reverse_compute_at(acc, bx)
    a0, a1 = sch.get_loops(acc)[-2:]
    swy, smi, s16 = sch.split(a0, [tile.warps_m, wm // 16, 16])
    swx, sni, spair, _ = sch.split(a1, [tile.warps_n, wn // (tn * pair), pair, tn])
    sch.reorder(swy, swx, smi, sni, spair, s16)
    sch.bind(sch.fuse(swy, swx), "threadIdx.y")
    return acc, (smi, sni, spair, s16)


def fuse_epilogue_at(sch: Schedule, store: BlockRV, tile_loop: LoopRV, elements: int) -> bool:
    """Run the epilogue of an accumulator ``store`` (the blocks reading what it writes, folded
    into as few as :func:`~..common.fold_epilogue` allows) under ``tile_loop``, the loop over
    a warp's fragment tiles of ``elements`` each: the tile goes to shared memory (the store
    intrinsic's shared form) and the warp's 32 threads apply the epilogue to it, each output
    element written once, in the output's dtype, 16 bytes per thread and step where the tile
    allows (the staged buffer is laid out by :func:`_per_warp_tiles` once the store is
    tensorized). False (the schedule unchanged) when ``store`` writes the output itself or
    the epilogue cannot move there (it then runs as its own kernel)."""
    if writes_param(sch, store):
        return False

    def move() -> None:
        for block in fold_epilogue(sch, store):
            sch.reverse_compute_at(block, tile_loop)
            loops = loops_below(sch, block, tile_loop)
            fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
            bits = block_node(sch, block).writes[0].buffer.dtype.bits
            vec = 128 // bits
            while vec > 1 and elements % (32 * vec):
                vec //= 2
            if vec > 1:
                _, tx, lanes = sch.split(fused, [None, 32, vec])
                sch.vectorize(lanes)
            else:
                tx = sch.split(fused, [None, 32])[1]
            sch.bind(tx, "threadIdx.x")
        sch.set_scope(store, 0, "shared")

    return attempt(sch, move)


def _per_warp_tiles(sch: Schedule, stage: BlockRV, frag: tuple[int, int, int, int]) -> IndexMap:
    """``[.., i, j] -> [.., i // wm, j // wn, i % wm // fm, j % wn // fn, i % fm, j % fn]``
    (``frag``: the warp tile ``wm x wn`` and the fragment tile ``fm x fn``) for the buffer
    ``stage`` writes: the fragment tile a warp stages is then one box per warp, so the
    shared buffer holds one fragment tile per warp, not the warps' whole bounding box."""
    wm, wn, fm, fn = frag

    def tiles(*i: Expr) -> tuple[Expr, ...]:
        r, c = i[-2], i[-1]
        return (*i[:-2], r // wm, c // wn, r % wm // fm, c % wn // fn, r % fm, c % fn)

    ndim = len(block_node(sch, stage).writes[0].buffer.shape)
    return IndexMap.from_func(tiles, ndim=ndim)


def _intrinsics(
    kind: str, short: str, store: str, b_load: tuple[bool, int], acc: str
) -> tuple[str, str, str, str, str]:
    """(load A, load B, multiply-accumulate, fill, store to ``store`` scope) intrinsics;
    ``b_load``: whether B is stored ``(n, k)`` and the width of its fragment loads; ``acc``:
    the accumulator (``f32``, or ``f16`` on mma)."""
    if kind == "mma_s8":
        store_s32 = f"mma_store_16x8_s32_{store}"
        return ("mma_load_a_16x32_s8", f"mma_load_b_nk_32x{b_load[1]}_s8",
                "mma_m16n8k32_s8s8s32", "mma_fill_16x8_s32", store_s32)  # fmt: skip
    if kind == "mma":
        nk, width = b_load
        load_b = f"mma_load_b_{'nk_' if nk else ''}16x{width}_{short}"
        return (f"mma_load_a_16x16_{short}", load_b,
                f"mma_m16n8k16_{short}{short}{acc}", f"mma_fill_16x8_{acc}",
                f"mma_store_16x8_{acc}_{store}")  # fmt: skip
    col = b_load[0]  # an (n, k) B: a col_major fragment
    dt, out = ("s8", "s32") if kind == "wmma_s8" else ("f16", "f32")
    return (f"wmma_load_a_16x16_{dt}", f"wmma_load_b_{'nk_' if col else ''}16x16_{dt}",
            f"wmma_16x16x16_{dt}{dt}{out}{'_bcol' if col else ''}", f"wmma_fill_16x16_{out}",
            f"wmma_store_16x16_{out}_{store}")  # fmt: skip


def _stage(
    sch: Schedule, main: BlockRV, kk: LoopRV, scopes: tuple[str, ...], tn: int,
    operands: tuple[int, int, bool],
) -> tuple[list[LoopRV], list[LoopRV], list[BlockRV], int]:  # fmt: skip
    """Shared (scope ``scopes[3]``) and fragment caches of both operands; (fragment load
    loops, their outer tile loops, the shared caches, the width of B's fragment loads: ``tn``,
    or ``2 tn`` for ``mma`` when the warp tile allows, one ``ldmatrix.x4`` loading two)."""
    loads, tiles, shared = [], [], []
    b_transposed, width = operands[2], tn
    for which, idx in enumerate(operands[:2]):
        sh = sch.cache_read(main, idx, scopes[3])
        inline_producers(sch, sh)
        frag = sch.cache_read(main, idx, scopes[which])
        if which == 1 and not b_transposed and _is_mma_s8(scopes):
            # an int8 (k, n) B: transposed on its way into shared memory, (n, k) there
            ndim = len(block_node(sch, sh).writes[0].buffer.shape)
            swap = IndexMap.from_func(lambda *i: (*i[:-2], i[-1], i[-2]), ndim=ndim)
            sch.transform_layout(sh, ("write", 0), swap)
            sch.transform_block_layout(frag, swap)  # iterate (n, k) as the nk intrinsics do
        if which == 1 and b_transposed:
            ndim = len(block_node(sch, sh).writes[0].buffer.shape)
            swap = IndexMap.from_func(lambda *i: (*i[:-2], i[-1], i[-2]), ndim=ndim)
            sch.transform_layout(frag, ("write", 0), swap)
        shared.append(sh)
        sch.compute_at(frag, kk)
        f0, f1 = sch.get_loops(frag)[-2:]
        if which == 0:
            t, r = sch.split(f0, [None, 16])
            loads.append(r)
        elif b_transposed or _is_mma_s8(scopes):  # iterating (n, k) as the nk intrinsics do
            width = _b_width(sch, f0, tn, scopes)
            t, r = sch.split(f0, [None, width])
            loads.append(r)
        else:
            width = _b_width(sch, f1, tn, scopes)
            t, _ = sch.split(f1, [None, width])
            sch.reorder(t, f0)
            loads.append(f0)
        tiles.append(t)
    return loads, tiles, shared, width


def _is_mma(scopes: tuple[str, ...]) -> bool:
    return scopes[0] in (_SCOPES["mma"][0], _SCOPES["mma_s8"][0])


def _is_mma_s8(scopes: tuple[str, ...]) -> bool:
    return scopes[0] == _SCOPES["mma_s8"][0]


def _b_width(sch: Schedule, n_loop: LoopRV, tn: int, scopes: tuple[str, ...]) -> int:
    """The width of B's fragment loads: two ``mma`` tiles when the warp's ``n`` extent is a
    multiple of 16, else one tile."""
    extent = loop_extent(sch, n_loop)
    if _is_mma(scopes) and extent is not None and extent % (2 * tn) == 0:
        return 2 * tn
    return tn


def _plain_copy(sch: Schedule, block: BlockRV) -> bool:
    """Whether ``block`` copies one buffer element for element (no guard, no arithmetic)."""
    body = block_node(sch, block).body
    return isinstance(body, BufferStore) and isinstance(body.value, BufferLoad)


def _fetch(
    sch: Schedule, block: BlockRV, threads: int, tile: TensorCoreTile, cols: int, vector: int
) -> None:
    """Cooperative fetch of a shared tile by all threads, ``vector`` elements per step, rows
    padded by ``tile.pad`` elements or swizzled (:func:`._mm_swizzle.swizzle_shared`)."""
    fused = sch.fuse(*sch.get_loops(block)[-2:])
    if vector > 1:
        _, ty, tx, vec = sch.split(fused, [None, threads // 32, 32, vector])
        sch.vectorize(vec)
    else:
        _, ty, tx = sch.split(fused, [None, threads // 32, 32])
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    if tile.swizzle:
        swizzle_shared(sch, block)
    elif tile.pad:
        ndim = len(block_node(sch, block).writes[0].buffer.shape)
        sch.storage_align(block, 0, ndim - 2, cols, tile.pad)
