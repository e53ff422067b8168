"""RuleVariants: the default rules' schedule and its neighbours, one ``Config`` knob moved.

The search rules of :class:`~.post_order_apply.PostOrderApply` build a generic space: a
softmax or a layer norm comes out of it as tiled stages, far from what the default rules
do (one pass per row, partial-sum vectors folded at the end); measured on layer norm
128x768 (AVX-512, one core), its best of twelve candidates took 8x the rules' time. This
space starts from the rules instead: the first default rule of the target that takes the
function is applied with its ``Config`` as is and with one knob at a time moved one step
each way (:data:`KNOBS`: register tile rows and vectors, cache sizes the blocking derives
from, partial-sum vectors, chunk and tile sizes; on a GPU the tensor-core block tile and
warps, the space's tensor-core variants). A rule's numbers steer Python decisions
(how loops are split, what is packed), so a variant is a sketch of its own, replayed as it
is, not a sampling instruction; when the rule itself samples (``tunable=True``), its
sketches keep their sampling instructions. Variants that schedule the function identically,
or whose traces differ only in sampled decisions, are kept once, and a rule that declines a
variant, or breaks on it, is passed over.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from ... import rules as rule_lib
from ...ir import PrimFunc, structural_hash
from ...rules import ScheduleRule, try_rules
from ...schedule import Schedule
from ...target import Target
from .base import SpaceGenerator

logger = logging.getLogger("tilecraft.tune")


def _halve_double(v: int) -> tuple[int, ...]:
    return (v // 2, v * 2)


def _step(v: int) -> tuple[int, ...]:
    return (v - 1, v + 1)


def _two_steps(v: int) -> tuple[int, ...]:
    return (v - 2, v + 2)


KNOBS: dict[str, Callable[[int], tuple[int, ...]]] = {
    "mr": _two_steps,  # Matmul: register tile rows
    "nr_vectors": _step,  # Matmul: register tile vectors
    "l1d_bytes": _halve_double,  # Matmul: the cache sizes its blocking derives from
    "l2_bytes": _halve_double,
    "reduce_vectors": _halve_double,  # reductions: vectors of partial results
    "chunk_vectors": _halve_double,  # vectors per iteration of a parallel chunk
    "rows": _halve_double,  # GEMV: output rows per tile
    "col_vectors": _halve_double,  # GEMV: column vectors per tile
    "stream_rows": _halve_double,
    "tile": _halve_double,  # Injective: transposed tiles and blocks
    "block": _halve_double,
    "block_m": _halve_double,  # GPU Matmul on tensor cores (its tensor_core_tile): block tile
    "block_n": _halve_double,
    "block_k": _halve_double,
    "warps_m": _halve_double,  # ... and warps per block
    "warps_n": _halve_double,
}
"""Config fields moved, and the values each is moved to (those below 1 are skipped). A
field a rule's Config does not have is ignored, so rules may add or drop knobs freely."""


def config_variants(config: object) -> list[object]:
    """``config`` and each copy of it with one :data:`KNOBS` field moved one step (a field of
    a nested dataclass field too)."""
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        return [config]
    out: list[object] = [config]
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            # a nested group of numbers (the tensor-core tile): its knobs, one at a time
            out += [dataclasses.replace(config, **{f.name: v}) for v in config_variants(value)[1:]]
            continue
        move = KNOBS.get(f.name)
        if move is None or not isinstance(value, int) or isinstance(value, bool):
            continue
        for alt in move(value):
            if alt >= 1 and alt != value:
                out.append(dataclasses.replace(config, **{f.name: alt}))
    return out


class RuleVariants(SpaceGenerator):
    """The default rules' schedule and its one-knob neighbours (module docstring).

    Parameters
    ----------
    rules
        The rules tried in order (default: the target's :func:`tilecraft.rules.default_rules`).
    name
        Shown in logs.
    """

    def __init__(self, rules: list[ScheduleRule] | None = None, name: str = "rule_variants"):
        self.rules = rules
        self.name = name

    def generate(self, func: PrimFunc, target: Target, seed: int) -> list[Schedule]:
        """The variants' schedules of ``func`` (empty when no rule takes it)."""
        del seed  # the variants are fixed; a rule's own sampling is redrawn by the search
        rules = self.rules if self.rules is not None else rule_lib.default_rules(target)
        outcome = try_rules(func, rules, target)
        rule = next((r for r in rules if r.name == outcome.rule), None)
        if rule is None:
            return []
        found: list[Schedule] = []
        seen: set[str] = set()
        for variant in [rule, *_with_configs(rule, config_variants(rule.config_for(target))[1:])]:
            # try_rules declines for a rule that breaks on a variant instead of raising
            sch = try_rules(func, [variant], target, tunable=True).schedule
            if sch is None:
                continue
            keys = {structural_hash(sch.func), _undecided(sch)}
            if not keys & seen:
                found.append(sch)
            seen |= keys
        logger.debug("rule variants of %s: %d distinct sketches", rule.name, len(found))
        return found


def _undecided(sch: Schedule) -> str:
    """The schedule's trace without its sampled decisions: two variants with the same one are
    the same sketch even when their samples differ (a knob the rule did not use)."""
    trace = sch.trace
    for index in trace.sampling_indices():
        trace = trace.with_decision(index, None)
    return trace.as_json()


def _with_configs(rule: ScheduleRule, configs: list[object]) -> list[ScheduleRule]:
    """Copies of ``rule`` with each of ``configs`` (none for a rule not built from a config)."""
    try:
        return [type(rule)(config=config) for config in configs]
    except TypeError:  # a rule class whose constructor takes no config
        return []
