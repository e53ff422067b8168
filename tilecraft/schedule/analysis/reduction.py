"""Reduction detection: a block that folds values into its output with a commutative reducer.

A *reduction block* has at least one reduction iterator and no opaque one, writes one buffer
with a single store ``C[v] = C[v] op value`` (either operand order) where ``op`` is ``+``,
``*``, ``max`` or ``min``, ``value`` does not read ``C``, and the stored indices use no
reduction iterator; its init, when present, is a single store to the same element. This is
what ``rfactor`` and cross-thread reduction can split. ``argmax`` (two paired outputs) and a
block reading the accumulator inside ``value`` are not reductions in this sense.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ...ir import (
    Add,
    BinaryOp,
    Block,
    Buffer,
    BufferLoad,
    BufferStore,
    Expr,
    IterKind,
    Max,
    Min,
    Mul,
    Var,
)
from ._util import loads_in, same_exprs, vars_of
from .access import dominant_read, reduce_iters_innermost
from .block_info import BlockInfo, block_of


class ReduceKind(enum.Enum):
    """The commutative operation a reduction block folds with."""

    SUM = "sum"
    PROD = "prod"
    MAX = "max"
    MIN = "min"


_OPS: tuple[tuple[type[BinaryOp], ReduceKind], ...] = (
    (Add, ReduceKind.SUM),
    (Mul, ReduceKind.PROD),
    (Max, ReduceKind.MAX),
    (Min, ReduceKind.MIN),
)


@dataclass(frozen=True, slots=True, eq=False)
class ReductionInfo:
    """A reduction block ``C[spatial] = reducer(C[spatial], value)`` (module docstring).

    Attributes
    ----------
    block_name
        The block's name.
    reducer
        Sum, product, max or min.
    buffer, indices
        The output ``C`` and the indices stored to.
    value
        The value folded in at each step.
    init
        The init's stored value (None for a block without init, such as the update block
        left by ``decompose_reduction``).
    spatial_iters, reduce_iters
        The block's spatial and reduction iterators, in declaration order.
    reduce_innermost
        Whether the reduce iterators index the innermost dimensions of the block's dominant
        read (see :func:`~tilecraft.schedule.analysis.dominant_read`): ``sum(x, axis=-1)``
        yes, ``sum(x, axis=0)`` no.
    """

    block_name: str
    reducer: ReduceKind
    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr
    init: Expr | None
    spatial_iters: tuple[Var, ...]
    reduce_iters: tuple[Var, ...]
    reduce_innermost: bool


def _combine(store: BufferStore) -> tuple[ReduceKind, Expr] | None:
    """The reducer and folded value of ``C[v] = op(C[v], value)``, or None."""
    for op, kind in _OPS:
        if not isinstance(store.value, op):
            continue
        pair = (store.value.a, store.value.b)
        for acc, value in (pair, pair[::-1]):
            if (
                isinstance(acc, BufferLoad)
                and acc.buffer is store.buffer
                and same_exprs(acc.indices, store.indices)
            ):
                return kind, value
    return None


def _init_value(block: Block, store: BufferStore) -> Expr | str | None:
    init = block.init
    if init is None:
        return None
    if (
        isinstance(init, BufferStore)
        and init.buffer is store.buffer
        and same_exprs(init.indices, store.indices)
    ):
        return init.value
    return f'block "{block.name}": its init is not one store to the reduced element'


def _reduction(block: Block) -> ReductionInfo | str:
    where = f'block "{block.name}"'
    kinds = [iv.kind for iv in block.iter_vars]
    if IterKind.OPAQUE in kinds:
        return f"{where} has an opaque iterator"
    if IterKind.REDUCE not in kinds:
        return f"{where} has no reduction iterator"
    store = block.body
    if len({id(w.buffer) for w in block.writes}) > 1 or not isinstance(store, BufferStore):
        return f"{where} does not write a single buffer with one store"
    combined = _combine(store)
    if combined is None:
        return f"{where}: the store is not C = op(C, value) with op one of +, *, max, min"
    reducer, value = combined
    if any(ld.buffer is store.buffer for ld in loads_in(value)):
        return f"{where}: the folded value reads the output {store.buffer.name} again"
    reduce = [iv.var for iv in block.iter_vars if iv.kind is IterKind.REDUCE]
    if any(vars_of(i, reduce) for i in store.indices):
        return f"{where}: a reduction iterator indexes the output"
    init = _init_value(block, store)
    if isinstance(init, str):
        return init
    main = dominant_read(block)
    return ReductionInfo(
        block.name,
        reducer,
        store.buffer,
        store.indices,
        value,
        init,
        tuple(iv.var for iv in block.iter_vars if iv.kind is IterKind.SPATIAL),
        tuple(reduce),
        main is not None and reduce_iters_innermost(main.region, block),
    )


def detect_reduction(block: Block | BlockInfo) -> ReductionInfo | None:
    """Describe ``block`` as a reduction (module docstring), or None when it is not one.

    Parameters
    ----------
    block
        A Block or a BlockInfo.

    Returns
    -------
    ReductionInfo or None
        :func:`why_not_reduction` says why it is None.

    Raises
    ------
    ScheduleError
        When ``block`` is neither a Block nor a BlockInfo.
    """
    got = _reduction(block_of(block, "detect_reduction"))
    return None if isinstance(got, str) else got


def why_not_reduction(block: Block | BlockInfo) -> str | None:
    """Why :func:`detect_reduction` rejects ``block``; None when it is a reduction.

    Parameters
    ----------
    block
        A Block or a BlockInfo.

    Returns
    -------
    str or None
        The first broken condition, naming the block.
    """
    got = _reduction(block_of(block, "why_not_reduction"))
    return got if isinstance(got, str) else None
