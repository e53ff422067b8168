"""Operator patterns: how a block's, and a PrimFunc's, outputs depend on their inputs.

The pattern decides how freely the graph layer fuses a kernel with its neighbours (smaller
values fuse more freely). Per block (:func:`block_op_pattern`):

* ``ELEMWISE``: no reduction; the store is indexed by iterators and every load uses exactly
  the store's indices (``C[i, j] = A[i, j] + B[i, j]``);
* ``BROADCAST``: every load index is one of the store's iterators or the constant 0, the
  iterators in the store's order (``C[i, j] = A[i, j] + b[j]``, ``x[0, j]``);
* ``INJECTIVE``: any other block without reduction (transpose, reshape, concat, take, pad);
* ``OUT_EWISE_FUSABLE``: a multiply-accumulate ``C[...] = C[...] + A[...] * B[...]`` of two
  different buffers (matmul, dense, conv2d), casts allowed around the product;
* ``COMM_REDUCE``: any other reduction (sum, max, softmax statistics, pooling);
* ``OPAQUE``: a body that is not a single store (argmax's paired stores, nested blocks), or an
  opaque iterator.

A PrimFunc (:func:`classify_prim_func`) is ``OPAQUE`` when it has no blocks under its root or
any block is opaque; ``OUT_EWISE_FUSABLE`` when its only reduction block is a
multiply-accumulate; ``COMM_REDUCE`` when it has any other reduction; otherwise the largest of
its blocks' patterns.
"""

from __future__ import annotations

import enum

from ...ir import (
    Add,
    Block,
    BlockRealize,
    BufferLoad,
    BufferStore,
    IntImm,
    IterKind,
    Mul,
    PrimFunc,
    Var,
)
from ._util import blocks_under, expect, loads_in, same_exprs, strip_casts


class OpPattern(enum.IntEnum):
    """How a kernel's outputs depend on its inputs (smaller fuses more freely)."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    COMM_REDUCE = 3
    OUT_EWISE_FUSABLE = 4
    OPAQUE = 8


def is_multiply_accumulate(block: Block) -> bool:
    """Whether ``block`` is ``C[v] = C[v] + A[...] * B[...]`` with ``A`` and ``B`` different.

    Casts may wrap the product; the two factors may be any expressions holding exactly two
    loads between them, of two different buffers (``x * x``, a sum of squares, is not one).

    Parameters
    ----------
    block
        The block to test.

    Returns
    -------
    bool
        False for anything else, including blocks without reduction iterators.
    """
    expect("is_multiply_accumulate", block, Block, "block", "a Block")
    store = block.body
    if not any(iv.kind is IterKind.REDUCE for iv in block.iter_vars):
        return False
    if not isinstance(store, BufferStore) or not isinstance(store.value, Add):
        return False
    acc, update = store.value.a, store.value.b
    if isinstance(update, BufferLoad) and update.buffer is store.buffer:
        acc, update = update, acc
    if not (isinstance(acc, BufferLoad) and acc.buffer is store.buffer):
        return False
    if not same_exprs(acc.indices, store.indices):
        return False
    product = strip_casts(update)
    if not isinstance(product, Mul):
        return False
    loads = loads_in(product)
    return len(loads) == 2 and loads[0].buffer is not loads[1].buffer


def _spatial_pattern(store: BufferStore) -> OpPattern:
    """ELEMWISE, BROADCAST or INJECTIVE for a store without reduction."""
    idx = store.indices
    if not all(isinstance(i, Var) for i in idx):
        return OpPattern.INJECTIVE
    pattern = OpPattern.ELEMWISE
    for load in loads_in(store.value):
        if len(load.indices) == len(idx) and all(
            a is b for a, b in zip(load.indices, idx, strict=True)
        ):
            continue
        pos = -1
        for i in load.indices:
            if isinstance(i, IntImm) and i.value == 0:
                continue
            found = next((k for k, v in enumerate(idx) if v is i), None)
            if found is None or found <= pos:
                return OpPattern.INJECTIVE
            pos = found
        pattern = OpPattern.BROADCAST
    return pattern


def block_op_pattern(block: Block) -> OpPattern:
    """The pattern of one block (see the module docstring).

    Parameters
    ----------
    block
        The block to classify.

    Returns
    -------
    OpPattern
        Never raises for a well-formed block; ``OPAQUE`` when nothing better is known.
    """
    expect("block_op_pattern", block, Block, "block", "a Block")
    if not isinstance(block.body, BufferStore):
        return OpPattern.OPAQUE
    kinds = {iv.kind for iv in block.iter_vars}
    if IterKind.OPAQUE in kinds:
        return OpPattern.OPAQUE
    if IterKind.REDUCE in kinds:
        if is_multiply_accumulate(block):
            return OpPattern.OUT_EWISE_FUSABLE
        return OpPattern.COMM_REDUCE
    return _spatial_pattern(block.body)


def _blocks_of(func: PrimFunc) -> list[Block]:
    """Every block of ``func`` at any depth, without the root block."""
    root = func.body.block if isinstance(func.body, BlockRealize) else None
    if root is not None and root.iter_vars:
        root = None
    return [b for b in blocks_under(func.body) if b is not root]


def classify_prim_func(func: PrimFunc) -> OpPattern:
    """The pattern of a whole PrimFunc (see the module docstring).

    Parameters
    ----------
    func
        The function; every block at any depth is considered, the root block excepted.

    Returns
    -------
    OpPattern
        The combined pattern.

    Raises
    ------
    ScheduleError
        When ``func`` is not a PrimFunc.
    """
    expect("classify_prim_func", func, PrimFunc, "func", "a PrimFunc")
    patterns = [block_op_pattern(b) for b in _blocks_of(func)]
    if not patterns or OpPattern.OPAQUE in patterns:
        return OpPattern.OPAQUE
    reductions = [p for p in patterns if p >= OpPattern.COMM_REDUCE]
    if not reductions:
        return max(patterns)
    if reductions == [OpPattern.OUT_EWISE_FUSABLE]:
        return OpPattern.OUT_EWISE_FUSABLE
    return OpPattern.COMM_REDUCE
