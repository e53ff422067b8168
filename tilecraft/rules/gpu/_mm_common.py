"""Helpers of the GPU matmul-family rules (Matmul, GEMV, LowBatchGEMV): the GPU facts they read
from the target, the function-level match, and small scheduling steps on the public API."""

from __future__ import annotations

from dataclasses import dataclass

from ...ir import BufferLoad, For, IntImm, IterKind, PrimFunc, Var
from ...schedule import BlockRV, ExprRV, LoopRV, Schedule
from ...schedule.analysis import (
    BlockInfo,
    classify_einsum,
    is_multiply_accumulate,
)
from ...target import Target
from ..base import Decline
from ..common import (
    attempt,
    block_node,
    loads_of,
    localize_output,
    loop_extent,
    single_reduction,
)
from .config import gpu_arch

SPATIAL_THREADS = 256
"""Threads per block of the plain spatial kernels (copies, epilogues left outside a nest)."""


@dataclass(frozen=True)
class GPUFacts:
    """What the matmul-family rules need to know about a CUDA target.

    Attributes
    ----------
    sm
        Compute capability as a number (``sm_90a`` is 90).
    warp_size
        Threads per warp.
    max_threads
        Threads per block at most.
    shared_bytes
        Static shared memory per block.
    shared_optin_bytes
        Dynamic shared memory one block may opt in to.
    sm_count
        Multiprocessors (1 when the target does not say).
    tensor_cores
        ``"mma"`` (``mma.sync`` + ``ldmatrix`` + ``cp.async``, sm_80+), ``"wmma"`` (sm_70, sm_75)
        or ``""`` (none).
    """

    sm: int
    warp_size: int = 32
    max_threads: int = 1024
    shared_bytes: int = 48 * 1024
    sm_count: int = 1
    tensor_cores: str = ""
    shared_optin_bytes: int = 48 * 1024


def gpu_facts(target: Target) -> GPUFacts:
    """The :class:`GPUFacts` of a CUDA ``target``, from :func:`.config.gpu_arch`."""
    sm = target.compute_capability if target.is_gpu else 0
    arch = gpu_arch(target) if target.is_gpu else None
    if arch is None:  # older than every preset: no tensor cores, the launch defaults
        return GPUFacts(sm)
    tc = "mma" if arch.cp_async else "wmma" if arch.tensor_cores else ""
    return GPUFacts(sm, arch.warp_size, arch.max_threads_per_block, arch.shared_per_block,
                    max(arch.sm_count, 1), tc, arch.shared_per_block_optin)  # fmt: skip


def match_single_reduction(sch: Schedule) -> tuple[BlockInfo, list[BlockInfo]] | Decline:
    """The one reduction block and the other (injective) blocks, or why not."""
    found = single_reduction(sch)
    return Decline(found) if isinstance(found, str) else found


def stage_implicit_gemm(sch: Schedule, main: BlockInfo) -> Decline | None:
    """Make a multiply-accumulate whose reads are indexed by expressions (conv2d's
    ``x[n, c, h * s + r, w * s + q]``) an einsum: each such read is staged through ``reindex``
    (an im2col-like buffer indexed by the block's iterators, its producer, the padding,
    inlined into the staging block; the staging block may keep a unit iterator bound to a
    constant, so the function need not stay normalized: read ``main``'s block again with
    :func:`~..common.block_node`). Why it cannot be staged, or None."""
    if classify_einsum(main) is not None or not is_multiply_accumulate(main.block):
        return None
    out = main.writes[0].buffer
    loads = loads_of(main.block.body)
    for index, region in enumerate(main.reads):
        mine = [ld for ld in loads if ld.buffer is region.buffer]
        if region.buffer is out or all(_iterator_indexed(ld) for ld in mine):
            continue
        staged = sch.try_(sch.reindex, main.block_rv, ("read", index))
        if not staged:
            assert staged.error is not None
            return Decline(f"cannot stage the implicit GEMM's input: {staged.error.short}")
        for producer in sch.get_producers(staged.value):
            attempt(sch, sch.compute_inline, producer)
    return None


def _iterator_indexed(load: BufferLoad) -> bool:
    return all(isinstance(i, (Var, IntImm)) for i in load.indices)


def knob(sch: Schedule, tunable: bool, value: int, choices: list[int]) -> int | ExprRV:
    """A Config number used as a split factor: ``value``, or when ``tunable`` a
    ``sample_categorical`` over ``choices`` (uniform; each choice must give a valid schedule
    with the same later steps, so a re-drawn decision replays). The caller passes the result
    straight to ``split``."""
    opts = sorted(set(choices) | {value})
    if not tunable or len(opts) == 1:
        return value
    return sch.sample_categorical(opts, [1.0 / len(opts)] * len(opts))


def halvings_and_double(value: int, ok: object) -> list[int]:
    """``value // 2``, ``value`` and ``value * 2`` where ``ok(choice)`` holds (the candidates
    of a tunable factor)."""
    assert callable(ok)
    return [c for c in (value // 2, value, value * 2) if c >= 1 and ok(c)]


def float_dtypes(func: PrimFunc) -> str | None:
    """Why the function's buffers are not all float16/bfloat16/float32; None when they are."""
    for buf in func.buffer_params:
        if str(buf.dtype) not in ("float16", "bfloat16", "float32"):
            return f"buffer {buf.name} has dtype {buf.dtype}; float16/bfloat16/float32 only"
    return None


def inline_producers(sch: Schedule, block: BlockRV) -> None:
    """Inline every producer chain of ``block`` (pad copies, casts...) into it when allowed."""
    progress = True
    while progress:
        progress = False
        for producer in sch.get_producers(block):
            if attempt(sch, sch.compute_inline, producer):
                progress = True
                break


def bind_spatial(sch: Schedule, block: BlockRV, threads: int = SPATIAL_THREADS) -> None:
    """Run a root-level spatial block as its own kernel: its loops fused, split over
    ``threads`` threads per block (a guard when they do not divide)."""
    loops = sch.get_loops(block)
    fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    ext = loop_extent(sch, fused)
    if ext is not None and ext <= threads:
        threads = max(ext, 1)
    bx, tx = sch.split(fused, [None, threads])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")


def bind_unbound_roots(sch: Schedule) -> bool:
    """Give every root block whose loops are not thread-bound a kernel of its own
    (:func:`bind_spatial`); False when one of them is not spatial."""
    root = sch.get_block("root") if attempt(sch, sch.get_block, "root") else None
    blocks = sch.get_child_blocks(root) if root is not None else []
    for block in blocks:
        loops = sch.get_loops(block)
        if not loops or any(_bound(sch, lp) for lp in loops):
            continue
        node = block_node(sch, block)
        if any(iv.kind is not IterKind.SPATIAL for iv in node.iter_vars):
            return False
        if not attempt(sch, bind_spatial, sch, block):
            return False
    return True


def _bound(sch: Schedule, loop: LoopRV) -> bool:
    node = sch.get(loop)
    return isinstance(node, For) and node.thread is not None


def accumulate_locally(sch: Schedule, block: BlockRV, loop: LoopRV) -> None:
    """Accumulate ``block`` in registers written back under ``loop``: its intermediate output
    becomes local with the epilogue moved under ``loop``, else a local copy is written back
    there (the epilogue then runs as its own kernel)."""
    if localize_output(sch, block, loop):
        return

    def copy_back() -> None:
        store = sch.cache_write(block, 0, "local")
        sch.reverse_compute_at(store, loop)

    attempt(sch, copy_back)
