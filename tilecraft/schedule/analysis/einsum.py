"""Einsum-style index classification of a reduction block.

A block is an *einsum of two operands* when it computes ``C[...] = C[...] + A[...] * B[...]``
(casts allowed around the loads and the product) and every index of ``C``, ``A`` and ``B`` is
a single block iterator or an integer constant, each iterator at most once per access. Its
iterators then fall into four groups, as in ``C[S, I, J] += A[S, I, K] * B[S, J, K]``:

* ``S`` (batch): spatial, indexes ``C``, ``A`` and ``B``;
* ``I``: spatial, indexes ``C`` and the left operand ``A`` only;
* ``J``: spatial, indexes ``C`` and the right operand ``B`` only;
* ``K`` (reduce): reduction iterators, each indexing both ``A`` and ``B`` and not ``C``.

The *left* operand (``lhs``) is the one indexed by the first non-batch index of ``C``, so the
output reads ``C[.., I, .., J, ..]`` whenever the block allows it; when neither operand has a
non-batch iterator it is the first factor of the product. Matmul (``A[i, k] * B[k, j]``),
batch matmul, ``dense``/linear with a ``(N, K)`` weight (``A[i, k] * W[j, k]``) and GEMV are
einsums; so is conv2d once its input read is staged through ``reindex`` (an implicit GEMM:
``I`` = batch and output pixels, ``J`` = output channels, ``K`` = input channel and window).

Rejected, with a reason (:func:`why_not_einsum`): blocks without reduction iterators or with an
opaque one; several writes, or a body that is not one store; an update other than ``+``; an
addend that is not a product of two loads (``sum(x)``, ``sum(exp(x))``, ``A * B * C``); the same
access twice (``x[i, k] * x[i, k]``, a sum of squares); an index that is an expression (conv2d
and pooling before ``reindex``); an iterator twice in one access (``A[k, k]``); a reduce
iterator missing from an operand; a spatial iterator missing from ``C`` or found in ``C`` only.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from ...ir import (
    Add,
    Block,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Expr,
    IntImm,
    IterKind,
    Mul,
    Var,
)
from ._util import same_exprs, strip_casts
from .block_info import BlockInfo, block_of


class IndexRole(enum.Enum):
    """The group of the iterator indexing one dimension of an einsum access."""

    BATCH = "S"
    ROW = "I"
    COL = "J"
    REDUCE = "K"
    CONST = "-"


@dataclass(frozen=True, slots=True, eq=False)
class EinsumOperand:
    """One access of an einsum block: the output ``C`` or an operand ``A``/``B``.

    Attributes
    ----------
    buffer
        The buffer accessed.
    indices
        The access's indices (block iterators or integer constants).
    roles
        The group of each index, one per buffer dimension.
    region_index
        Position of the buffer in the block's reads (operands) or writes (the output): the
        index ``cache_read``/``reindex`` take.
    """

    buffer: Buffer
    indices: tuple[Expr, ...]
    roles: tuple[IndexRole, ...]
    region_index: int

    @property
    def layout(self) -> str:
        """The roles as letters, outermost dimension first: ``"IK"``, ``"SKJ"``, ``"-IK"``."""
        return "".join(r.value for r in self.roles)

    @property
    def reduce_innermost(self) -> bool:
        """Whether the reduce iterators are the innermost indexed dimensions.

        Constant indices are ignored: true for ``A[i, k]`` and ``W[j, k]`` (contiguous along
        ``K``, the canonical ``A[S, I, K]`` layout), false for ``B[k, j]`` (transposed) and for
        the output.
        """
        letters = [r for r in self.roles if r is not IndexRole.CONST]
        n_k = sum(r is IndexRole.REDUCE for r in letters)
        return n_k > 0 and all(r is IndexRole.REDUCE for r in letters[len(letters) - n_k :])


@dataclass(frozen=True, slots=True, eq=False)
class EinsumInfo:
    """An einsum block ``C[S, I, J] += A[S, I, K] * B[S, J, K]`` (see the module docstring).

    Attributes
    ----------
    block_name
        The block's name.
    output, lhs, rhs
        ``C``, ``A`` (holding the ``I`` iterators) and ``B`` (holding ``J``).
    batch_iters, i_iters, j_iters
        The spatial iterators of each group, in the order they index ``C``.
    k_iters
        The reduce iterators, in the order they index ``A``.
    """

    block_name: str
    output: EinsumOperand
    lhs: EinsumOperand
    rhs: EinsumOperand
    batch_iters: tuple[Var, ...]
    i_iters: tuple[Var, ...]
    j_iters: tuple[Var, ...]
    k_iters: tuple[Var, ...]

    def is_canonical(self) -> bool:
        """Whether C, A and B are laid out ``[S, I, J]``, ``[S, I, K]``, ``[S, J, K]``.

        Constant indices are ignored.
        """
        return (
            _sorted_as(self.output.roles, "SIJ")
            and _sorted_as(self.lhs.roles, "SIK")
            and _sorted_as(self.rhs.roles, "SJK")
        )


def _sorted_as(roles: Sequence[IndexRole], order: str) -> bool:
    ranks = [order.index(r.value) for r in roles if r is not IndexRole.CONST]
    return ranks == sorted(ranks)


def _accumulate(block: Block) -> tuple[BufferStore, Expr] | str:
    """The store ``C[v] = C[v] + update`` of a reduction block and its ``update``."""
    where = f'block "{block.name}"'
    if any(iv.kind is IterKind.OPAQUE for iv in block.iter_vars):
        return f"{where} has an opaque iterator"
    if not any(iv.kind is IterKind.REDUCE for iv in block.iter_vars):
        return f"{where} has no reduction iterator"
    store = block.body
    if len({id(w.buffer) for w in block.writes}) > 1 or not isinstance(store, BufferStore):
        return f"{where} does not write a single buffer with one store"
    value = store.value
    if not isinstance(value, Add):
        return f"{where}: the update is not C = C + ..."
    for acc, update in ((value.a, value.b), (value.b, value.a)):
        if (
            isinstance(acc, BufferLoad)
            and acc.buffer is store.buffer
            and same_exprs(acc.indices, store.indices)
        ):
            return store, update
    return f"{where}: the update is not C = C + ... at the stored element"


def _factors(block: Block, update: Expr) -> tuple[BufferLoad, BufferLoad] | str:
    where = f'block "{block.name}"'
    product = strip_casts(update)
    if not isinstance(product, Mul):
        return f"{where}: the accumulated value is not a product"
    a, b = strip_casts(product.a), strip_casts(product.b)
    if not (isinstance(a, BufferLoad) and isinstance(b, BufferLoad)):
        return f"{where}: the accumulated value is not a product of two loads"
    if a.buffer is b.buffer and same_exprs(a.indices, b.indices):
        return f"{where}: both factors are the same access {a.buffer.name} (a square)"
    return a, b


def _iter_indices(block: Block, what: str, indices: Sequence[Expr]) -> list[Var | None] | str:
    """Per dimension the iterator indexing it (None for a constant), or why it is no einsum."""
    iters = {id(iv.var) for iv in block.iter_vars}
    out: list[Var | None] = []
    for e in indices:
        if isinstance(e, IntImm):
            out.append(None)
        elif isinstance(e, Var) and id(e) in iters:
            if any(v is e for v in out):
                return f'block "{block.name}": {what} is indexed twice by {e.name}'
            out.append(e)
        else:
            return f'block "{block.name}": an index of {what} is not a single iterator'
    return out


def _position(regions: Sequence[BufferRegion], buffer: Buffer) -> int:
    return next((n for n, r in enumerate(regions) if r.buffer is buffer), -1)


def einsum_or_reason(block: Block) -> EinsumInfo | str:
    """The einsum classification of ``block``, or the reason it is none (package use)."""
    acc = _accumulate(block)
    if isinstance(acc, str):
        return acc
    store, update = acc
    factors = _factors(block, update)
    if isinstance(factors, str):
        return factors
    accesses: list[tuple[BufferLoad | BufferStore, list[Var | None]]] = []
    for what, access in (("output", store), ("operand", factors[0]), ("operand", factors[1])):
        got = _iter_indices(block, f"{what} {access.buffer.name}", access.indices)
        if isinstance(got, str):
            return got
        accesses.append((access, got))
    groups = _groups(block, accesses[0][1], accesses[1][1], accesses[2][1])
    if isinstance(groups, str):
        return groups
    return _assemble(block, accesses, groups)


def _assemble(
    block: Block,
    accesses: list[tuple[BufferLoad | BufferStore, list[Var | None]]],
    groups: _Groups,
) -> EinsumInfo | str:
    """Order the operands (``lhs`` holds the first non-batch index of C) and build the info."""
    (store, out_v), a, b = accesses
    batch, only_a, only_b, k = groups
    first = next((v for v in out_v if v is not None and not _among(v, batch)), None)
    swap = first is not None and _among(first, only_b)
    (lhs, lhs_v), (rhs, rhs_v) = (b, a) if swap else (a, b)
    i_set, j_set = (only_b, only_a) if swap else (only_a, only_b)
    table = {id(v): IndexRole.BATCH for v in batch}
    table.update({id(v): IndexRole.ROW for v in i_set})
    table.update({id(v): IndexRole.COL for v in j_set})
    table.update({id(v): IndexRole.REDUCE for v in k})

    def operand(access: BufferLoad | BufferStore, vs: list[Var | None], pos: int) -> EinsumOperand:
        roles = tuple(IndexRole.CONST if v is None else table[id(v)] for v in vs)
        return EinsumOperand(access.buffer, access.indices, roles, pos)

    lhs_pos, rhs_pos = (_position(block.reads, x.buffer) for x in (lhs, rhs))
    out_pos = _position(block.writes, store.buffer)
    if min(lhs_pos, rhs_pos, out_pos) < 0:
        return f'block "{block.name}": its reads/writes do not list the operands and output'
    in_c = [v for v in out_v if v is not None]
    return EinsumInfo(
        block.name,
        operand(store, out_v, out_pos),
        operand(lhs, lhs_v, lhs_pos),
        operand(rhs, rhs_v, rhs_pos),
        tuple(v for v in in_c if _among(v, batch)),
        tuple(v for v in in_c if _among(v, i_set)),
        tuple(v for v in in_c if _among(v, j_set)),
        tuple(v for v in lhs_v if v is not None and _among(v, k)),
    )


def _among(v: Var, vs: Sequence[Var | None]) -> bool:
    return any(x is v for x in vs)


_Groups = tuple[list[Var], list[Var], list[Var], list[Var]]


def _groups(
    block: Block, out_v: list[Var | None], a_v: list[Var | None], b_v: list[Var | None]
) -> _Groups | str:
    """Batch, A-only and B-only spatial iterators and the reduce iterators, or a reason."""
    where = f'block "{block.name}"'

    batch: list[Var] = []
    only_a: list[Var] = []
    only_b: list[Var] = []
    k: list[Var] = []
    for iv in block.iter_vars:
        v = iv.var
        in_c, in_a, in_b = _among(v, out_v), _among(v, a_v), _among(v, b_v)
        if iv.kind is IterKind.REDUCE:
            if in_c:
                return f"{where}: reduce iterator {v.name} indexes the output"
            if not (in_a and in_b):
                return f"{where}: reduce iterator {v.name} does not index both operands"
            k.append(v)
        elif not in_c:
            return f"{where}: spatial iterator {v.name} does not index the output"
        elif in_a and in_b:
            batch.append(v)
        elif in_a or in_b:
            (only_a if in_a else only_b).append(v)
        else:
            return f"{where}: spatial iterator {v.name} indexes the output only"
    return batch, only_a, only_b, k


def classify_einsum(block: Block | BlockInfo) -> EinsumInfo | None:
    """Classify a block as ``C[S, I, J] += A[S, I, K] * B[S, J, K]`` (module docstring).

    Parameters
    ----------
    block
        A Block, or a BlockInfo from :func:`normalize_prim_func`.

    Returns
    -------
    EinsumInfo or None
        None when the block is not an einsum of two operands; :func:`why_not_einsum` says why.

    Raises
    ------
    ScheduleError
        When ``block`` is neither a Block nor a BlockInfo.
    """
    got = einsum_or_reason(block_of(block, "classify_einsum"))
    return None if isinstance(got, str) else got


def why_not_einsum(block: Block | BlockInfo) -> str | None:
    """Why :func:`classify_einsum` rejects ``block``; None when it is an einsum.

    Parameters
    ----------
    block
        A Block or a BlockInfo.

    Returns
    -------
    str or None
        The first broken condition, naming the block and the access or iterator.
    """
    got = einsum_or_reason(block_of(block, "why_not_einsum"))
    return got if isinstance(got, str) else None
