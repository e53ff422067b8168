"""Which elements the threads of a block touch: the analysis behind barriers and the check
that register buffers stay private (package-private).

An access is an index (one expression per dimension) under its enclosing loops. Two accesses
*cross threads* when some element is touched by one thread through the first and by another
thread of the same block through the second. The answer is computed by evaluating the
indices over every thread of the block and every iteration of the loops that vary between
the two accesses, with numpy; loops that enclose both accesses at the point where they meet
take one common value (a few sample values are tried). Only the variables the indices use are
enumerated, so typical kernels stay small; beyond a size cap, or on an index the evaluator
does not know, the answer is "unknown" (``None``) and each caller picks its safe side.

Thread identity is the block's full thread index: an access that no ``threadIdx.y`` loop
encloses is still executed by every ``threadIdx.y`` value of the block.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir import (
    Add,
    Cast,
    Expr,
    FloorDiv,
    FloorMod,
    For,
    ForKind,
    IntImm,
    Max,
    Min,
    Mul,
    Sub,
    Var,
    collect_vars,
)

BLOCK_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
_CAP = 1 << 18  # points evaluated per access and sample


@dataclass(frozen=True)
class Footprint:
    """One access: its indices and every loop around it inside the kernel, outermost first."""

    indices: tuple[Expr, ...]
    loops: tuple[For, ...]


def evaluate(e: Expr, env: Mapping[int, np.ndarray]) -> np.ndarray | None:
    """Vectorized integer value of ``e`` (variables from ``env``); None when unsupported."""
    if isinstance(e, IntImm):
        return np.asarray(e.value, dtype=np.int64)
    if isinstance(e, Var):
        return env.get(id(e))
    if isinstance(e, Cast):
        return evaluate(e.value, env) if e.dtype.is_integer else None
    ops: dict[type, Any] = {
        Add: np.add,
        Sub: np.subtract,
        Mul: np.multiply,
        FloorDiv: np.floor_divide,
        FloorMod: np.mod,
        Min: np.minimum,
        Max: np.maximum,
    }
    fn = ops.get(type(e))
    if fn is None:
        return None
    a, b = evaluate(e.a, env), evaluate(e.b, env)  # type: ignore[attr-defined]
    if a is None or b is None:
        return None
    if fn in (np.floor_divide, np.mod) and np.any(b == 0):
        return None
    return fn(a, b)  # type: ignore[no-any-return]


def is_thread_loop(loop: For) -> bool:
    """A loop bound to a ``threadIdx`` index."""
    return loop.kind is ForKind.THREAD_BINDING and (loop.thread or "") in BLOCK_TAGS


def launch_extents(loops: Sequence[For]) -> dict[str, int] | None:
    """Per ``threadIdx`` tag, the largest constant extent bound to it (None: one is symbolic)."""
    out: dict[str, int] = {}
    for lp in loops:
        if not is_thread_loop(lp):
            continue
        if not isinstance(lp.extent, IntImm):
            return None
        tag = lp.thread or ""
        out[tag] = max(out.get(tag, 1), lp.extent.value)
    return out


def _const(e: Expr) -> int | None:
    return e.value if isinstance(e, IntImm) else None


def _samples(loop: For) -> list[int] | None:
    lo, ext = _const(loop.min), _const(loop.extent)
    if lo is None or ext is None or ext <= 0:
        return None
    return sorted({lo, lo + min(1, ext - 1), lo + ext - 1})


_MAX_COMBOS = 64


def _combos(loops: list[For]) -> Iterator[tuple[int, ...]] | None:
    """Values of ``loops`` to decide at: every combination when there are at most
    ``_MAX_COMBOS`` (which threads share an element can change from one block to the next,
    as when a block's tile starts at ``bx * 8 % 20``), else the first, second and last value
    of each loop (up to ``_MAX_COMBOS`` combinations); None for a symbolic loop."""
    samples = [_samples(lp) for lp in loops]
    if any(s is None for s in samples):
        return None
    extents = [_const(lp.extent) or 0 for lp in loops]
    if math.prod(extents) <= _MAX_COMBOS:
        starts = [_const(lp.min) or 0 for lp in loops]
        return itertools.product(*(range(a, a + e) for a, e in zip(starts, extents, strict=True)))
    return itertools.islice(itertools.product(*samples), _MAX_COMBOS)  # type: ignore[arg-type]


class _Grid:
    """Thread ids of the block and, per tag, their index values."""

    def __init__(self, launch: Mapping[str, int]) -> None:
        self.tags = [t for t in BLOCK_TAGS if launch.get(t, 1) > 1]
        sizes = [launch[t] for t in self.tags]
        self.count = int(np.prod(sizes, dtype=np.int64)) if sizes else 1
        grids = np.meshgrid(*[np.arange(n, dtype=np.int64) for n in sizes], indexing="ij")
        self.values = {t: g.ravel() for t, g in zip(self.tags, grids, strict=True)}


def _points(
    fp: Footprint, grid: _Grid, depth: int, fixed: Mapping[int, int]
) -> tuple[np.ndarray, np.ndarray] | None:
    """``(elements, thread ids)`` of ``fp``: one row per thread and varying iteration."""
    used = {id(v) for i in fp.indices for v in collect_vars(i)}
    varying = [lp for lp in fp.loops[depth:] if not is_thread_loop(lp) and id(lp.loop_var) in used]
    ranges = []
    for lp in varying:
        lo, ext = _const(lp.min), _const(lp.extent)
        if lo is None or ext is None:
            return None
        ranges.append(np.arange(lo, lo + max(ext, 0), dtype=np.int64))
    size = grid.count * int(np.prod([len(r) for r in ranges], dtype=np.int64))
    if size > _CAP:
        return None
    axes = np.meshgrid(np.arange(grid.count, dtype=np.int64), *ranges, indexing="ij")
    tid = axes[0].ravel()
    env: dict[int, np.ndarray] = {k: np.asarray(v, dtype=np.int64) for k, v in fixed.items()}
    mask = np.ones(tid.shape, dtype=bool)
    for lp in fp.loops:
        if is_thread_loop(lp):
            tag = lp.thread or ""
            values = grid.values.get(tag, np.zeros(grid.count, dtype=np.int64))[tid]
            if _const(lp.min) != 0:
                return None
            env[id(lp.loop_var)] = values
            mask &= values < _const(lp.extent)  # type: ignore[operator]
    for lp, ax in zip(varying, axes[1:], strict=True):
        env[id(lp.loop_var)] = ax.ravel()
    cols = []
    for index in fp.indices:
        if any(id(v) not in env for v in collect_vars(index)):
            return None
        value = evaluate(index, env)
        if value is None:
            return None
        cols.append(np.broadcast_to(value, tid.shape))
    elems = np.stack(cols, axis=1) if cols else np.zeros((tid.size, 0), dtype=np.int64)
    return elems[mask], tid[mask]


def crosses_threads(
    a: Footprint, b: Footprint, depth: int, launch: Mapping[str, int]
) -> bool | None:
    """True when an element ``a`` touches in one thread is touched through ``b`` in another.

    Parameters
    ----------
    a, b
        The two accesses.
    depth
        How many of their outermost loops (a common prefix) take one value for both: the
        loops around the point where the two accesses meet. Deeper loops vary freely.
    launch
        The block's extent per ``threadIdx`` tag.

    Returns
    -------
    bool or None
        None when it cannot be decided (symbolic loops, unknown variables, too many points).
    """
    grid = _Grid(launch)
    common = a.loops[:depth]
    fixed_loops = [
        lp
        for lp in common
        if not is_thread_loop(lp)
        and any(id(lp.loop_var) in {id(v) for v in collect_vars(i)} for i in a.indices + b.indices)
    ]
    combos = _combos(fixed_loops)
    if combos is None:
        return None
    for combo in combos:
        fixed = {id(lp.loop_var): v for lp, v in zip(fixed_loops, combo, strict=True)}
        pa, pb = _points(a, grid, depth, fixed), _points(b, grid, depth, fixed)
        if pa is None or pb is None:
            return None
        if _overlap(*pa, *pb):
            return True
    return False


def _overlap(ea: np.ndarray, ta: np.ndarray, eb: np.ndarray, tb: np.ndarray) -> bool:
    """Some element is in both sets and is touched by two different threads."""
    if ea.size == 0 or eb.size == 0:
        return False
    allv = np.concatenate([ea, eb])
    _, inv = np.unique(allv, axis=0, return_inverse=True)
    inv = inv.ravel()
    ka, kb = inv[: len(ea)], inv[len(ea) :]
    both = np.intersect1d(ka, kb)
    if both.size == 0:
        return False
    keys = np.concatenate([ka, kb])
    tids = np.concatenate([ta, tb])
    sel = np.isin(keys, both)
    keys, tids = keys[sel], tids[sel]
    n = int(keys.max()) + 1
    lo = np.full(n, np.iinfo(np.int64).max)
    hi = np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(lo, keys, tids)
    np.maximum.at(hi, keys, tids)
    return bool(np.any(lo[both] != hi[both]))


def reads_foreign(
    writes: Sequence[Footprint],
    reads: Sequence[Footprint],
    depth: int,
    launch: Mapping[str, int],
) -> bool | None:
    """True when a thread reads, through ``reads``, an element that only other threads write.

    This is the question for per-thread storage: each thread has its own copy, so writing the
    same element from every thread is fine, but reading one that this thread never writes and
    another thread does gets this thread's unwritten copy. Arguments as for
    :func:`crosses_threads`; ``depth`` loops are common to every access.
    """
    if not writes or not reads:
        return False
    grid = _Grid(launch)
    everything = [*writes, *reads]
    used = {id(v) for fp in everything for i in fp.indices for v in collect_vars(i)}
    fixed_loops = [
        lp
        for lp in everything[0].loops[:depth]
        if not is_thread_loop(lp) and id(lp.loop_var) in used
    ]
    combos = _combos(fixed_loops)
    if combos is None:
        return None
    for combo in combos:
        fixed = {id(lp.loop_var): v for lp, v in zip(fixed_loops, combo, strict=True)}
        wp = [_points(fp, grid, depth, fixed) for fp in writes]
        rp = [_points(fp, grid, depth, fixed) for fp in reads]
        if any(p is None for p in wp + rp):
            return None
        we = np.concatenate([p[0] for p in wp])  # type: ignore[index]
        wt = np.concatenate([p[1] for p in wp])  # type: ignore[index]
        re = np.concatenate([p[0] for p in rp])  # type: ignore[index]
        rt = np.concatenate([p[1] for p in rp])  # type: ignore[index]
        if _foreign(we, wt, re, rt):
            return True
    return False


def _foreign(we: np.ndarray, wt: np.ndarray, re: np.ndarray, rt: np.ndarray) -> bool:
    """Some read (element, thread) hits a written element but no write of that thread."""
    if we.size == 0 or re.size == 0:
        return False
    _, inv = np.unique(np.concatenate([we, re]), axis=0, return_inverse=True)
    inv = inv.ravel()
    kw, kr = inv[: len(we)], inv[len(we) :]
    written = np.isin(kr, kw)
    base = int(max(wt.max(initial=0), rt.max(initial=0))) + 1
    own = np.isin(kr * base + rt, kw * base + wt)
    return bool(np.any(written & ~own))
