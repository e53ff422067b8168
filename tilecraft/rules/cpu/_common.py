"""Helpers shared by the CPU rules: reading the schedule's IR, picking tiles, fusing epilogues.

Everything here reads ``sch.func`` (plain IR) or calls the public Schedule API, so a rule
using it still produces a replayable trace.
"""

from __future__ import annotations

from collections.abc import Callable

from ...errors import ScheduleError
from ...ir import (
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    Expr,
    For,
    IfThenElse,
    IntImm,
    LetStmt,
    Node,
    PrimFunc,
    SeqStmt,
    Stmt,
    collect_vars,
)
from ...ir.visitor import iter_children
from ...schedule import BlockRV, LoopRV, Schedule


def const_int(e: int | Expr) -> int | None:
    """The value of a constant extent (an int or IntImm); None when symbolic."""
    if isinstance(e, int):
        return e
    return e.value if isinstance(e, IntImm) else None


def find_realize(func: PrimFunc, name: str) -> BlockRealize:
    """The BlockRealize of block ``name`` in ``func`` (iterative walk)."""
    stack: list[Stmt] = [func.body]
    while stack:
        s = stack.pop()
        if isinstance(s, BlockRealize):
            if s.block.name == name:
                return s
            stack.append(s.block.body)
        elif isinstance(s, (For, LetStmt, Allocate)):
            stack.append(s.body)
        elif isinstance(s, SeqStmt):
            stack.extend(s.stmts)
        elif isinstance(s, IfThenElse):
            stack.extend(x for x in (s.then_case, s.else_case) if x is not None)
    raise ScheduleError("find_realize", f'no block "{name}" in the function')


def loop_of_iter(sch: Schedule, block: BlockRV, index: int, below: LoopRV | None = None) -> LoopRV:
    """The innermost loop above ``block`` (below ``below``) whose variable the binding of the
    block's iterator ``index`` uses.

    Raises
    ------
    ScheduleError
        When no such loop exists (the iterator is bound to a constant there).
    """
    realize = find_realize(sch.func, block.name)
    used = {id(v) for v in collect_vars(realize.iter_values[index])}
    loops = loops_below(sch, block, below)
    found = [lp for lp in loops if id(lp.var) in used]
    if not found:
        raise ScheduleError(
            "loop_of_iter", f'iterator {index} of block "{block.name}" is bound to no loop'
        )
    return found[-1]


def pick_tile(extent: int | None, preferred: int, step: int = 1) -> int:
    """A tile size for a loop of ``extent``.

    The whole loop when it is at most ``preferred``; else the largest multiple of ``step`` up
    to ``preferred`` dividing it, down to one ``step`` (a vector) when ``step > 1``, else down
    to ``preferred / 2`` (fewer register rows cost more than a guard); else ``preferred``,
    and the split needs a guard. Symbolic extents get ``preferred``.
    """
    if extent is None:
        return preferred
    if extent <= preferred:
        return extent
    lowest = step if step > 1 else max(preferred // 2, 1)
    for t in range(preferred, lowest - 1, -1):
        if t % step == 0 and extent % t == 0:
            return t
    return preferred


def block_node(sch: Schedule, block: BlockRV) -> Block:
    """The Block a handle refers to now."""
    node = sch.get(block)
    assert isinstance(node, Block)
    return node


def loads_of(block: Block) -> list[BufferLoad]:
    """Every BufferLoad in the block's body (iterative walk over expressions)."""
    out: list[BufferLoad] = []
    stack: list[Node] = [block.body]
    while stack:
        node = stack.pop()
        if isinstance(node, BufferLoad):
            out.append(node)
        if not isinstance(node, Buffer):
            stack.extend(iter_children(node))
    return out


def loops_below(sch: Schedule, block: BlockRV, loop: LoopRV | None) -> list[LoopRV]:
    """The loops above ``block`` that lie below ``loop`` (all of them when ``loop`` is None)."""
    loops = sch.get_loops(block)
    if loop is None:
        return loops
    ids = [id(lp.var) for lp in loops]
    return loops[ids.index(id(loop.var)) + 1 :] if id(loop.var) in ids else loops


def vectorize_innermost(sch: Schedule, block: BlockRV, below: LoopRV | None = None) -> bool:
    """Vectorize the innermost loop of ``block`` below ``below`` when that is legal."""
    loops = loops_below(sch, block, below)
    return bool(loops) and attempt(sch, sch.vectorize, loops[-1])


def attempt(sch: Schedule, fn: Callable[..., object], *args: object) -> bool:
    """Call a primitive; on ScheduleError undo it and return False (``Schedule.try_``)."""
    return sch.try_(fn, *args).ok


def writes_param(sch: Schedule, block: BlockRV) -> bool:
    """Whether ``block`` writes a buffer that is a parameter of the function."""
    params = {id(b) for b in sch.func.buffer_params}
    node = sch.get(block)
    assert not isinstance(node, (For, int))
    return any(id(w.buffer) in params for w in node.writes)


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
