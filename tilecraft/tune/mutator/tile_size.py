"""MutateTileSize: move a prime factor between two tiles of a ``sample_perfect_tile``."""

from __future__ import annotations

import random

from ...ir import PrimFunc
from ...schedule import Trace
from .base import Mutator, attr, users

TRIES = 8
"""Moves tried before the mutator gives up on a trace."""


def _prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


class MutateTileSize(Mutator):
    """Move one prime factor of one tile of a perfect tiling to another of its tiles.

    The product stays the loop extent; a move that would make the innermost tile exceed the
    sample's ``max_innermost_factor`` is not made. A tiling of a loop that this one split
    (a GPU thread's part of an axis, tiled again) changes extent with it: its decision is
    cleared, so the replay draws it anew instead of failing.
    """

    name = "tile_size"

    def apply(self, func: PrimFunc, trace: Trace, rng: random.Random) -> Trace | None:
        """A trace with one tiling changed, or None when every tiling is fixed."""
        del func
        sites = [
            i
            for i, inst in enumerate(trace)
            if inst.kind == "sample_perfect_tile"
            and isinstance(inst.decision, tuple)
            and len(inst.decision) > 1
            and any(d > 1 for d in inst.decision)
        ]
        if not sites:
            return None
        for _ in range(TRIES):
            index = sites[rng.randrange(len(sites))]
            inst = trace[index]
            new = _moved(list(inst.decision), rng)
            limit = attr(inst, "max_innermost_factor")
            limit = 16 if limit is None else int(limit)  # type: ignore[call-overload]
            if new is None or (limit > 0 and new[-1] > limit):
                continue
            out = trace.with_decision(index, new)
            for later in nested_tilings(trace, index):
                out = out.with_decision(later, None)  # drawn again for the new extents
            return out
        return None


def nested_tilings(trace: Trace, index: int) -> list[int]:
    """Indices of the ``sample_perfect_tile`` instructions that tile a loop made by splitting
    with the factors sampled at ``index`` (directly or through such a tiling): their decisions
    hold only for the old extents."""
    all_users = users(trace)
    position = {id(inst): i for i, inst in enumerate(trace)}
    found: list[int] = []
    todo = [trace[index]]
    while todo:
        sample = todo.pop()
        for out in sample.outputs:
            for split in all_users.get(id(out), []):
                if split.kind != "split":
                    continue
                for loop in split.outputs:
                    for user in all_users.get(id(loop), []):
                        if user.kind == "sample_perfect_tile" and position[id(user)] not in found:
                            found.append(position[id(user)])
                            todo.append(user)
    return sorted(found)


def _moved(tiles: list[int], rng: random.Random) -> list[int] | None:
    sources = [i for i, d in enumerate(tiles) if d > 1]
    if not sources:
        return None
    src = sources[rng.randrange(len(sources))]
    dst = rng.randrange(len(tiles) - 1)
    dst = dst + 1 if dst >= src else dst
    primes = _prime_factors(tiles[src])
    p = primes[rng.randrange(len(primes))]
    tiles[src] //= p
    tiles[dst] *= p
    return tiles
