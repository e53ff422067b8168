"""Mutators of ``sample_categorical`` decisions, found by what the sample feeds.

* :class:`MutateUnroll`: a sample that sets an unroll annotation
  (``pragma_auto_unroll_max_step`` or :data:`~tilecraft.tune.postproc.keys.UNROLL`);
* :class:`MutateParallel`: a sample that sets
  :data:`~tilecraft.tune.postproc.keys.PARALLEL` (how many outer iterations run in parallel);
* :class:`MutateTileCache`: a sample that sets
  :data:`~tilecraft.tune.postproc.keys.WRITE_CACHE` or
  :data:`~tilecraft.tune.postproc.keys.PACK` (where a tiled block caches its output and packs
  its streamed operand);
* :class:`MutateThreadBinding`: a sample used as a split factor of a loop whose part is bound
  to ``threadIdx``.

Each picks one such sample and gives it another of its candidates.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from ...ir import PrimFunc
from ...lower import AUTO_UNROLL
from ...schedule import Trace
from ...schedule.instruction import Instruction
from ..postproc.keys import PACK, PARALLEL, UNROLL, WRITE_CACHE
from .base import Mutator, attr, users

Feeds = Callable[[Instruction, dict[int, list[Instruction]]], bool]


def _sets_annotation(keys: tuple[str, ...]) -> Feeds:
    def feeds(user: Instruction, _users: dict[int, list[Instruction]]) -> bool:
        return user.kind == "annotate" and attr(user, "key") in keys

    return feeds


def _splits_thread_loop(user: Instruction, all_users: dict[int, list[Instruction]]) -> bool:
    if user.kind != "split":
        return False
    for out in user.outputs:
        for later in all_users.get(id(out), []):
            thread = attr(later, "thread")
            if later.kind == "bind" and isinstance(thread, str) and thread.startswith("threadIdx"):
                return True
    return False


class _MutateCategorical(Mutator):
    feeds: Feeds

    def apply(self, func: PrimFunc, trace: Trace, rng: random.Random) -> Trace | None:
        """A trace with one matching sample's decision changed (None: no such sample)."""
        del func
        all_users = users(trace)
        sites = []
        for i, inst in enumerate(trace):
            if inst.kind != "sample_categorical" or not isinstance(inst.decision, int):
                continue
            n = len(attr(inst, "candidates") or ())  # type: ignore[arg-type]
            if n < 2:
                continue
            out = inst.outputs[0] if inst.outputs else None
            if out is not None and any(
                self.feeds(u, all_users) for u in all_users.get(id(out), [])
            ):
                sites.append((i, n))
        if not sites:
            return None
        index, n = sites[rng.randrange(len(sites))]
        old = trace[index].decision
        new = rng.randrange(n - 1)
        return trace.with_decision(index, new + 1 if new >= old else new)


class MutateUnroll(_MutateCategorical):
    """Another unroll step budget for one sampled unroll annotation."""

    name = "unroll"
    feeds = staticmethod(_sets_annotation((AUTO_UNROLL, UNROLL)))


class MutateParallel(_MutateCategorical):
    """Another parallel extent for one sampled :data:`PARALLEL` annotation."""

    name = "parallel"
    feeds = staticmethod(_sets_annotation((PARALLEL,)))


class MutateThreadBinding(_MutateCategorical):
    """Another thread count for one sampled split factor of a ``threadIdx``-bound loop."""

    name = "thread_binding"
    feeds = staticmethod(_splits_thread_loop)


class MutateTileCache(_MutateCategorical):
    """Another write-cache level or packing place for one tiled block."""

    name = "tile_cache"
    feeds = staticmethod(_sets_annotation((WRITE_CACHE, PACK)))
