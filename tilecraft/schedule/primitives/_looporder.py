"""Loop-order checks shared by ``parallel``/``vectorize`` and ``reorder``: which loop kinds may
nest inside which, and which reorders keep a reduction's init on its first update.

Package-private; the checks raise through ``state.error`` like the primitives' own checks.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...ir import BlockRealize, For, ForKind, IterKind, uses_var
from .. import _tree
from ..state import ScheduleState
from .index_map import is_const


def nests_badly(outer: ForKind, inner: ForKind) -> bool:
    """True when a loop of kind ``inner`` may not lie inside one of kind ``outer``.

    A parallel loop inside a parallel loop (nested OpenMP teams, a slowdown at best) or inside
    a vectorized one (OpenMP forbids a parallel region in a simd region), and a vectorized
    loop inside a vectorized one, are rejected.
    """
    if inner is ForKind.PARALLEL:
        return outer in (ForKind.PARALLEL, ForKind.VECTORIZED)
    return inner is ForKind.VECTORIZED and outer is ForKind.VECTORIZED


def check_kind_nesting(
    state: ScheduleState, outer: For, inner: For, what: str, *, kinds: tuple[ForKind, ForKind]
) -> None:
    """Require that ``inner`` (of kind ``kinds[1]``) may lie inside ``outer`` (``kinds[0]``)."""
    if nests_badly(*kinds):
        raise state.error(
            f'{kinds[1].value} loop "{inner.loop_var.name}" would lie inside {kinds[0].value} '
            f'loop "{outer.loop_var.name}"',
            requires=f"{what} no parallel loop inside a parallel or vectorized loop and no "
            "vectorized loop inside a vectorized loop",
            fragment=_tree.outline(outer, {id(outer): "<- outer", id(inner): "<- inner"}),
            hint="parallelize an outer loop and vectorize an innermost one",
            locations=[outer.loop_var.name, inner.loop_var.name],
        )


def _carries(br: BlockRealize, node: For) -> str:
    """How ``node`` drives block ``br``: "S" spatial iterators only, "R" reduce iterators only,
    "M" both, "N" none (a loop repeating the block), "" a unit loop that binds nothing."""
    kinds = {
        iv.kind
        for iv, val in zip(br.block.iter_vars, br.iter_values, strict=True)
        if uses_var(val, node.loop_var)
    }
    if not kinds:
        return "" if is_const(node.extent, 1) else "N"
    if kinds == {IterKind.SPATIAL}:
        return "S"
    return "R" if kinds == {IterKind.REDUCE} else "M"


def check_reduction_order(
    state: ScheduleState, chain: Sequence[For], placed: Sequence[For]
) -> None:
    """Require the new order to keep every reduction's init on its first update.

    A block with an init re-initializes when all its reduce iterators are at their minimum;
    that must stay the first update of each element. Spatial loops move freely, loops binding
    only reduce iterators may be permuted among themselves, but once a loop binds both kinds
    (after ``fuse``) or none (it repeats the block), the loops that are not spatial keep their
    relative order.
    """
    for br in _tree.blocks_under(chain[-1].body):
        if br.block.init is None:
            continue
        old = [n for n in chain if _carries(br, n) not in ("S", "")]
        new = [n for n in placed if _carries(br, n) not in ("S", "")]
        fixed = [n for n in old if _carries(br, n) in ("M", "N")]
        if fixed and any(a is not b for a, b in zip(old, new, strict=True)):
            bad = fixed[0]
            how = "binds both iterator kinds of" if _carries(br, bad) == "M" else "repeats"
            raise state.error(
                f'loop "{bad.loop_var.name}" {how} block "{br.block.name}"; the new order '
                "would re-run its init in the middle of the reduction",
                requires="reorder needs the loops carrying a reduction with an init to keep "
                "their relative order when one of them binds both iterator kinds or none",
                fragment=_tree.outline(chain[0], {id(bad): "<- this loop"}),
                hint="split/reorder before fusing spatial and reduction loops",
                locations=[bad.loop_var.name, br.block.name],
            )
