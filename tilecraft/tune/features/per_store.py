"""Per-store program features: one fixed-width row for every store of a scheduled function.

The function is lowered first with its target backend's own passes up to flattening (blocks
become loops, buffers are compacted, unroll pragmas act), so the features describe the code
that runs. Each store gets a row of :data:`~._layout.NUM_FEATURES` floats (columns in
:data:`~._layout.FEATURE_NAMES`):

* operation counts of the store, weighted by its loops' trip counts;
* the parallel / vectorized / unrolled loops above it and the GPU thread extents;
* for up to five buffers it touches (most bytes first): read/write, bytes and distinct
  bytes, cache lines and distinct lines, the kind of reuse (a loop the access does not depend
  on, a read-modify-write, none), reuse distance and count, the innermost stride;
* the arithmetic-intensity curve (floating-point operations per distinct byte at each loop
  level, outer to inner, resampled to ten points);
* the function's allocations and the loops above the store.

A function without stores (or whose loops run zero times) still gets one row: a function
with no store gives a zero row whose ``outer.empty`` column is 1, never an empty array.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ...errors import TilecraftError
from ...ir import ForKind, PrimFunc
from ...ir.transform import FunctionPass, Sequential
from ...runtime.backend import backend_of
from ...target import Target, as_target
from ._access import Geometry, geometry
from ._layout import (
    BUFFER_STATS,
    CURVE_POINTS,
    LOOP_KINDS,
    LOOP_STATS,
    MAX_BUFFERS,
    NUM_FEATURES,
    OFFSET,
    OUTER,
    THREAD_AXES,
)
from ._walk import Program, Store, collect

_KIND_OF = {ForKind.PARALLEL: 0, ForKind.VECTORIZED: 1, ForKind.UNROLLED: 2}
_STATS = len(LOOP_STATS)
_BUF = len(BUFFER_STATS)
_REUSE = {"loop": 7, "serial": 8, "none": 9}


def _log(x: float) -> float:
    return math.log2(1.0 + max(x, 0.0))


def _loop_columns(row: np.ndarray, store: Store) -> None:
    base = OFFSET["loop"]
    n = len(store.loops)
    for pos, lp in enumerate(store.loops):
        kind = _KIND_OF.get(lp.kind)
        if kind is not None:
            at = base + kind * _STATS
            row[at] += 1
            row[at + 1] += math.log2(max(lp.extent, 1))  # log of the product, summed
            row[at + 2] = _log(lp.extent)
            row[at + 3] = (pos + 1) / n
        if lp.thread is not None:
            axis = "vthread" if lp.thread.startswith("vthread") else lp.thread
            if axis in THREAD_AXES:
                row[OFFSET["thread"] + THREAD_AXES.index(axis)] = _log(lp.extent)
    for k in range(len(LOOP_KINDS)):
        row[base + k * _STATS] = _log(row[base + k * _STATS])


def _buffers(store: Store) -> list[tuple[Geometry, str, float]]:
    """(geometry, access type, bytes) per distinct buffer of the store, most bytes first."""
    kinds: dict[int, set[bool]] = {}
    first: dict[int, int] = {}
    for i, acc in enumerate(store.accesses):
        kinds.setdefault(id(acc.buffer), set()).add(acc.write)
        first.setdefault(id(acc.buffer), i)
    trips = math.prod(lp.extent for lp in store.loops)
    out = []
    for key, i in first.items():
        acc = store.accesses[i]
        uses = sum(1 for a in store.accesses if a.buffer is acc.buffer)
        rw = len(kinds[key]) == 2
        kind = "read_write" if rw else ("write" if acc.write else "read")
        geo = geometry(acc, store.loops, store.lets, rw)
        out.append((geo, kind, float(trips * uses * geo.itemsize)))
    out.sort(key=lambda t: -t[2])
    return out


def _buffer_columns(row: np.ndarray, buffers: list[tuple[Geometry, str, float]]) -> None:
    for b, (geo, kind, nbytes) in enumerate(buffers[:MAX_BUFFERS]):
        at = OFFSET["buffer"] + b * _BUF
        row[at + ("read", "write", "read_write").index(kind)] = 1.0
        row[at + 3] = _log(nbytes)
        row[at + 4] = _log(geo.unique[0] * geo.itemsize)
        row[at + 5] = _log(geo.lines)
        row[at + 6] = _log(geo.unique_lines)
        row[at + _REUSE[geo.reuse]] = 1.0
        row[at + 10] = _log(geo.reuse_distance)
        row[at + 11] = _log(geo.reuse_count)
        row[at + 12] = _log(geo.stride)


def _curve_columns(
    row: np.ndarray, store: Store, buffers: list[tuple[Geometry, str, float]]
) -> None:
    flops = sum(store.counts[:6])
    n = len(store.loops)
    levels = []
    for k in range(n + 1):
        work = flops * math.prod(lp.extent for lp in store.loops[k:])
        nbytes = sum(geo.unique[k] * geo.itemsize for geo, _, _ in buffers)
        levels.append(_log(work / max(nbytes, 1)))
    xs = np.linspace(0.0, 1.0, CURVE_POINTS)
    at = OFFSET["intensity"]
    row[at : at + CURVE_POINTS] = np.interp(xs, np.linspace(0.0, 1.0, n + 1), levels)


def _outer_columns(row: np.ndarray, store: Store) -> None:
    at = OFFSET["outer"]
    row[at] = _log(len(store.loops))
    row[at + 1] = _log(math.prod(lp.extent for lp in store.loops))
    row[at + 2] = _log(store.loops[0].extent if store.loops else 0)
    row[at + 3] = _log(store.guards)
    row[at + 4] = _log(max((lp.auto_unroll for lp in store.loops), default=0))


def _alloc_columns(program: Program) -> np.ndarray:
    cols = np.zeros(4, dtype=np.float64)
    total = sum(n for _, n in program.allocs)
    shared = sum(n for b, n in program.allocs if b.scope.startswith("shared"))
    local = sum(n for b, n in program.allocs if b.scope.startswith(("local", "warp")))
    cols[:] = [_log(len(program.allocs)), _log(total), _log(shared), _log(local)]
    return cols


def _store_row(store: Store, allocs: np.ndarray) -> np.ndarray:
    row = np.zeros(NUM_FEATURES, dtype=np.float64)
    trips = math.prod(lp.extent for lp in store.loops)
    row[: len(store.counts)] = [_log(c * trips) for c in store.counts]
    _loop_columns(row, store)
    buffers = _buffers(store)
    _buffer_columns(row, buffers)
    _curve_columns(row, store, buffers)
    row[OFFSET["alloc"] : OFFSET["alloc"] + 4] = allocs
    _outer_columns(row, store)
    return row


def program_features(program: Program) -> np.ndarray:
    """The rows of a collected program: ``(max(1, stores), NUM_FEATURES)`` float32."""
    allocs = _alloc_columns(program)
    if not program.stores:
        row = np.zeros((1, NUM_FEATURES), dtype=np.float32)
        row[0, OFFSET["alloc"] : OFFSET["alloc"] + 4] = allocs
        row[0, OFFSET["outer"] + OUTER.index("empty")] = 1.0
        return row
    return np.stack([_store_row(s, allocs) for s in program.stores]).astype(np.float32)


_SKIPPED = frozenset({"CollectStorageAlign", "ExposeShapeVars", "InsertBoundsChecks"})
"""Passes that only prepare flattening, code emission or run-time checks."""


def feature_passes(target: Target) -> list[FunctionPass]:
    """The backend's lowering passes up to flattening (features index buffers row-major
    themselves, so flat indices and their simplification are not needed)."""
    passes: list[FunctionPass] = []
    for p in backend_of(target).pipeline(target):
        name = type(p).__name__
        if name == "FlattenBuffer":
            break
        if name not in _SKIPPED:
            passes.append(p)
    return passes


class PerStoreFeature:
    """Extracts per-store feature rows of scheduled functions for one target.

    Parameters
    ----------
    target
        The target whose backend lowers the functions (default: the current one, else the
        CPU).
    lower
        Lower before extracting (default). A function the lowering refuses is described as
        it is, blocks and all, so every function gets rows.
    """

    def __init__(self, target: Target | str | None = None, *, lower: bool = True) -> None:
        self.target = as_target(target)
        self.lower = lower
        self._pipeline = Sequential(feature_passes(self.target), name="features")

    def lowered(self, func: PrimFunc) -> PrimFunc:
        """``func`` after the backend's lowering passes (``func`` itself when they fail)."""
        if not self.lower:
            return func
        try:
            out = self._pipeline(func)
        except TilecraftError:  # a candidate the backend refuses is still described
            return func
        except RecursionError:
            return func
        return out if isinstance(out, PrimFunc) else func

    def extract_one(self, func: PrimFunc) -> np.ndarray:
        """Rows of ``func``: ``(n_stores or 1, NUM_FEATURES)`` float32."""
        return program_features(collect(self.lowered(func)))

    def extract(self, funcs: Sequence[PrimFunc]) -> list[np.ndarray]:
        """Rows of each function of ``funcs``."""
        return [self.extract_one(f) for f in funcs]


def per_store_features(func: PrimFunc, target: Target | str | None = None) -> np.ndarray:
    """Per-store feature rows of ``func`` lowered for ``target`` (see the module docstring)."""
    return PerStoreFeature(target).extract_one(func)
