"""Skip the key blocks a causal mask hides (package-private; see ``attention.py``).

:func:`tilecraft.topi.attention` with ``causal=True`` gives query ``i`` the keys
``j <= i + shift`` (``shift = T - S``): a hidden key's masked score is ``x + (-inf)`` and its
weight ``exp(-80) * select(j <= i + shift, 1, 0)``, exactly 0. For the
query block of rows ``[q * bq, q * bq + bq)`` every key beyond ``hi = q * bq + bq - 1 + shift``
is hidden from all its rows, so each stage that iterates over keys (scores, mask, row max,
arguments, exponentials, weights, row sum, weighted sum) runs only its key chunks starting at or
before ``hi`` (``Schedule.guard``).

Exactness. (1) What is skipped is hidden: a chunk starting after ``hi`` holds keys hidden from
every row of the block. (2) What is read was written: the stages that write key-indexed
buffers (scores and its init, mask, arguments, exponentials, weights) run chunks of exactly the
scores tile's ``nr`` keys, aligned to it, and the readers' chunks divide ``nr``, so a reader's
chunk starting at or before ``hi`` lies in one written tile; when a reader's chunk does not
divide ``nr`` (the row reductions of a ragged ``T``) nothing is skipped. (3) The skipped terms
change no result: the row max's skipped values are ``-inf`` (``max(m, -inf) = m``, and every
row keeps its visible key ``i + shift``), the row sum's and the weighted sum's skipped
weights are exactly 0 (``s + 0 = s``, ``s >= +0``; ``0 * v = 0`` for finite ``v``). So the
scheduled function is bit-identical to the unscheduled one for finite inputs. A function
whose masks are not of this form, or whose ``shift`` is not a constant (symbolic ``S`` and
``T`` other than equal), is scheduled without skipping.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ...arith import Analyzer
from ...ir import (
    LE,
    Add,
    Block,
    BufferStore,
    Expr,
    FloatImm,
    For,
    IntImm,
    Mul,
    Range,
    Select,
    Var,
    substitute,
    uses_var,
)
from ...schedule import BlockRV, LoopRV, Schedule
from ..common import block_node
from ._attention_match import AttentionMatch


def causal_shift(sch: Schedule, m: AttentionMatch) -> int | None:
    """``T - S`` when the mask and the weights are ``topi.attention``'s causal ones (the
    module docstring's form), else None."""
    masked = _mask_shift(block_node(sch, sch.get_block(m.masked)), Add, 0.0, -math.inf)
    weights = _mask_shift(block_node(sch, sch.get_block(m.exp)), Mul, 1.0, 0.0)
    return masked if masked is not None and masked == weights else None


def _mask_shift(block: Block, op: type, kept: float, hidden: float) -> int | None:
    """``c`` when ``block`` stores ``x <op> select(key <= row + c, kept, hidden)`` at
    ``[.., row, key]``."""
    store = block.body
    if not isinstance(store, BufferStore) or not isinstance(store.value, op):
        return None
    sel = store.value.b  # type: ignore[attr-defined]
    if not isinstance(sel, Select) or len(store.indices) < 2:
        return None
    if not (_is_const(sel.true_value, kept) and _is_const(sel.false_value, hidden)):
        return None
    return _shift(sel.condition, *store.indices[-2:])


def _shift(cond: Expr, row: Expr, key: Expr) -> int | None:
    """``c`` when ``cond`` is ``key <= row + c`` for a constant ``c``."""
    if not isinstance(cond, LE) or cond.a is not key or not isinstance(key, Var):
        return None
    shift = Analyzer().simplify(cond.b - row)
    return shift.value if isinstance(shift, IntImm) else None


def _is_const(e: Expr, value: float) -> bool:
    return isinstance(e, FloatImm) and e.value == value


@dataclass(frozen=True)
class _Guard:
    block: BlockRV
    loop: LoopRV
    coef: int


def skip_hidden_keys(
    sch: Schedule, m: AttentionMatch, q_block: LoopRV, bq: int, shift: int, nr: int
) -> bool:
    """Guard every stage under ``q_block`` that iterates over keys (module docstring); False,
    with nothing changed, when a stage's key chunks do not fit the scores tile's ``nr``.
    Call it under ``Schedule.try_``: a primitive refusing leaves no stage half guarded."""
    written = [m.scores, m.masked, *m.between, m.exp]
    keyed = {block_node(sch, sch.get_block(n)).writes[0].buffer.name for n in written}
    guards: list[_Guard] = []
    for block in sch.get_child_blocks(q_block):
        node = block_node(sch, block)
        writes = any(w.buffer.name in keyed for w in node.writes)
        access = [r for r in (*node.writes, *node.reads) if r.buffer.name in keyed]
        if not access:
            continue
        chunk = _key_chunk(sch, block, access[0].region[-1].min)
        if chunk is None or (chunk.coef != nr if writes else nr % chunk.coef != 0):
            return False
        guards.append(chunk)
    for g in guards:
        if block_node(sch, g.block).init is not None:  # the init runs at key 0, never skipped
            sch.decompose_reduction(g.block, g.loop)
        sch.guard(g.block, [q_block, g.loop], _bound(g.coef, bq, bq - 1 + shift))
    return bool(guards)


def _bound(coef: int, bq: int, last: int):  # type: ignore[no-untyped-def]
    """``(chunk start, last key of the query block)`` of the loops ``(q, chunk)``."""
    return lambda q, c: (c * coef if coef != 1 else c, q * bq + last)


def _key_chunk(sch: Schedule, block: BlockRV, index: Expr) -> _Guard | None:
    """The outermost loop of ``block``'s key ``index`` and its stride, when the key is
    ``loop * coef + inner`` with ``0 <= inner < coef`` (a dense aligned chunk)."""
    realize = sch.get_realize(block)
    binding = {
        iv.var: v for iv, v in zip(realize.block.iter_vars, realize.iter_values, strict=True)
    }
    key = substitute(index, binding)
    loops: Sequence[LoopRV] = sch.get_loops(block)
    nodes = [n for n in map(sch.get, loops) if isinstance(n, For)]
    used = [(lp, n) for lp, n in zip(loops, nodes, strict=True) if uses_var(key, n.loop_var)]
    if not used:
        return None
    ana = Analyzer()
    for n in nodes:
        ana.bind(n.loop_var, Range(n.min, n.extent))
    outer, rest = used[0], [n.loop_var for _, n in used[1:]]
    var: Var = outer[1].loop_var
    zero = {v: IntImm(v.dtype, 0) for v in rest}
    start = ana.simplify(substitute(key, zero))
    coef = ana.simplify(substitute(start, {var: IntImm(var.dtype, 1)}))
    if not isinstance(coef, IntImm) or coef.value < 1:
        return None
    if not ana.can_prove_equal(start - var * coef.value, 0):
        return None
    inner = ana.const_int_bound(ana.simplify(key - start))
    if inner.min_value < 0 or inner.max_value >= coef.value:
        return None
    return _Guard(block, outer[0], coef.value)
