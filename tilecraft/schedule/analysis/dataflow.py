"""Producers, consumers and outputs among the blocks of a normalized function.

These answer from a :func:`~tilecraft.schedule.analysis.normalize_prim_func` result without
touching the schedule or its trace (``Schedule.get_producers``/``get_consumers`` answer the
same questions with traced handles). A block *produces* for another when it writes a buffer
the other reads, by buffer identity; a block is an *output block* when it writes a buffer that
is a parameter of the function.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._util import expect
from .block_info import BlockInfo


def _check(where: str, infos: Sequence[BlockInfo], info: BlockInfo | None = None) -> None:
    expect(where, infos, (list, tuple), "infos", "a list of BlockInfo")
    for item in infos:
        expect(where, item, BlockInfo, "infos", "a list of BlockInfo")
    if info is not None:
        expect(where, info, BlockInfo, "info", "a BlockInfo")


def producers(infos: Sequence[BlockInfo], info: BlockInfo) -> list[BlockInfo]:
    """The other blocks of ``infos`` that write a buffer ``info`` reads, in program order.

    Parameters
    ----------
    infos
        The blocks of one function (from ``normalize_prim_func``).
    info
        The block asked about.

    Returns
    -------
    list of BlockInfo
        Possibly empty.
    """
    _check("producers", infos, info)
    reads = {id(r.buffer) for r in info.reads}
    return [
        b for b in infos if b.name != info.name and any(id(w.buffer) in reads for w in b.writes)
    ]


def consumers(infos: Sequence[BlockInfo], info: BlockInfo) -> list[BlockInfo]:
    """The other blocks of ``infos`` that read a buffer ``info`` writes, in program order.

    Parameters
    ----------
    infos
        The blocks of one function (from ``normalize_prim_func``).
    info
        The block asked about.

    Returns
    -------
    list of BlockInfo
        Possibly empty (an output block read by no other block).
    """
    _check("consumers", infos, info)
    writes = {id(w.buffer) for w in info.writes}
    return [
        b for b in infos if b.name != info.name and any(id(r.buffer) in writes for r in b.reads)
    ]


def output_blocks(infos: Sequence[BlockInfo]) -> list[BlockInfo]:
    """The blocks that write a parameter buffer of the function, in program order.

    Parameters
    ----------
    infos
        The blocks of one function (from ``normalize_prim_func``).

    Returns
    -------
    list of BlockInfo
        The output blocks.
    """
    _check("output_blocks", infos)
    return [b for b in infos if b.is_output]
