"""The XOR-swizzled shared-memory layout requested by ``Schedule.storage_swizzle``.

A swizzled buffer keeps its logical shape and indices through scheduling and lowering (so
tensorize, warp-fragment lowering and the ``ldmatrix`` per-lane row addresses see plain 2-d
tiles); :class:`~tilecraft.lower.FlattenBuffer` applies the layout when it computes the flat
offset. Each row of the last axis is cut into 16-byte chunks (``128 / bits`` elements), and
chunk ``c`` of row ``r`` is stored at chunk ``c ^ ((r // per) % m)`` of that row, where, for a
row of ``n`` chunks, ``per = max(1, 8 // n)`` rows share one 128-byte line of the 32 banks and
``m = min(n, 8)``. Then

- the 8 rows of an ``ldmatrix`` 8 x 8 matrix (one 16-byte chunk each, the same logical chunk
  of 8 consecutive rows) fall in 8 distinct 16-byte bank groups, and
- 8 consecutive threads storing 16 bytes each (one ``cp.async``/vector phase: consecutive
  chunks of one or more rows) also hit 8 distinct bank groups,

without padding: the buffer occupies exactly its elements. Rows of 16 bytes (``n = 1``) are
left as they are (no swizzle is possible, nor needed for 16-byte reads of distinct rows
spaced 16 bytes apart).

How XOR is expressed: the IR has no integer bitwise operators, and adding one (printer,
parser, JSON, hashing, C/CUDA/emulator codegen, simplifier and bound rules) for a single
layout would spread through every layer. The swizzle is instead written with floor
division and modulo, bit by bit: ``a ^ b`` over ``log2(m)`` bits is
``sum_k 2^k * ((a // 2^k + b // 2^k) % 2)`` (plus the bits of ``a`` above them), which the
analyzer bounds exactly (each term is 0 or ``2^k``) and simplifies (a 16-byte copy's lanes
stay contiguous, its base 16-byte aligned). It appears only after flattening, in lowered
code. The price is a few integer operations per address: nvcc emits shifts, adds and masks,
not ``xor`` (a 128 x 128 x 32 sm_80 kernel, 3 stages: 678 PTX instructions against 600
padded, with the same registers within a few); an ``Xor`` expression node would save those
and can replace this function alone if a second use appears.
"""

from __future__ import annotations

from ..ir import Expr, IntImm, cast

LINE_CHUNKS = 8
"""16-byte chunks in one 128-byte line of the 32 four-byte banks."""


def swizzle_shape(chunks: int) -> tuple[int, int]:
    """``(per, m)`` for rows of ``chunks`` 16-byte chunks: rows per 128-byte line and the
    period of the XOR pattern (see the module docstring)."""
    return max(1, LINE_CHUNKS // chunks), min(chunks, LINE_CHUNKS)


def swizzled_chunk(row: int, chunk: int, chunks: int) -> int:
    """Where logical chunk ``chunk`` of ``row`` is stored in a row of ``chunks`` chunks."""
    per, m = swizzle_shape(chunks)
    return chunk ^ ((row // per) % m)


def swizzle_supported(cols: int, bits: int) -> bool:
    """Whether rows of ``cols`` elements of ``bits`` bits can be swizzled: whole 16-byte
    chunks, a power-of-two number of them."""
    if (cols * bits) % 128:
        return False
    chunks = cols * bits // 128
    return chunks >= 1 and chunks & (chunks - 1) == 0


def swizzled_column(row: Expr, col: Expr, cols: int, bits: int) -> Expr:
    """The stored column of logical element ``(row, col)`` in rows of ``cols`` elements of
    ``bits`` bits (``swizzle_supported``), as an expression of floor division and modulo."""
    chunk = 128 // bits
    chunks = cols // chunk
    per, m = swizzle_shape(chunks)
    dt = col.dtype
    row = cast(row, dt)

    def c(v: int) -> Expr:
        return IntImm(dt, v)

    if m == 1:
        return col
    # bits of the chunk index above the XOR's, then each XORed bit, then the element in it
    out: Expr = (col // c(chunk * m)) * c(chunk * m) + col % c(chunk)
    k = 1
    while k < m:
        bit = (col // c(chunk * k) + row // c(per * k)) % c(2)
        out = out + bit * c(chunk * k)
        k *= 2
    return out
