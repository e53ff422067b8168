"""Static memory planning for a graph program's intermediate values.

A graph program (:class:`~tilecraft.lower.graph_program.GraphProgram`) runs its steps in
order. Each value has a last use (the step after which nothing reads it: the steps'
``free_after``). Once the symbolic extents are known, :func:`plan_memory`
assigns every intermediate value a *storage* (one byte block) such that values alive at the
same time never share one: a value's storage returns to a free list right after its last use
has run, and a later value takes the smallest free storage that fits (or the largest one,
grown). Each of the function's results gets its own array, since the caller keeps it.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from ...lower.graph_program import GraphStep

RESULT = -1  # storage index of a function's result: an array of its own


@dataclass(frozen=True)
class MemoryPlan:
    """Where each step's output lives for one binding of the symbolic extents.

    Attributes
    ----------
    shapes
        The concrete output shape of each step.
    dtypes
        The numpy dtype name of each step's output.
    storage
        Per step: the index of the storage block holding its output, or ``RESULT`` (-1).
    storage_bytes
        Size of each storage block.
    """

    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    storage: tuple[int, ...]
    storage_bytes: tuple[int, ...]

    @property
    def num_storages(self) -> int:
        """Number of storage blocks for intermediate values."""
        return len(self.storage_bytes)

    def allocate(self) -> list[np.ndarray]:
        """Fresh storage blocks (8-byte aligned words) for one run."""
        return [np.empty((n + 7) // 8, np.uint64) for n in self.storage_bytes]

    def output(self, step: int, storages: Sequence[np.ndarray]) -> np.ndarray:
        """The array step ``step`` writes: a view of its storage, or a new result array."""
        shape, dt = self.shapes[step], np.dtype(self.dtypes[step])
        sid = self.storage[step]
        if sid == RESULT:
            return np.empty(shape, dt)
        nbytes = math.prod(shape) * dt.itemsize
        return storages[sid].view(np.uint8)[:nbytes].view(dt).reshape(shape)


def plan_memory(
    steps: Sequence[GraphStep],
    shapes: Sequence[tuple[int, ...]],
    dtypes: Sequence[str],
    result_slot: int | Collection[int],
) -> MemoryPlan:
    """Assign storages to the outputs of ``steps`` (see the module docstring).

    The outputs written to ``result_slot`` (the function's result, or the collection of its
    results) get arrays of their own.
    """
    result_slots = {result_slot} if isinstance(result_slot, int) else set(result_slot)
    sizes: list[int] = []  # capacity of each storage
    free: list[int] = []  # storage indices available now
    holder: dict[int, int] = {}  # slot -> storage index
    storage: list[int] = []
    for step, shape, dt in zip(steps, shapes, dtypes, strict=True):
        if step.out in result_slots:
            storage.append(RESULT)
        else:
            need = math.prod(shape) * np.dtype(dt).itemsize
            sid = _take(free, sizes, need)
            holder[step.out] = sid
            storage.append(sid)
        for slot in step.free_after:
            sid = holder.pop(slot, RESULT)
            if sid != RESULT:
                free.append(sid)
    return MemoryPlan(tuple(shapes), tuple(dtypes), tuple(storage), tuple(sizes))


def _take(free: list[int], sizes: list[int], need: int) -> int:
    """The smallest free storage holding ``need`` bytes, else the largest grown, else a new one."""
    if not free:
        sizes.append(need)
        return len(sizes) - 1
    fits = [s for s in free if sizes[s] >= need]
    sid = min(fits, key=lambda s: sizes[s]) if fits else max(free, key=lambda s: sizes[s])
    free.remove(sid)
    sizes[sid] = max(sizes[sid], need)
    return sid
