"""int8 GEMMs of the GPU ``Matmul`` rule: int8 operands accumulated in int32 (a quantized
linear layer: ``C[i, j] += int32(A[i, k]) * int32(W[j, k])``, dequantized in the epilogue).
"""

from __future__ import annotations

from dataclasses import replace

from ...ir import Block, PrimFunc
from ...schedule.analysis import EinsumInfo, classify_einsum
from ._mm_tensor_core import TensorCoreTile

INT8_DTYPES = ("int8", "int32", "float16", "bfloat16", "float32")
"""Buffer dtypes of an int8 GEMM function: the operands, the accumulator, the epilogue's."""
INT8_WMMA_SM = 72
"""The oldest compute capability whose WMMA takes int8 operands (sm_70's takes fp16 only)."""


def int8_dtypes(func: PrimFunc) -> str | None:
    """Why ``func``'s buffers are not those of an int8 GEMM (:data:`INT8_DTYPES`, an int8
    one among them); None when they are."""
    dts = {str(buf.dtype) for buf in func.buffer_params}
    if "int8" not in dts:
        return "no int8 buffer"
    bad = sorted(dts - set(INT8_DTYPES))
    return f"buffers of dtype {bad}" if bad else None


def why_not_int8_einsum(einsum: EinsumInfo) -> str | None:
    """Why ``einsum`` is not int8 operands accumulated in int32; None when it is."""
    dts = (str(einsum.lhs.buffer.dtype), str(einsum.rhs.buffer.dtype))
    out = str(einsum.output.buffer.dtype)
    if dts != ("int8", "int8") or out != "int32":
        return (f"an einsum of {list(dts)} into {out} in a function with int8 buffers: of "
                "integer einsums, int8 operands into int32 only")  # fmt: skip
    return None


def int8_tile(tile: TensorCoreTile) -> TensorCoreTile:
    """The int8 form of a 16-bit tensor-core tile: the same bytes per shared row (twice the
    ``k`` elements: 64 int8 per k step for 32 fp16), rows padded by 16 bytes (not swizzled:
    the swizzle is checked for 16-bit tiles only; ldmatrix rows stay 16-byte aligned and a
    warp's 8 rows hit distinct banks), 16 int8 per 16-byte fetch, twice the warps along
    ``m``: a fragment element is one register (four int8 per register only as the ``mma``
    operand), so a 64 x 64 warp tile needs more than 255 registers; with 32 x 64 ptxas
    reports 140 (sm_80) and 136 (sm_90), no spills, at 4096^3."""
    return replace(tile, block_k=2 * tile.block_k, pad=2 * tile.pad, vector=2 * tile.vector,
                   warps_m=2 * tile.warps_m, elem_bytes=1, swizzle=False)  # fmt: skip


def int8_wmma_tile(tile: TensorCoreTile) -> TensorCoreTile:
    """The int8 form of a WMMA tile: the same bytes per shared row (64 int8 per k step for
    32 fp16), 16 int8 per 16-byte fetch, rows not padded (the tiles are laid out in planes of
    16 columns: :mod:`._mm_int8_wmma`), twice the warps along ``m``: with 64 x 64 warp tiles
    the dequantizing epilogue (a scale and a bias per column, unrolled over 16 fragments)
    takes ptxas to 255 registers at 4096^3 on sm_75, and a ``(k, n)`` weight (a row-major
    int8 ``matrix_b``) spills; with 32 x 64 it reports 190 (``(n, k)``) and 241 (``(k, n)``),
    no spills."""
    return replace(tile, block_k=2 * tile.block_k, pad=0, vector=2 * tile.vector,
                   warps_m=2 * tile.warps_m, elem_bytes=1, swizzle=False)  # fmt: skip


def tensor_core_kind(
    block: Block, kinds: str, largest: TensorCoreTile, int8_wmma: bool = False
) -> tuple[str, TensorCoreTile]:
    """The tensor-core schedule (``"mma"``, ``"mma_s8"``, ``"wmma"``, ``"wmma_s8"``; ``""``:
    none) of an einsum ``block`` on a target with ``kinds`` tensor cores, and the largest tile
    to try: int8 operands take ``mma.sync`` m16n8k32 (sm_80+), or int8 WMMA 16x16x16 where
    ``int8_wmma`` (sm_72+ without ``mma``: the sm_75 preset); elsewhere (sm_70) they keep
    ``kinds``, and :func:`._mm_tensor_core.why_not_tensor_core` says why it does not fit
    (the SIMT schedule takes them)."""
    einsum = classify_einsum(block)
    if einsum is None or str(einsum.lhs.buffer.dtype) != "int8":
        return kinds, largest
    if why_not_int8_einsum(einsum) is not None:
        return "", largest
    if kinds == "mma":
        return "mma_s8", int8_tile(largest)
    if kinds == "wmma" and int8_wmma:
        return "wmma_s8", int8_wmma_tile(largest)
    return kinds, largest
