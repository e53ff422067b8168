"""The one helper library of the schedule rules (CPU and GPU): questions about a schedule's
IR, and small steps built on the public Schedule API.

Contracts, shared by every helper here:

* A block or loop handle must be live: a stale handle raises
  :class:`~tilecraft.errors.ScheduleError` (from the Schedule API), which
  ``ApplyDefaultSchedule`` turns into the rule's decline. No helper returns None for a stale
  handle.
* Extents are ``int`` when constant and ``None`` when symbolic.
* The *questions* (``block_node``, ``loops_below``, ``loop_kinds``...) only read ``sch.func``;
  the *steps* (``attempt``, ``vectorize_innermost``, ``fold_epilogue``,
  ``localize_output``) call public primitives only, so a rule using them still produces a
  replayable trace, and each step is atomic: on failure the schedule is unchanged.
* Walks over the IR are iterative (:func:`tilecraft.ir.walk`): no recursion limit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import ScheduleError
from ..ir import (
    Block,
    Buffer,
    BufferLoad,
    Call,
    DataType,
    Expr,
    For,
    ForKind,
    IntImm,
    IterKind,
    Node,
    PrimFunc,
    Stmt,
    Var,
    collect_vars,
    uses_var,
    walk,
)
from ..schedule import BlockRV, LoopRV, Schedule
from ..schedule.analysis import BlockInfo, normalize_prim_func, why_not_normalized

# -- numbers -----------------------------------------------------------------------------------


def const_int(e: int | Expr) -> int | None:
    """The value of a constant extent (an int or IntImm); None when symbolic."""
    if isinstance(e, int):
        return e
    return e.value if isinstance(e, IntImm) else None


def product(values: Sequence[int | None]) -> int | None:
    """The product of extents; None when one is symbolic."""
    total = 1
    for v in values:
        if v is None:
            return None
        total *= v
    return total


def pick_tile(extent: int | None, preferred: int, step: int = 1, lowest: int | None = None) -> int:
    """A tile size for a loop of ``extent``.

    The whole loop when it is at most ``preferred``; else the largest multiple of ``step`` up
    to ``preferred`` dividing it, down to ``lowest`` (default: one ``step`` (a vector) when
    ``step > 1``, else ``preferred / 2``: fewer register rows cost more than a guard); else
    ``preferred``, and the split needs a guard. Symbolic extents get ``preferred``.
    """
    if extent is None:
        return preferred
    if extent <= preferred:
        return extent
    if lowest is None:
        lowest = step if step > 1 else max(preferred // 2, 1)
    for t in range(preferred, lowest - 1, -1):
        if t % step == 0 and extent % t == 0:
            return t
    return preferred


def open_schedule(func: PrimFunc) -> tuple[Schedule, list[BlockInfo]] | str:
    """A schedule of ``func`` and its blocks (normalized), or why a rule cannot look at it."""
    try:
        sch = Schedule(func)
    except ScheduleError as e:  # a function the Schedule API refuses to hold
        return f"cannot schedule it: {e.short}"
    infos = normalize_prim_func(sch)
    if infos is None:
        return f"not normalized: {why_not_normalized(sch)}"
    if not infos:
        return "the function has no blocks"
    return sch, infos


def single_reduction(sch: Schedule) -> tuple[BlockInfo, list[BlockInfo]] | str:
    """The one reduction block of a normalized function and its other blocks (each
    injective), or why the function is not of that shape."""
    infos = normalize_prim_func(sch)
    if infos is None:
        return f"the function is not normalized: {why_not_normalized(sch)}"
    reductions = [b for b in infos if b.is_reduction()]
    if len(reductions) != 1:
        return f"needs exactly one reduction block, found {len(reductions)}"
    main = reductions[0]
    others = [b for b in infos if b is not main]
    if any(b.is_opaque() or not b.is_injective() for b in others):
        return "a block other than the reduction is opaque or not injective"
    return main, others


# -- questions about the IR --------------------------------------------------------------------


def non_serial_loop(stmt: Stmt) -> For | None:
    """The first loop under ``stmt``, in program order, that is not serial (parallel,
    vectorized, unrolled or thread-bound): the sign that someone scheduled it."""
    for node in walk(stmt, prune=lambda n: not isinstance(n, Stmt)):
        if isinstance(node, For) and node.kind is not ForKind.SERIAL:
            return node
    return None


def loads_of(node: Node) -> list[BufferLoad]:
    """Every BufferLoad under ``node`` (a block's body, an expression), in program order."""
    nodes = walk(node, prune=lambda n: isinstance(n, Buffer))
    return [n for n in nodes if isinstance(n, BufferLoad)]


def has_call(node: Node) -> bool:
    """Whether ``node`` calls an intrinsic (exp, cos, ...): costly to recompute."""
    return any(isinstance(n, Call) for n in walk(node, prune=lambda n: isinstance(n, Buffer)))


def store_dtype(block: Block) -> DataType | None:
    """The dtype of the first buffer ``block`` writes; None when it writes none."""
    return block.writes[0].buffer.dtype if block.writes else None


def block_node(sch: Schedule, block: BlockRV) -> Block:
    """The Block ``block`` refers to now (ScheduleError when the handle is stale)."""
    return sch.get_realize(block).block


def loop_extent(sch: Schedule, loop: LoopRV) -> int | None:
    """The constant extent of ``loop``; None when symbolic."""
    node = sch.get(loop)
    return const_int(node.extent) if isinstance(node, For) else None


def loops_below(sch: Schedule, block: BlockRV, loop: LoopRV | None = None) -> list[LoopRV]:
    """The loops above ``block`` that lie inside ``loop``, outermost first.

    All the loops above ``block`` when ``loop`` is None; none when ``block`` is not under
    ``loop``.
    """
    loops = sch.get_loops(block)
    if loop is None:
        return loops
    at = next((n for n, lp in enumerate(loops) if lp.var is loop.var), None)
    return loops[at + 1 :] if at is not None else []


def loop_kinds(sch: Schedule, block: BlockRV, loops: Sequence[LoopRV]) -> list[set[IterKind]]:
    """For each loop, the kinds of ``block``'s iterators whose binding uses the loop."""
    realize = sch.get_realize(block)
    bindings = list(zip(realize.block.iter_vars, realize.iter_values, strict=True))
    out: list[set[IterKind]] = []
    for loop in loops:
        var = loop.var
        out.append({iv.kind for iv, value in bindings if var is not None and uses_var(value, var)})
    return out


def iter_var_of_loop(sch: Schedule, block: BlockRV, loop: LoopRV) -> Var | None:
    """The iterator of ``block`` bound to exactly ``loop``'s variable; None when none is."""
    realize = sch.get_realize(block)
    for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True):
        if value is loop.var:
            return iv.var
    return None


def bound_alone(sch: Schedule, block: BlockRV, loop: LoopRV) -> bool:
    """Whether some iterator of ``block`` is bound to exactly ``loop``'s variable."""
    return iter_var_of_loop(sch, block, loop) is not None


def loop_of_iter(sch: Schedule, block: BlockRV, index: int, below: LoopRV | None = None) -> LoopRV:
    """The innermost loop above ``block`` (inside ``below``) whose variable the binding of the
    block's iterator ``index`` uses.

    Raises
    ------
    ScheduleError
        When no such loop exists (the iterator is bound to a constant there).
    """
    realize = sch.get_realize(block)
    used = {id(v) for v in collect_vars(realize.iter_values[index])}
    found = [lp for lp in loops_below(sch, block, below) if id(lp.var) in used]
    if not found:
        raise ScheduleError(
            "loop_of_iter", f'iterator {index} of block "{block.name}" is bound to no loop'
        )
    return found[-1]


def writes_param(sch: Schedule, block: BlockRV) -> bool:
    """Whether ``block`` writes a buffer that is a parameter of the function."""
    params = {id(b) for b in sch.func.buffer_params}
    return any(id(w.buffer) in params for w in block_node(sch, block).writes)


# -- steps -------------------------------------------------------------------------------------


def attempt(sch: Schedule, fn: Callable[..., object], *args: object) -> bool:
    """Call a primitive (or a function of several); on ScheduleError undo it and return False.

    The boolean form of ``Schedule.try_``.
    """
    return sch.try_(fn, *args).ok


def vectorize_innermost(sch: Schedule, block: BlockRV, below: LoopRV | None = None) -> bool:
    """Vectorize the innermost loop of ``block`` inside ``below`` when that is legal."""
    loops = loops_below(sch, block, below)
    return bool(loops) and attempt(sch, sch.vectorize, loops[-1])


def fold_epilogue(sch: Schedule, main: BlockRV) -> list[BlockRV]:
    """Fold the blocks after ``main`` into as few blocks as ``compute_inline`` allows.

    Each consumer of ``main`` writing an intermediate buffer is inlined into its own
    consumers (``D = C + bias; E = max(D, 0)`` becomes ``E = max(C + bias, 0)``), repeatedly,
    until every block reading ``main``'s output writes a function parameter or cannot be
    inlined. Returns the blocks reading ``main``'s output, in program order.
    """
    progress = True
    while progress:
        progress = False
        for block in sch.get_consumers(main):
            if writes_param(sch, block) or not sch.get_consumers(block):
                continue
            if attempt(sch, sch.compute_inline, block):
                progress = True
                break
    return sch.get_consumers(main)


def localize_output(
    sch: Schedule, block: BlockRV, loop: LoopRV, *, copy_param: bool = True
) -> bool:
    """Make ``block`` accumulate into a local buffer written back under ``loop``.

    An intermediate output becomes the local buffer itself (``set_scope``) once every block
    reading it is moved under ``loop`` (``reverse_compute_at``), after folding the epilogue
    (:func:`fold_epilogue`; without folding when that fails). A parameter output gets a local
    copy (``cache_write``) when ``copy_param``. Atomic: on failure the schedule is unchanged
    and the result is False.
    """

    def via_copy() -> None:
        write_back = sch.cache_write(block, 0, "local")
        sch.reverse_compute_at(write_back, loop)

    def in_place(fold: bool) -> None:
        consumers = fold_epilogue(sch, block) if fold else sch.get_consumers(block)
        for consumer in consumers:
            sch.reverse_compute_at(consumer, loop)
        sch.set_scope(block, 0, "local")

    if writes_param(sch, block):
        return copy_param and attempt(sch, via_copy)
    return attempt(sch, in_place, True) or attempt(sch, in_place, False)
