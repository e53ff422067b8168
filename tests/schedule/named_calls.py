"""Name-based calls of the block primitives, for tests written against function + block name.

Each helper schedules ``func`` afresh, turns block names into handles with ``get_block`` and
loop variables into loop handles, applies the primitive through :class:`Schedule` (its
argument checks and transactions included) and returns the new function (and the name of
the block the primitive returned).
"""

from __future__ import annotations

from collections.abc import Sequence

from tilecraft.ir import PrimFunc, Var
from tilecraft.schedule import IndexMap, LoopRV, Schedule


def compute_at(
    func: PrimFunc, block: str, loop: Var, preserve_unit_loops: bool = False, index: int = -1
) -> PrimFunc:
    sch = Schedule(func)
    sch.compute_at(sch.get_block(block), LoopRV(loop), preserve_unit_loops, index)
    return sch.func


def reverse_compute_at(
    func: PrimFunc, block: str, loop: Var, preserve_unit_loops: bool = False, index: int = -1
) -> PrimFunc:
    sch = Schedule(func)
    sch.reverse_compute_at(sch.get_block(block), LoopRV(loop), preserve_unit_loops, index)
    return sch.func


def compute_inline(func: PrimFunc, block: str) -> PrimFunc:
    sch = Schedule(func)
    sch.compute_inline(sch.get_block(block))
    return sch.func


def reverse_compute_inline(func: PrimFunc, block: str) -> PrimFunc:
    sch = Schedule(func)
    sch.reverse_compute_inline(sch.get_block(block))
    return sch.func


def cache_read(
    func: PrimFunc,
    block: str,
    read_buffer_index: int,
    storage_scope: str,
    consumer_blocks: Sequence[str] | None = None,
) -> tuple[PrimFunc, str]:
    sch = Schedule(func)
    consumers = None if consumer_blocks is None else [sch.get_block(n) for n in consumer_blocks]
    rv = sch.cache_read(sch.get_block(block), read_buffer_index, storage_scope, consumers)
    return sch.func, rv.name


def cache_write(
    func: PrimFunc, block: str, write_buffer_index: int, storage_scope: str
) -> tuple[PrimFunc, str]:
    sch = Schedule(func)
    rv = sch.cache_write(sch.get_block(block), write_buffer_index, storage_scope)
    return sch.func, rv.name


def set_scope(func: PrimFunc, block: str, buffer_index: int, storage_scope: str) -> PrimFunc:
    sch = Schedule(func)
    sch.set_scope(sch.get_block(block), buffer_index, storage_scope)
    return sch.func


def storage_align(
    func: PrimFunc, block: str, buffer_index: int, axis: int, factor: int, offset: int
) -> PrimFunc:
    sch = Schedule(func)
    sch.storage_align(sch.get_block(block), buffer_index, axis, factor, offset)
    return sch.func


def transform_layout(
    func: PrimFunc, block: str, buffer: tuple[str, int], index_map: IndexMap
) -> PrimFunc:
    sch = Schedule(func)
    sch.transform_layout(sch.get_block(block), buffer, index_map)
    return sch.func


def reindex(func: PrimFunc, block: str, buffer: tuple[str, int]) -> tuple[PrimFunc, str]:
    sch = Schedule(func)
    rv = sch.reindex(sch.get_block(block), buffer)
    return sch.func, rv.name


def decompose_reduction(func: PrimFunc, block: str, loop: Var) -> tuple[PrimFunc, str]:
    sch = Schedule(func)
    rv = sch.decompose_reduction(sch.get_block(block), LoopRV(loop))
    return sch.func, rv.name


def rfactor(func: PrimFunc, loop: Var, factor_axis: int = 0) -> tuple[PrimFunc, str]:
    """``rfactor`` of the one reduction block under ``loop``."""
    sch = Schedule(func)
    rv = sch.rfactor(LoopRV(loop), factor_axis)
    return sch.func, rv.name
