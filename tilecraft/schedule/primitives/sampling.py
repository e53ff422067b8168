"""Sampling instructions: ``sample_perfect_tile``, ``sample_categorical``,
``sample_compute_location``.

Each draws from the schedule's seeded random state unless given a ``decision``; the decision
used is recorded in the trace, so a replay reproduces the sample and a mutator can change it
(:meth:`Trace.with_decision`). A decision that no longer fits raises ScheduleError.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from ...errors import IRError, ScheduleError
from ...ir import IntImm, Var
from .. import _tree
from ..arguments import POSITIVE_INT, Float, Int, SeqOf
from ..instruction import primitive
from ..state import BlockRV, ExprRV, LoopRV, ScheduleState
from ._blockutil import block_of
from ._compute_at_common import move_block
from .compute_location import check_inlinable_producer, inline_producer
from .loop import loop_error_fragment, loop_node


def _prime_factors(n: int) -> list[int]:
    out: list[int] = []
    p = 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def check_tile_decision(
    state: ScheduleState, decision: Any, n: int, extent: int, max_innermost: int
) -> list[int]:
    """Validate a perfect-tile decision: ``n`` positive ints, product ``extent``, bounded tail."""
    if (
        not isinstance(decision, Sequence)
        or len(decision) != n
        or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in decision)
    ):
        raise state.error(
            f"decision {decision!r} is not a list of {n} positive ints",
            requires="the decision has one positive factor per tile",
        )
    prod = 1
    for d in decision:
        prod *= int(d)
    if prod != extent:
        raise state.error(
            f"decision {list(decision)} no longer fits: its product {prod} is not the loop "
            f"extent {extent}",
            requires="the factors of a perfect tile multiply to the loop extent",
            hint="re-sample (decision=None) on this function",
        )
    if max_innermost > 0 and int(decision[-1]) > max_innermost:
        raise state.error(
            f"decision {list(decision)} has innermost factor {decision[-1]} > "
            f"max_innermost_factor {max_innermost}",
            requires="the innermost factor is at most max_innermost_factor",
        )
    return [int(d) for d in decision]


@primitive("sample_perfect_tile", inputs=("loop",), outputs="many", sampling=True)
def sample_perfect_tile(
    state: ScheduleState,
    loop: LoopRV,
    n: Annotated[int, POSITIVE_INT],
    max_innermost_factor: int = 16,
    decision: Sequence[int] | None = None,
) -> tuple[list[ExprRV], list[int]]:
    """Sample ``n`` factors whose product is the loop's extent.

    Requires: (1) ``n >= 1``; (2) the loop has a constant extent; (3) some divisor of the
    extent is at most ``max_innermost_factor`` (``<= 0``: no limit); (4) a given decision has
    ``n`` positive factors multiplying to the extent, innermost within the limit.
    Rewrite:  none; returns ints usable as ``split`` factors.
    """
    node, _ = loop_node(state, loop)
    if not isinstance(node.extent, IntImm):
        raise state.error(
            f'loop "{node.loop_var.name}" has a symbolic extent',
            requires="sample_perfect_tile needs a constant loop extent",
            fragment=loop_error_fragment(state, node),
            hint="split by a fixed factor instead",
        )
    extent = node.extent.value
    limit = max_innermost_factor
    if decision is not None:
        chosen = check_tile_decision(state, decision, n, extent, limit)
    else:
        inner = [d for d in _divisors(max(extent, 1)) if limit <= 0 or d <= limit]
        if n == 1:
            inner = [extent] if limit <= 0 or extent <= limit else []
        if not inner:
            raise state.error(
                f"no innermost factor of extent {extent} is at most {limit}",
                requires="some divisor of the extent is at most max_innermost_factor",
            )
        tail = inner[state.rng.randrange(len(inner))]
        chosen = [1] * n
        chosen[-1] = tail
        for p in _prime_factors(extent // tail if extent else 1):
            chosen[state.rng.randrange(n - 1)] *= p
        if extent == 0:
            chosen = [0] * n
    return [ExprRV(c) for c in chosen], chosen


@primitive("sample_categorical", outputs="one", sampling=True)
def sample_categorical(
    state: ScheduleState,
    candidates: Annotated[Sequence[int], SeqOf(Int(), min_len=1)],
    probs: Annotated[Sequence[float], SeqOf(Float(nonneg=True), min_len=1)],
    decision: int | None = None,
) -> tuple[ExprRV, int]:
    """Pick one of ``candidates`` with probabilities ``probs``.

    Requires: (1) candidates are ints, as many as probs; (2) probs are non-negative with a
    positive sum; (3) a given decision is an index into candidates.
    Rewrite:  none; returns the chosen candidate as an int.
    """
    if (
        not candidates
        or len(candidates) != len(probs)
        or not all(isinstance(c, int) and not isinstance(c, bool) for c in candidates)
    ):
        raise state.error(
            f"arguments 'candidates'/'probs': expected equally many ints and probabilities, got "
            f"{list(candidates)} and {list(probs)}"
        )
    if any(not isinstance(p, int | float) or p < 0 for p in probs) or sum(probs) <= 0:
        raise state.error(
            "argument 'probs': expected non-negative weights with a positive sum, got "
            f"{list(probs)}"
        )
    if decision is not None:
        if (
            not isinstance(decision, int)
            or isinstance(decision, bool)
            or not 0 <= decision < len(candidates)
        ):
            raise state.error(
                f"decision {decision!r} no longer fits {len(candidates)} candidates",
                requires="the decision is an index into candidates",
            )
        index = decision
    else:
        x = state.rng.random() * sum(probs)
        index = len(probs) - 1
        acc = 0.0
        for i, p in enumerate(probs):
            acc += p
            if x < acc and p > 0:
                index = i
                break
    return ExprRV(int(candidates[index])), index


def compute_location_candidates(state: ScheduleState, block: BlockRV) -> tuple[list[Var], bool]:
    """Loops under which ``compute_at(block, loop)`` succeeds (pre-order), and whether the
    block can be inlined (each tried on the current function, nothing committed)."""
    func, name = state.func, state.block_name(block)
    seen: dict[int, Var] = {}
    for consumer in _tree.consumers(func, name):
        for loop in _tree.loops_above(func, consumer):
            seen.setdefault(id(loop.loop_var), loop.loop_var)
    out: list[Var] = []
    for var in seen.values():
        try:
            move_block(state, block, LoopRV(var), False, -1, reverse=False)
        except (ScheduleError, IRError):  # IRError: e.g. an extent overflowing int32
            continue
        out.append(var)
    try:
        realize, _ = block_of(state, block)
        store = check_inlinable_producer(state, func, realize)
        inline_producer(func, realize, store)
    except (ScheduleError, IRError):
        return out, False
    return out, True


@primitive("sample_compute_location", inputs=("block",), outputs="one", sampling=True)
def sample_compute_location(
    state: ScheduleState, block: BlockRV, decision: int | None = None
) -> tuple[LoopRV, int]:
    """Sample a loop to ``compute_at`` ``block`` under.

    Requires: a given decision is ``-1`` (stay at the root), ``-2`` (inline; only when the
    block can be inlined) or an index into the candidate loops (the loops of the block's
    consumers under which compute_at succeeds, in pre-order).
    Rewrite:  none; returns a loop handle that ``compute_at`` accepts.
    """
    name = state.block_name(block)
    cands, inlinable = compute_location_candidates(state, block)
    if decision is None:
        choices = [-1, *range(len(cands))] + ([-2] if inlinable else [])
        decision = choices[state.rng.randrange(len(choices))]
    elif (
        not isinstance(decision, int)
        or isinstance(decision, bool)
        or not (-1 <= decision < len(cands) or (decision == -2 and inlinable))
    ):
        raise state.error(
            f'decision {decision!r} no longer fits block "{name}": it has {len(cands)} '
            f"candidate loops" + ("" if inlinable else " and cannot be inlined"),
            requires="the decision is -1 (root), -2 (inline) or an index into the candidates",
        )
    if decision == -1:
        return LoopRV.root(), decision
    if decision == -2:
        return LoopRV.inline(), decision
    return LoopRV(cands[decision]), decision
