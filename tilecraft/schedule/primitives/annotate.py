"""Loop-kind and annotation primitives: ``parallel``, ``vectorize``, ``unroll``, ``bind``,
``annotate``, ``unannotate``.
"""

from __future__ import annotations

from typing import Annotated, Any

from ...arith import Analyzer
from ...errors import ScheduleError
from ...ir import (
    THREAD_TAGS,
    BlockRealize,
    Expr,
    For,
    ForKind,
    IntImm,
    IterKind,
    Var,
    collect_vars,
    structural_equal,
    uses_var,
)
from .. import _tree
from ..arguments import AnnotationValue, OneOf, Str
from ..instruction import primitive
from ..state import BlockRV, LoopRV, ScheduleState
from ._annotation_values import MAX_AUTO_UNROLL_STEP as MAX_AUTO_UNROLL_STEP
from ._annotation_values import annotation_problem
from ._looporder import check_kind_nesting
from .loop import check_serial, loop_error_fragment, loop_node


def check_iters_bound_by(
    state: ScheduleState, node: For, allowed: tuple[IterKind, ...], what: str
) -> None:
    """Require every block iterator bound to an expression of ``node``'s variable to be of an
    ``allowed`` kind, and every block with reduction iterators to depend on the loop."""
    var = node.loop_var
    for br in _tree.blocks_under(node.body):
        used = False
        for iv, val in zip(br.block.iter_vars, br.iter_values, strict=True):
            if not uses_var(val, var):
                continue
            used = True
            if iv.kind not in allowed:
                raise state.error(
                    f'loop "{var.name}" binds {iv.kind.value} iterator "{iv.var.name}" of block '
                    f'"{br.block.name}"',
                    requires=f"{what} every block iterator bound by the loop to be "
                    + " or ".join(k.value for k in allowed),
                    fragment=loop_error_fragment(state, node),
                    hint="split/reorder so that only spatial iterators depend on the loop",
                    locations=[var.name, br.block.name],
                )
        has_reduce = any(iv.kind is IterKind.REDUCE for iv in br.block.iter_vars)
        if has_reduce and not used and IterKind.REDUCE not in allowed:
            raise state.error(
                f'block "{br.block.name}" reduces but does not depend on loop "{var.name}"; '
                "iterations would update the same element",
                requires=f"{what} every reduction block under the loop to bind it spatially",
                fragment=loop_error_fragment(state, node),
                locations=[var.name, br.block.name],
            )


def _set_kind(state: ScheduleState, node: For, kind: ForKind, thread: str | None = None) -> None:
    state.commit(_tree.replace_stmt(state.func, node, node.update(kind=kind, thread=thread)))


def check_kind_nesting_around(state: ScheduleState, loop: LoopRV, kind: ForKind, what: str) -> For:
    """The loop, after checking that making it ``kind`` nests no parallel loop inside a
    parallel or vectorized loop and no vectorized loop inside a vectorized one."""
    node, path = loop_node(state, loop)
    for outer in (s for s in path if isinstance(s, For)):
        check_kind_nesting(state, outer, node, what, kinds=(outer.kind, kind))
    for inner in (s for s, _ in _tree.walk(node.body) if isinstance(s, For)):
        check_kind_nesting(state, node, inner, what, kinds=(kind, inner.kind))
    return node


@primitive("parallel", inputs=("loop",))
def parallel(state: ScheduleState, loop: LoopRV) -> None:
    """Run ``loop`` in parallel (CPU threads).

    Requires: (1) the loop is serial; (2) every block iterator bound by the loop is spatial,
    and every reduction block under it depends on the loop; (3) no enclosing loop is
    parallel or vectorized (no OpenMP region inside a simd region; no nested parallel
    teams) and no loop inside it is parallel.
    Rewrite:  for i in range(n)  ->  for i in parallel(n)
    """
    node, _ = loop_node(state, loop)
    check_serial(state, node, "parallel needs")
    check_iters_bound_by(state, node, (IterKind.SPATIAL,), "parallel needs")
    check_kind_nesting_around(state, loop, ForKind.PARALLEL, "parallel needs")
    _set_kind(state, node, ForKind.PARALLEL)


@primitive("vectorize", inputs=("loop",))
def vectorize(state: ScheduleState, loop: LoopRV) -> None:
    """Vectorize ``loop``.

    Requires: (1) the loop is serial; (2) every block iterator bound by the loop is spatial,
    and every reduction block under it depends on the loop; (3) no enclosing loop is
    vectorized and no loop inside it is parallel or vectorized.
    Rewrite:  for i in range(8)  ->  for i in vectorized(8)
    """
    node, _ = loop_node(state, loop)
    check_serial(state, node, "vectorize needs")
    check_iters_bound_by(state, node, (IterKind.SPATIAL,), "vectorize needs")
    check_kind_nesting_around(state, loop, ForKind.VECTORIZED, "vectorize needs")
    _set_kind(state, node, ForKind.VECTORIZED)


@primitive("unroll", inputs=("loop",))
def unroll(state: ScheduleState, loop: LoopRV) -> None:
    """Unroll ``loop``.

    Requires: the loop is serial.
    Rewrite:  for i in range(4)  ->  for i in unroll(4)
    """
    node, _ = loop_node(state, loop)
    check_serial(state, node, "unroll needs")
    _set_kind(state, node, ForKind.UNROLLED)


@primitive("bind", inputs=("loop",))
def bind(state: ScheduleState, loop: LoopRV, thread: Annotated[str, OneOf(THREAD_TAGS)]) -> None:
    """Bind ``loop`` to a GPU thread axis.

    Requires: (1) ``thread`` is blockIdx.x/y/z, threadIdx.x/y/z or vthread(.x/y/z);
    (2) the loop is serial; (3) blockIdx/vthread bind spatial iterators only; threadIdx may
    also bind reduction iterators (a cross-thread reduction); (4) where a loop bound to the
    same axis encloses the loop (or the loop encloses one), the inner loop iterates the same
    thread index as the outer one: nothing under the inner loop uses the outer loop's
    variable, the inner extent is at most the outer one, and every block under the inner loop
    can run again with the same result (it reads no buffer it writes, or its whole reduction,
    init included, runs under the inner loop). Each thread of the outer loop then does the same
    work, and the inner loop divides it among them: the cooperative fetch of a shared tile.
    Rewrite:  for i in range(256)  ->  for i in thread_binding(256, "threadIdx.x")
    """
    node, path = loop_node(state, loop)
    check_serial(state, node, "bind needs")
    outer = [s for s in path if isinstance(s, For) and s.thread == thread]
    inner = [s for s, _ in _tree.walk(node.body) if isinstance(s, For) and s.thread == thread]
    for out, inn in [(o, node) for o in outer] + [(node, i) for i in inner]:
        check_same_thread_nesting(state, node, out, inn)
    allowed = (
        (IterKind.SPATIAL, IterKind.REDUCE)
        if thread.startswith("threadIdx")
        else (IterKind.SPATIAL,)
    )
    check_iters_bound_by(state, node, allowed, "bind needs")
    _set_kind(state, node, ForKind.THREAD_BINDING, thread)


def check_same_thread_nesting(state: ScheduleState, node: For, outer: For, inner: For) -> None:
    """``inner`` (under ``outer``, both on one thread axis) may iterate ``outer``'s index."""
    var = outer.loop_var

    def fail(why: str, hint: str) -> ScheduleError:
        return state.error(
            f'loop "{outer.loop_var.name}" is already bound to "{outer.thread or node.thread}" '
            f'and "{inner.loop_var.name}" nested in it {why}',
            requires="bind of a loop nested in (or around) a loop on the same thread axis "
            "needs the inner loop to be independent of the outer one (it iterates the same "
            "thread index), no longer than it, and re-runnable",
            fragment=loop_error_fragment(state, node),
            hint=hint,
            locations=[node.loop_var.name, outer.loop_var.name, inner.loop_var.name],
        )

    uses = [s for s, _ in _tree.walk(inner) if _uses_outer(s, var)]
    if uses:
        raise fail(
            f'depends on "{var.name}"',
            "bind a loop whose work is the same for every value of the outer loop (a "
            "cooperative fetch after compute_at), or bind another axis",
        )
    if not _provably_le(inner.extent, outer.extent):
        raise fail(
            f"has extent {inner.extent.script()} above {outer.extent.script()}",
            "split the inner loop to the outer loop's extent",
        )
    for br in _tree.blocks_under(inner.body):
        if not _rerunnable_under(br, inner):
            raise fail(
                f'holds block "{br.block.name}", which would accumulate once per outer iteration',
                "bind a loop holding only whole computations (copies, or reductions with "
                "their init)",
            )


def _uses_outer(s: object, var: Var) -> bool:
    """``s`` (a loop or block realize) uses ``var`` in its range, bindings or predicate."""
    if isinstance(s, For):
        return uses_var(s.min, var) or uses_var(s.extent, var)
    if isinstance(s, BlockRealize):
        return uses_var(s.predicate, var) or any(uses_var(v, var) for v in s.iter_values)
    return False


def _provably_le(a: Expr, b: Expr) -> bool:
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return a.value <= b.value
    return structural_equal(a, b) or Analyzer().can_prove(a <= b)


def _rerunnable_under(br: BlockRealize, loop: For) -> bool:
    """Running ``br`` again (all of ``loop``) gives the same result: it reads no buffer it
    writes, or it has an init and every loop driving its reduce iterators is under ``loop``."""
    blk = br.block
    written = _tree.buffers_written(blk)
    if not any(b is w for b in _tree.buffers_read(blk) for w in written):
        return True
    if blk.init is None:
        return False
    inside = {id(s.loop_var) for s, _ in _tree.walk(loop) if isinstance(s, For)}
    for iv, value in zip(blk.iter_vars, br.iter_values, strict=True):
        if iv.kind is IterKind.REDUCE and any(id(v) not in inside for v in collect_vars(value)):
            return False
    return True


def _plain(value: Any) -> Any:
    """The (checked) annotation value with sampled ints (ExprRV) made plain ints."""

    def plain(v: Any) -> Any:
        return int(v) if isinstance(v, int) and not isinstance(v, bool) else v

    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return plain(value)


def check_annotation_value(
    state: ScheduleState, block_or_loop: BlockRV | LoopRV, key: str, value: Any
) -> None:
    """Refuse a value that the lowering pass reading annotation ``key`` cannot use."""
    on_loop = isinstance(block_or_loop, LoopRV)
    problem = annotation_problem(key, value, on_loop)
    if problem is None:
        return
    if isinstance(block_or_loop, LoopRV):
        node = state.get_loop(block_or_loop)
        what, name, fragment = "loop", node.loop_var.name, loop_error_fragment(state, node)
    else:
        what, name, fragment = "block", state.get_block(block_or_loop).block.name, ""
    raise state.error(
        f'{what} "{name}": {problem.short}',
        requires=problem.requires,
        fragment=fragment,
        locations=[name],
    )


@primitive("annotate", inputs=("block_or_loop", "value"))
def annotate(
    state: ScheduleState,
    block_or_loop: BlockRV | LoopRV,
    key: Annotated[str, Str(nonempty=True)],
    value: Annotated[Any, AnnotationValue()],
) -> None:
    """Set annotation ``key`` to ``value`` on a block or loop.

    Requires: (1) ``key`` is a non-empty string; ``value`` is a bool, int, float, str or a
    list; (2) the keys lowering acts on hold what it can use: ``pragma_auto_unroll_max_step``
    an int from 0 to :data:`MAX_AUTO_UNROLL_STEP` (1024); ``software_pipeline_stage`` (on a
    loop) a list of stages, each 0 or ``S - 1 >= 1``; ``software_pipeline_order`` (on a loop)
    a permutation of ``0 .. n-1``.
    Rewrite:  with block("C")  ->  with block("C"): T.block_attr({key: value})
    """
    value = _plain(value)
    check_annotation_value(state, block_or_loop, key, value)
    if isinstance(block_or_loop, BlockRV):
        br = state.get_block(block_or_loop)
        blk = br.block.update(annotations=br.block.annotations.with_item(key, value))
        state.commit(_tree.replace_stmt(state.func, br, br.update(block=blk)))
    else:
        node = state.get_loop(block_or_loop)
        new = node.update(annotations=node.annotations.with_item(key, value))
        state.commit(_tree.replace_stmt(state.func, node, new))


@primitive("unannotate", inputs=("block_or_loop",))
def unannotate(state: ScheduleState, block_or_loop: BlockRV | LoopRV, key: str) -> None:
    """Remove annotation ``key`` from a block or loop.

    Requires: the annotation is present.
    Rewrite:  with block("C"): T.block_attr({key: v})  ->  with block("C")
    """
    if isinstance(block_or_loop, BlockRV):
        br = state.get_block(block_or_loop)
        attrs, where = br.block.annotations, f'block "{br.block.name}"'
    else:
        node = state.get_loop(block_or_loop)
        attrs, where = node.annotations, f'loop "{node.loop_var.name}"'
    if key not in attrs:
        raise state.error(
            f"{where} has no annotation {key!r}",
            requires="unannotate needs the annotation to be present",
            hint=f"its annotations are {sorted(attrs)}",
        )
    if isinstance(block_or_loop, BlockRV):
        blk = br.block.update(annotations=attrs.without(key))
        state.commit(_tree.replace_stmt(state.func, br, br.update(block=blk)))
    else:
        state.commit(
            _tree.replace_stmt(state.func, node, node.update(annotations=attrs.without(key)))
        )
