"""PostOrderApply: a design space made by applying search rules to every block in turn.

The blocks of the function are visited consumers first (the reverse of their order in the
function), then the root: each search rule in turn is applied to the block in every
schedule made so far, a rule that forks multiplying the sketches. A block that an earlier
step removed (inlined) is skipped. The sketches' traces hold the sampling instructions the
search redraws and mutates; the rules' deferred choices (parallel, vectorize, unroll, write
cache, packing) are block annotations the postprocessors apply.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import ScheduleError, TuneError
from ...ir import Block, BlockRealize, PrimFunc, post_order_visit
from ...schedule import Schedule
from ...target import Target
from .base import SpaceGenerator
from .rule import SearchRule

MAX_SKETCHES = 16
"""Sketches kept per function (forks beyond this are dropped, the first kept)."""


def block_names(func: PrimFunc) -> list[str]:
    """Names of the function's blocks in post order (children before their parent)."""
    names: list[str] = []

    def visit(node: object) -> None:
        if isinstance(node, Block):
            names.append(node.name)

    post_order_visit(func.body, visit)
    return names


class PostOrderApply(SpaceGenerator):
    """The space of ``rules`` applied block by block (module docstring).

    Parameters
    ----------
    rules
        The search rules, applied in order to each block; None: the target's defaults
        (:func:`~tilecraft.tune.space.default_search_rules`).
    name
        Shown in logs.
    """

    def __init__(self, rules: Sequence[SearchRule] | None = None, name: str = "post_order_apply"):
        if rules is not None:
            bad = [r for r in rules if not isinstance(r, SearchRule)]
            if bad:
                raise TuneError(f"PostOrderApply: expected SearchRule objects, got {bad[0]!r}")
        self.rules = None if rules is None else list(rules)
        self.name = name

    def generate(self, func: PrimFunc, target: Target, seed: int) -> list[Schedule]:
        """The sketches of ``func``, sampled with ``seed``."""
        from .defaults import default_search_rules

        rules = self.rules if self.rules is not None else default_search_rules(target)
        first = Schedule(func, seed=seed)
        body = first.func.body
        assert isinstance(body, BlockRealize)
        root = body.block.name
        order = [*[n for n in block_names(first.func) if n != root][::-1], root]
        sketches = [first]
        for name in order:
            for rule in rules:
                sketches = self._apply(rule, sketches, name, target)
        return sketches

    @staticmethod
    def _apply(
        rule: SearchRule, sketches: list[Schedule], name: str, target: Target
    ) -> list[Schedule]:
        out: list[Schedule] = []
        for sch in sketches:
            try:
                block = sch.get_block(name)
            except ScheduleError:
                out.append(sch)  # inlined by an earlier rule
                continue
            out.extend(rule.apply(sch, block, target))
        return out[:MAX_SKETCHES]
