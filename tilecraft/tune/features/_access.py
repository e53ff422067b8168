"""Per-buffer access geometry of one store: strides, footprints, cache lines and reuse.

Indices are evaluated numerically: the stride of an access along a loop is how far the flat
address moves, on average, per iteration of that loop with every other loop at its start.
That handles the ``//`` and ``%`` of fused and split loops without symbolic analysis.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ...ir import (
    Add,
    Buffer,
    Cast,
    CmpOp,
    Expr,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    Select,
    Sub,
    Var,
)
from ._walk import Access, Loop, const_int

CACHE_LINE = 64
"""Bytes of a cache line."""

Env = dict[int, int]


def _div(a: int, b: int) -> int:
    return a // b if b else 0


def _mod(a: int, b: int) -> int:
    return a % b if b else 0


_BINARY: dict[type, Callable[[int, int], int]] = {
    Add: lambda a, b: a + b,
    Sub: lambda a, b: a - b,
    Mul: lambda a, b: a * b,
    FloorDiv: _div,
    FloorMod: _mod,
    Min: min,
    Max: max,
}


def evaluate(e: Expr, env: Env, lets: dict[int, Expr], depth: int = 0) -> int:
    """Integer value of index expression ``e`` (unknown variables and loads count as 0)."""
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, Var):
        value = env.get(id(e))
        if value is not None:
            return value
        bound = lets.get(id(e))
        return 0 if bound is None or depth > 64 else evaluate(bound, env, lets, depth + 1)
    op = _BINARY.get(type(e))
    if op is not None:
        return op(evaluate(e.a, env, lets, depth), evaluate(e.b, env, lets, depth))  # type: ignore[attr-defined]
    if isinstance(e, Cast):
        return evaluate(e.value, env, lets, depth)
    if isinstance(e, Select):
        return evaluate(e.true_value, env, lets, depth)
    if isinstance(e, CmpOp):
        return int(evaluate(e.a, env, lets, depth) < evaluate(e.b, env, lets, depth))
    return 0


def _flat(buffer: Buffer, indices: tuple[Expr, ...], env: Env, lets: dict[int, Expr]) -> int:
    """Row-major flat element offset of ``buffer[indices]``."""
    offset = 0
    for extent, index in zip(buffer.shape, indices, strict=False):
        offset = offset * max(const_int(extent), 1) + evaluate(index, env, lets)
    return offset


@dataclass(frozen=True, slots=True)
class Geometry:
    """How one buffer is accessed by one store."""

    itemsize: int
    strides: tuple[float, ...]
    """Average flat-address step per iteration of each loop (outer first); 0: independent."""
    unique: tuple[int, ...]
    """Distinct elements touched under each loop level (``unique[k]``: loops k.. inner)."""
    lines: float
    unique_lines: float
    reuse: str
    reuse_distance: float
    reuse_count: float
    stride: float


def _strides(acc: Access, loops: tuple[Loop, ...], lets: dict[int, Expr]) -> list[float]:
    env: Env = {id(lp.var): 0 for lp in loops}
    base = _flat(acc.buffer, acc.indices, env, lets)
    out: list[float] = []
    for lp in loops:
        if lp.extent <= 1:
            out.append(0.0)
            continue
        env[id(lp.var)] = lp.extent - 1
        moved = _flat(acc.buffer, acc.indices, env, lets) - base
        env[id(lp.var)] = 0
        out.append(moved / (lp.extent - 1))
    return out


def _unique(loops: tuple[Loop, ...], strides: list[float], numel: int) -> list[int]:
    unique = [1] * (len(loops) + 1)
    for k in range(len(loops) - 1, -1, -1):
        grow = loops[k].extent if strides[k] else 1
        unique[k] = min(unique[k + 1] * grow, numel) if numel > 0 else unique[k + 1] * grow
    return unique


def geometry(
    acc: Access, loops: tuple[Loop, ...], lets: dict[int, Expr], read_write: bool
) -> Geometry:
    """The access geometry of ``acc`` under ``loops``."""
    itemsize = acc.buffer.dtype.itemsize
    numel = 1
    for s in acc.buffer.shape:
        numel *= max(const_int(s), 0)
    strides = _strides(acc, loops, lets)
    unique = _unique(loops, strides, numel)
    trips = math.prod(lp.extent for lp in loops)
    same, inner_stride = 1, 0.0
    for lp, st in zip(reversed(loops), reversed(strides), strict=True):
        if st:
            inner_stride = abs(st)
            break
        same *= max(lp.extent, 1)
    per_line = max(1.0, CACHE_LINE / (itemsize * inner_stride)) if inner_stride else 1.0
    reuse, distance, count = "none", 0.0, 0.0
    for k in range(len(loops) - 1, -1, -1):
        if not strides[k] and loops[k].extent > 1:
            reuse = "loop"
            distance = float(math.prod(lp.extent for lp in loops[k + 1 :]))
            count = float(loops[k].extent)
            break
    if reuse == "none" and read_write:
        reuse, distance, count = "serial", 1.0, 1.0
    return Geometry(
        itemsize,
        tuple(strides),
        tuple(unique),
        trips / (same * per_line),
        unique[0] / per_line,
        reuse,
        distance,
        count,
        inner_stride,
    )
