"""Tensor-core GEMMs built through the public Schedule API (no hand-written IR).

``C[M, N] (fp32) = A[M, K] @ B[K, N]`` from ``topi.matmul(..., out_dtype="float32")`` on 16-bit
inputs. Each thread block computes a ``block_m x block_n`` tile with ``warps_m x warps_n``
warps, each warp a ``(block_m / warps_m) x (block_n / warps_n)`` tile as 16x8 (``mma.sync``)
or 16x16 (WMMA) tensor-core tiles; the reduction runs over ``block_k``-wide steps whose A and
B tiles are fetched cooperatively (16-byte vector loads) into padded shared memory, then
loaded into warp fragments (``ldmatrix`` / ``wmma::load_matrix_sync``) per 16-wide ``k``
step. The shared-memory step is software-pipelined over two stages (``cp.async`` on sm_80+).
"""

from __future__ import annotations

from dataclasses import dataclass

import tilecraft as tc
from tilecraft.ir import PrimFunc


@dataclass(frozen=True)
class GemmConfig:
    """Tile sizes of the tensor-core GEMM schedules."""

    block_m: int = 128
    block_n: int = 128
    block_k: int = 32
    warps_m: int = 2
    warps_n: int = 2
    pipeline: bool = True
    pad: int = 8
    vector: int = 8


def make_gemm(m: int, n: int, k: int, dtype: str = "float16") -> PrimFunc:
    """The unscheduled GEMM ``topi.matmul(A, B, out_dtype="float32")``."""
    a = tc.te.placeholder((m, k), dtype, name="A")
    b = tc.te.placeholder((k, n), dtype, name="B")
    c = tc.topi.matmul(a, b, out_dtype="float32")
    return tc.te.create_prim_func([a, b, c])


def _fetch(
    sch: tc.Schedule, block: tc.schedule.BlockRV, threads: int, cfg: GemmConfig, cols: int
) -> None:
    """Cooperative fetch of a shared tile by all ``threads`` of the block, ``cfg.vector``
    elements (16 bytes by default) per thread and step."""
    pad = cfg.pad
    f0, f1 = sch.get_loops(block)[-2:]
    fused = sch.fuse(f0, f1)
    _, ty, tx, vec = sch.split(fused, [None, threads // 32, 32, cfg.vector])
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    sch.vectorize(vec)
    if pad:
        sch.storage_align(block, 0, 0, cols, pad)


def _schedule(func: PrimFunc, cfg: GemmConfig, kind: str, short: str) -> tc.Schedule:
    mma = kind == "mma"
    tn = 8 if mma else 16
    wm, wn = cfg.block_m // cfg.warps_m, cfg.block_n // cfg.warps_n
    sch = tc.Schedule(func)
    c = sch.get_block("matmul")
    i, j, k = sch.get_loops(c)
    # Step 1. Block, warp and tensor-core tiles; warps on threadIdx.y (lanes: threadIdx.x)
    by, wy, mi, i16 = sch.split(i, [None, cfg.warps_m, wm // 16, 16])
    bx, wx, ni, jt = sch.split(j, [None, cfg.warps_n, wn // tn, tn])
    ko, kk, k16 = sch.split(k, [None, cfg.block_k // 16, 16])
    sch.reorder(by, bx, ko, wy, wx, kk, mi, ni, i16, jt, k16)
    sch.bind(by, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(sch.fuse(wy, wx), "threadIdx.y")
    threads = 32 * cfg.warps_m * cfg.warps_n
    # Step 2. Accumulators in warp fragments, stored back per warp tile
    scopes = (
        ("m16n8k16.matrixA", "m16n8k16.matrixB", "m16n8k16.accumulator")
        if mma
        else ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator")
    )
    acc = sch.cache_write(c, 0, scopes[2])
    sch.reverse_compute_at(acc, bx)
    a0, a1 = sch.get_loops(acc)[-2:]
    swy, smi, s16 = sch.split(a0, [cfg.warps_m, wm // 16, 16])
    swx, sni, _ = sch.split(a1, [cfg.warps_n, wn // tn, tn])
    sch.reorder(swy, swx, smi, sni, s16)
    sch.bind(sch.fuse(swy, swx), "threadIdx.y")
    # Step 3. Operands: global -> shared (per k step) -> warp fragments (per 16-wide k)
    loads, shared, tiles = [], [], []
    for idx in range(2):
        sh = sch.cache_read(c, idx, "shared")
        frag = sch.cache_read(c, idx, scopes[idx])
        shared.append(sh)
        sch.compute_at(frag, kk)
        f0, f1 = sch.get_loops(frag)[-2:]
        if idx == 0:
            t, r = sch.split(f0, [None, 16])
            loads.append(r)
        else:
            t, _ = sch.split(f1, [None, tn])
            sch.reorder(t, f0)
            loads.append(f0)
        tiles.append(t)
    for sh, cols in zip(shared, (cfg.block_k, cfg.block_n), strict=True):
        sch.compute_at(sh, ko)
        _fetch(sch, sh, threads, cfg, cols)
    init = sch.decompose_reduction(c, ko)
    init_loops = sch.get_loops(init)[-4:]
    # Step 4. Tensorize: fill, store, fragment loads, multiply-accumulate
    if mma:
        names = (f"mma_load_a_16x16_{short}", f"mma_load_b_16x8_{short}",
                 f"mma_m16n8k16_{short}{short}f32", "mma_fill_16x8_f32",
                 "mma_store_16x8_f32_global")  # fmt: skip
    else:
        names = ("wmma_load_a_16x16_f16", "wmma_load_b_16x16_f16", "wmma_16x16x16_f16f16f32",
                 "wmma_fill_16x16_f32", "wmma_store_16x16_f32_global")  # fmt: skip
    sch.tensorize(init_loops[2], names[3])
    sch.tensorize(s16, names[4])
    sch.tensorize(loads[0], names[0])
    sch.tensorize(loads[1], names[1])
    sch.tensorize(i16, names[2])
    # Step 5. Unroll the per-warp loops so fragment registers are indexed by constants
    for loop in (kk, mi, ni, smi, sni, *init_loops[:2], *tiles):
        sch.unroll(loop)
    # Step 6. Two-stage software pipeline over the shared-memory k steps
    if cfg.pipeline:
        sch.annotate(ko, "software_pipeline_stage", [0, 0, 1])
        sch.annotate(ko, "software_pipeline_order", [0, 1, 2])
    return sch


def schedule_mma_gemm(func: PrimFunc, cfg: GemmConfig | None = None) -> tc.Schedule:
    """The ``mma.sync`` m16n8k16 + ``ldmatrix`` schedule (fp16 or bf16 inputs, sm_80+)."""
    dt = str(func.params[0].dtype)  # type: ignore[union-attr]
    return _schedule(func, cfg or GemmConfig(), "mma", "f16" if dt == "float16" else "bf16")


def schedule_wmma_gemm(func: PrimFunc, cfg: GemmConfig | None = None) -> tc.Schedule:
    """The WMMA 16x16x16 schedule (fp16 inputs, sm_70+)."""
    return _schedule(func, cfg or GemmConfig(), "wmma", "f16")
