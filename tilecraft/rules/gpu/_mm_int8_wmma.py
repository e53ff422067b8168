"""The shared-memory layout of int8 operand tiles for WMMA (kind ``"wmma_s8"``, sm_72+).

``load_matrix_sync`` takes a 32-byte aligned pointer. A 16 x 16 int8 tile of a row-major
shared tile starts ``16 c`` bytes into its rows (``c``: the tile's column), so every other
tile along a row would be 16 bytes off. The tiles are therefore kept in *planes* of 16
columns: ``[.., r, c] -> [.., c // 16, r, c % 16]``, each plane ``rows x 16`` int8 (``ldm``
16), every tile then starting at a multiple of 256 bytes. Each plane is followed by 32 bytes
of padding (plane stride ``= 32 (mod 128)`` bytes): the cooperative fetch's 16-byte stores of
one row go to 4 planes, which without it would start in the same banks.
"""

from __future__ import annotations

from ...ir import Expr
from ...schedule import BlockRV, IndexMap, Schedule
from ..common import block_node

PLANE = 16
"""Columns (int8) of one plane: the k (or n) of one WMMA tile."""
PLANE_PAD = 32
"""Bytes after each plane (see the module docstring)."""


def k16_planes(sch: Schedule, block: BlockRV) -> None:
    """Lay the shared tile ``block`` writes out in planes of 16 columns (module docstring)."""
    ndim = len(block_node(sch, block).writes[0].buffer.shape)

    def planes(*i: Expr) -> tuple[Expr, ...]:
        r, c = i[-2], i[-1]
        return (*i[:-2], c // PLANE, r, c % PLANE)

    sch.transform_layout(block, ("write", 0), IndexMap.from_func(planes, ndim=ndim))
    sch.storage_align(block, 0, ndim - 2, 128, PLANE_PAD)
