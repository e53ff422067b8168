"""Mutators: change one sampling decision of a trace to make a neighbouring candidate.

A mutator reads a trace (the design space's instructions with their decisions) and returns a
new trace whose one decision differs, or None when it finds nothing to change. Whether the
new decision fits is found by replaying it (a ScheduleError), which the search counts.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping

from ...errors import TuneError
from ...ir import PrimFunc
from ...schedule import Trace
from ...schedule.handles import BlockRV, ExprRV, LoopRV
from ...schedule.instruction import Instruction


class Mutator(ABC):
    """Changes one decision of a trace."""

    name = "mutator"

    @abstractmethod
    def apply(self, func: PrimFunc, trace: Trace, rng: random.Random) -> Trace | None:
        """A new trace of ``func`` with one decision changed, or None (nothing to change)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def handles(value: object) -> Iterator[BlockRV | LoopRV | ExprRV]:
    """Every handle inside an instruction input (lists searched)."""
    if isinstance(value, BlockRV | LoopRV | ExprRV):
        yield value
    elif isinstance(value, tuple | list):
        for v in value:
            yield from handles(v)


def users(trace: Trace) -> dict[int, list[Instruction]]:
    """For each handle (by id), the instructions that take it as an input."""
    out: dict[int, list[Instruction]] = {}
    for inst in trace:
        for h in handles(inst.inputs):
            out.setdefault(id(h), []).append(inst)
    return out


def attr(inst: Instruction, name: str) -> object:
    """The value of attribute ``name`` of ``inst`` (None when absent)."""
    return dict(inst.attrs).get(name)


def pick_mutator(mutators: Mapping[Mutator, float], rng: random.Random) -> Mutator | None:
    """One mutator drawn with its probability (None when no weight is positive)."""
    total = sum(p for p in mutators.values() if p > 0)
    if total <= 0:
        return None
    x = rng.random() * total
    for m, p in mutators.items():
        if p > 0:
            x -= p
            if x < 0:
                return m
    return next(m for m, p in mutators.items() if p > 0)


def check_probabilities(mutators: Mapping[Mutator, float]) -> dict[Mutator, float]:
    """``mutators`` as a dict, refusing non-mutators and negative probabilities."""
    out: dict[Mutator, float] = {}
    for m, p in mutators.items():
        if not isinstance(m, Mutator):
            raise TuneError(f"mutators: expected Mutator keys, got {m!r}")
        if not isinstance(p, int | float) or p < 0:
            raise TuneError(f"mutators: probability of {m!r} must be >= 0, got {p!r}")
        out[m] = float(p)
    return out
