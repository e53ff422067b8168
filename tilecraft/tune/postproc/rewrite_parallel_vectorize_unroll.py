"""RewriteParallelVectorizeUnroll: turn sampled block annotations into loop kinds.

Before: a block (or the root block, standing for every leaf block under it) carries
:data:`~.keys.PARALLEL`, :data:`~.keys.VECTORIZE`, :data:`~.keys.UNROLL` (and
:data:`~.keys.UNROLL_EXPLICIT`) annotations with int values.
After: for each such leaf block, the longest run of outer serial loops binding only spatial
iterators whose extents multiply to at most the parallel value (the first such loop in any
case) is fused and parallelized; the innermost loop is vectorized when it is serial, binds a
spatial iterator and steps the block's written element by one (stride 1 in the output: a
contiguous vector, never a gather across rows; the C compiler strip-mines any extent), with
the vectorize value above 1; the outermost loop gets
``pragma_auto_unroll_max_step``; the annotations are gone. A step a loop nest does not
allow is skipped (meaning never changes); a value that is not an int drops the candidate.
"""

from __future__ import annotations

from ...arith import evaluate
from ...arith.evaluate import EvaluationError
from ...ir import (
    Block,
    BlockRealize,
    BufferStore,
    Expr,
    For,
    ForKind,
    IntImm,
    IterKind,
    Var,
    collect_vars,
    post_order_visit,
    substitute,
)
from ...lower import AUTO_UNROLL, UNROLL_EXPLICIT
from ...schedule import BlockRV, LoopRV, Schedule
from .base import Postproc
from .keys import PARALLEL, UNROLL, VECTORIZE
from .keys import UNROLL_EXPLICIT as TUNE_UNROLL_EXPLICIT

KEYS = (PARALLEL, VECTORIZE, UNROLL, TUNE_UNROLL_EXPLICIT)


def _annotated(sch: Schedule) -> list[tuple[str, dict[str, object]]]:
    """(block name, its tuning annotations) for every annotated block, outer first."""
    found: list[tuple[str, dict[str, object]]] = []

    def visit(node: object) -> None:
        if isinstance(node, Block):
            anns: dict[str, object] = {
                k: node.annotations[k] for k in KEYS if k in node.annotations
            }
            if anns:
                found.append((node.name, anns))

    post_order_visit(sch.func.body, visit)
    return found[::-1]


def leaves(sch: Schedule, block: BlockRV) -> list[BlockRV]:
    """The blocks under ``block`` with no child block (``block`` itself when it has none)."""
    children = sch.get_child_blocks(block)
    if not children:
        return [block]
    return [leaf for c in children for leaf in leaves(sch, c)]


def reduce_vars(sch: Schedule, block: BlockRV) -> set[int]:
    """Ids of the loop variables bound to a non-spatial iterator of ``block``."""
    realize: BlockRealize = sch.get_realize(block)
    out: set[int] = set()
    for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True):
        if iv.kind is not IterKind.SPATIAL:
            post_order_visit(value, lambda n: out.add(id(n)) if isinstance(n, Var) else None)
    return out


def _run(
    sch: Schedule, loops: list[LoopRV], limit: int, reduce: set[int], first_free: bool
) -> list[LoopRV]:
    """The longest run of ``loops`` (in order) that is serial, spatial and within ``limit``
    (with ``first_free`` the first loop counts whatever its extent)."""
    run: list[LoopRV] = []
    product = 1
    for lp in loops:
        node = sch.get(lp)
        if not isinstance(node, For):
            break
        extent = node.extent
        if node.kind is not ForKind.SERIAL or id(node.loop_var) in reduce:
            break
        if not isinstance(extent, IntImm):
            break
        if product * extent.value > limit and not (first_free and not run):
            break
        product *= extent.value
        run.append(lp)
    return run


def _step(index: Expr, var: Var) -> int | None:
    """How far ``index`` moves when ``var`` goes from 0 to 1 (every other variable 0)."""
    env: dict[Var, int] = dict.fromkeys(collect_vars(index), 0)
    try:
        at0 = evaluate(index, env)
        env[var] = 1
        at1 = evaluate(index, env)
    except EvaluationError:
        return None
    return int(at1) - int(at0)


def contiguous_innermost(sch: Schedule, leaf: BlockRV) -> LoopRV | None:
    """The innermost loop of ``leaf`` when it is serial, of constant extent above 1, binds only
    spatial iterators and moves the written element by one along the output's last dimension
    (and not at all along the others); else None."""
    loops = sch.get_loops(leaf)
    if not loops:
        return None
    node = sch.get(loops[-1])
    realize: BlockRealize = sch.get_realize(leaf)
    store = realize.block.body
    if not isinstance(node, For) or node.kind is not ForKind.SERIAL:
        return None
    if not isinstance(node.extent, IntImm) or node.extent.value < 2:
        return None
    if id(node.loop_var) in reduce_vars(sch, leaf) or not isinstance(store, BufferStore):
        return None
    if not store.indices:
        return None
    binding = {iv.var: value for iv, value in zip(realize.block.iter_vars, realize.iter_values,
                                                   strict=True)}  # fmt: skip
    steps = [_step(substitute(i, binding), node.loop_var) for i in store.indices]
    if steps[-1] != 1 or any(s != 0 for s in steps[:-1]):
        return None
    return loops[-1]


def _apply_to_leaf(sch: Schedule, leaf: BlockRV, anns: dict[str, int]) -> None:
    reduce = reduce_vars(sch, leaf)
    if anns.get(PARALLEL, 0) > 1:
        run = _run(sch, sch.get_loops(leaf), anns[PARALLEL], reduce, True)
        if run:
            fused = run[0] if len(run) == 1 else sch.try_(sch.fuse, *run).value_or(None)
            if fused is not None:
                sch.try_(sch.parallel, fused)
    if anns.get(VECTORIZE, 0) > 1:
        inner = contiguous_innermost(sch, leaf)
        if inner is not None:
            sch.try_(sch.vectorize, inner)
    loops = sch.get_loops(leaf)
    if anns.get(UNROLL, 0) > 0 and loops:
        sch.try_(sch.annotate, loops[0], AUTO_UNROLL, anns[UNROLL])
        if anns.get(TUNE_UNROLL_EXPLICIT, 0):
            sch.try_(sch.annotate, loops[0], UNROLL_EXPLICIT, 1)


class RewriteParallelVectorizeUnroll(Postproc):
    """Apply the parallel / vectorize / unroll amounts a space sampled (module docstring)."""

    name = "rewrite_parallel_vectorize_unroll"

    def apply(self, sch: Schedule) -> bool:
        """Rewrite every annotated block; False when an annotation value is not an int."""
        for name, anns in _annotated(sch):
            values: dict[str, int] = {}
            for key, value in anns.items():
                if isinstance(value, Expr):
                    value = value.value if isinstance(value, IntImm) else None
                if not isinstance(value, int) or isinstance(value, bool):
                    return False
                values[key] = value
            block = sch.get_block(name)
            for key in anns:
                sch.unannotate(block, key)
            for leaf in leaves(sch, block):
                _apply_to_leaf(sch, leaf, values)
        return True
