"""Where each lane of a warp keeps the elements of a tensor-core tile.

The functions take a lane (an ``int`` or an IR expression) and an element number ``e`` of
that lane's fragment and return the element's ``(row, col)`` in the tile; the same arithmetic
serves the lowering (IR expressions) and the reference semantics and tests (Python ints).
``mma.sync`` m16n8k16 with 16-bit inputs (PTX ISA, "Matrix Fragments for mma.m16n8k16 with
floating point type"): with ``g = lane // 4`` and ``t = lane % 4``,

- matrixA (16x16, m x k), 8 elements: ``row = g + 8 * ((e // 2) % 2)``,
  ``col = 2 * t + e % 2 + 8 * (e // 4)``;
- matrixB (16x8, k x n), 4 elements: ``row = 2 * t + e % 2 + 8 * (e // 2)``, ``col = g``;
- accumulator (16x8), 4 elements: ``row = g + 8 * (e // 2)``, ``col = 2 * t + e % 2``.

``ldmatrix`` (m8n8, 16-bit): lanes ``8 j .. 8 j + 7`` give the row addresses of matrix ``j``;
register ``j`` of lane ``l`` receives row ``l // 4``, columns ``2 (l % 4)`` and ``+ 1`` of
matrix ``j`` (with ``.trans``: column ``l // 4``, rows ``2 (l % 4)`` and ``+ 1``). Loading a
16x16 matrixA tile as four 8x8 matrices (top-left, bottom-left, top-right, bottom-right) gives
exactly the matrixA layout above; a 16x8 matrixB tile stored k-major (rows of ``n``) as two
transposed 8x8 matrices (top, bottom) gives the matrixB layout, and so does one stored n-major
(rows of ``k``: an ``(out, in)`` weight) as two 8x8 matrices (left, right) without
``.trans``; ``.x4`` loads two matrixB tiles side by side, matrices 2 and 3 the second.

``mma.sync`` m16n8k32 with int8 inputs ("Matrix Fragments for mma.m16n8k32", ``.s8``): each
32-bit register holds four consecutive ``k`` of one row (A) or column (B),

- matrixA (16x32, m x k), 16 elements: ``row = g + 8 * ((e // 4) % 2)``,
  ``col = 4 * t + e % 4 + 16 * (e // 8)``;
- matrixB (32x8, k x n), 8 elements: ``row = 4 * t + e % 4 + 16 * (e // 4)``, ``col = g``;
- accumulator (16x8, int32): as m16n8k16's.

An 8x8 ``b16`` matrix of ``ldmatrix`` is 8 rows of 16 int8: register ``j`` of lane ``l``
receives row ``l // 4``, bytes ``4 (l % 4) .. + 3``. The four 8x16 quarters of a 16x32
matrixA tile (same order as above) give the matrixA layout; a 32x8 matrixB tile stored n x k
(rows of 32 ``k``) as two 8x16 matrices (left, right) gives the matrixB layout, without
``.trans`` (which transposes 16-bit elements: a k x n int8 tile cannot be loaded so).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from ..ir import Call, Expr, IntImm

L = TypeVar("L", int, Expr)

TILE_SHAPE = {
    "m16n8k16.matrixA": (16, 16),
    "m16n8k16.matrixB": (16, 8),
    "m16n8k16.accumulator": (16, 8),
    "m16n8k32.matrixA": (16, 32),
    "m16n8k32.matrixB": (32, 8),
    "m16n8k32.accumulator": (16, 8),
    "wmma.matrix_a": (16, 16),
    "wmma.matrix_b": (16, 16),
    "wmma.matrix_b_col": (16, 16),
    "wmma.accumulator": (16, 16),
}
"""Tile shape (rows, cols) of each warp fragment scope."""
LANE_ELEMENTS = {
    "m16n8k16.matrixA": 8, "m16n8k16.matrixB": 4, "m16n8k16.accumulator": 4,
    "m16n8k32.matrixA": 16, "m16n8k32.matrixB": 8, "m16n8k32.accumulator": 4,
}  # fmt: skip
"""Elements each lane holds of one tile of an ``mma`` fragment scope."""
WARP = 32


def matrix_a(lane: L, e: int) -> tuple[L, L]:
    """``(row, col)`` of element ``e`` of ``lane``'s matrixA fragment."""
    return lane // 4 + 8 * ((e // 2) % 2), lane % 4 * 2 + (e % 2 + 8 * (e // 4))


def matrix_b(lane: L, e: int) -> tuple[L, L]:
    """``(row, col)`` (k, n) of element ``e`` of ``lane``'s matrixB fragment."""
    return lane % 4 * 2 + (e % 2 + 8 * (e // 2)), lane // 4


def accumulator(lane: L, e: int) -> tuple[L, L]:
    """``(row, col)`` of element ``e`` of ``lane``'s accumulator fragment."""
    return lane // 4 + 8 * (e // 2), lane % 4 * 2 + e % 2


def matrix_a_s8(lane: L, e: int) -> tuple[L, L]:
    """``(row, col)`` of element ``e`` of ``lane``'s m16n8k32 (int8) matrixA fragment."""
    return lane // 4 + 8 * ((e // 4) % 2), lane % 4 * 4 + (e % 4 + 16 * (e // 8))


def matrix_b_s8(lane: L, e: int) -> tuple[L, L]:
    """``(row, col)`` (k, n) of element ``e`` of ``lane``'s m16n8k32 (int8) matrixB fragment."""
    return lane % 4 * 4 + (e % 4 + 16 * (e // 4)), lane // 4


LAYOUT = {
    "m16n8k16.matrixA": matrix_a,
    "m16n8k16.matrixB": matrix_b,
    "m16n8k16.accumulator": accumulator,
    "m16n8k32.matrixA": matrix_a_s8,
    "m16n8k32.matrixB": matrix_b_s8,
    "m16n8k32.accumulator": accumulator,
}
"""The per-lane layout of each ``mma`` fragment scope."""


def ldmatrix_row(lane: L, num: int, nk: bool = False) -> tuple[L, L]:
    """``(row, col)`` within the loaded tile of the row whose address ``lane`` gives to
    ``ldmatrix.x{num}`` (matrices stacked top-to-bottom, then left-to-right; with ``nk``, a
    matrixB tile stored n x k: matrices left-to-right, then top-to-bottom, so that matrix
    ``j`` holds ``k`` rows ``8 (j % 2) ..`` of the ``n`` tile ``j // 2``)."""
    if nk:  # lanes 16 .. 31 of an x2 repeat the addresses of lanes 0 .. 15 (unused)
        return lane % 8 + (lane // 16 * 8 if num == 4 else lane * 0), lane // 8 % 2 * 8
    if num == 4:
        return lane % 16, lane // 16 * 8
    if num == 2:
        return lane % 16, lane * 0
    return lane % 8, lane * 0


_MEMORY = ("global", "shared", "shared.dyn", "local")
_MMA_OPERAND = ("m16n8k16.matrixA", "m16n8k16.matrixB", "m16n8k32.matrixA")
_MMA_ACCUMULATOR = ("m16n8k16.accumulator", "m16n8k32.accumulator")
_WMMA_OPERAND = ("wmma.matrix_a", "wmma.matrix_b", "wmma.matrix_b_col")
TILE_OP_SCOPES: dict[str, tuple[tuple[str, ...], ...]] = {
    "mma_sync_m16n8k16": (("m16n8k16.accumulator",), ("m16n8k16.matrixA",), ("m16n8k16.matrixB",)),
    "mma_load_matrix": (_MMA_OPERAND, ("shared", "shared.dyn")),
    "mma_sync_m16n8k32": (("m16n8k32.accumulator",), ("m16n8k32.matrixA",), ("m16n8k32.matrixB",)),
    "mma_load_matrix_b": (("m16n8k16.matrixB", "m16n8k32.matrixB"), ("shared", "shared.dyn")),
    "mma_fill": (_MMA_ACCUMULATOR,),
    "mma_store": (_MEMORY, _MMA_ACCUMULATOR),
    "wmma_sync": (
        ("wmma.accumulator",),
        ("wmma.matrix_a",),
        ("wmma.matrix_b", "wmma.matrix_b_col"),
    ),
    "wmma_load_matrix": (_WMMA_OPERAND, _MEMORY),
    "wmma_fill": (("wmma.accumulator",),),
    "wmma_store": (_MEMORY, ("wmma.accumulator",)),
}
"""The storage scopes each address operand of a warp tile operation may have."""


def footprint(call: Call, k: int, scope: str) -> tuple[int, int]:
    """The shape of the fragment tiles argument ``k`` of warp tile operation ``call`` names:
    the scope's tile, or two side by side for ``mma_load_matrix_b`` with ``tiles = 2``."""
    rows, cols = TILE_SHAPE[scope]
    if call.op == "mma_load_matrix_b" and k == 0:
        tiles = call.args[3]
        return rows, cols * (tiles.value if isinstance(tiles, IntImm) else 1)
    return rows, cols


def tile_op_error(op: str, scopes: Sequence[str]) -> str | None:
    """Why warp tile operation ``op`` cannot take address operands of ``scopes`` (None: ok)."""
    allowed = TILE_OP_SCOPES.get(op)
    if allowed is None:
        return f"{op} is not a warp tile operation"
    for k, (scope, ok) in enumerate(zip(scopes, allowed, strict=True)):
        if scope not in ok:
            return f"{op}: operand {k} is in scope {scope!r}, expected one of {list(ok)}"
    return None
