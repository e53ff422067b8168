"""Find the stages of a fused attention function (package-private; see ``attention.py``).

The shape matched is :func:`tilecraft.topi.attention`'s, by dataflow (names are not read):

    scores[S, i, j]   += Q[S, i, d] * K[S, j, d]          einsum, K read with d innermost
    masked[S, i, j]    = f(scores[S, i, j])               spatial (scale, causal Select)
    mx[S, i]           = max_j masked[S, i, j]            max reduction
    p[S, i, j]         = exp(masked - mx)                 spatial, one to three stages
    weighted[S, i, e] += p[S, i, j] * V[S, j, e]          einsum
    total[S, i]        = sum_j p[S, i, j]                 sum reduction
    out[S, i, e]       = g(weighted, total)               spatial, then any spatial blocks

Q, K and V may be parameters or spatial copies of them (the graph's layout transposes). With
a causal mask ``p`` takes three stages: the exponentials' arguments, the exponentials and the
weights (exactly 0 where the mask hides the key).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ...ir import Buffer
from ...schedule import Schedule
from ...schedule.analysis import (
    BlockInfo,
    EinsumInfo,
    ReduceKind,
    classify_einsum,
    consumers,
    detect_reduction,
    normalize_prim_func,
    why_not_normalized,
)


@dataclass(frozen=True)
class AttentionMatch:
    """The blocks of a fused attention function, by role (block names).

    Attributes
    ----------
    scores, masked, row_max, exp, weighted, row_sum, norm
        The stages of the module docstring (``exp``: the last stage of ``p``, which the sums
        read).
    between
        The stages of ``p`` before ``exp``, in order (causal: arguments, exponentials).
    key
        The buffer ``scores`` reads ``K`` from (a parameter or a copy's output).
    key_index
        Its position among ``scores``'s reads (the index ``cache_read`` takes).
    rank
        Rank of the scores (batch axes + 2).
    """

    scores: str
    masked: str
    row_max: str
    exp: str
    weighted: str
    row_sum: str
    norm: str
    between: tuple[str, ...]
    key: Buffer
    key_index: int
    rank: int


def match_attention(sch: Schedule) -> AttentionMatch | str:
    """The attention stages of ``sch``'s function, or why it is not attention."""
    infos = normalize_prim_func(sch)
    if infos is None:
        return f"the function is not normalized: {why_not_normalized(sch)}"
    einsums = [(b, e) for b in infos if (e := classify_einsum(b)) is not None]
    others = [b for b in infos if classify_einsum(b) is None and _reduces(b)]
    if len(einsums) != 2 or len(others) != 2:
        return (
            f"needs two einsum and two row reductions (scores, max, sum, weighted sum), found "
            f"{len(einsums)} einsum and {len(others)} other reduction blocks"
        )
    first = _chain(infos, einsums[0], einsums[1])  # in the function's order
    if isinstance(first, AttentionMatch):
        return first
    second = _chain(infos, einsums[1], einsums[0])
    return second if isinstance(second, AttentionMatch) else first


def _reduces(b: BlockInfo) -> bool:
    return any(it.is_reduce for it in b.iters)


def _chain(
    infos: Sequence[BlockInfo],
    scores: tuple[BlockInfo, EinsumInfo],
    weighted: tuple[BlockInfo, EinsumInfo],
) -> AttentionMatch | str:
    """The match with ``scores`` and ``weighted`` in these roles, or why it does not fit."""
    sb, se = scores
    wb, we = weighted
    out = se.output.indices
    if len(se.j_iters) != 1 or len(se.k_iters) != 1 or len(out) < 2:
        return f'block "{sb.name}" is not a single-index Q @ K^T'
    if out[-1] is not se.j_iters[0] or not any(out[-2] is i for i in se.i_iters):
        return f'block "{sb.name}" does not write (..., queries, keys)'
    if se.rhs.indices[-1] is not se.k_iters[0]:
        return f'block "{sb.name}" does not read K with the head dimension innermost'
    masked = _single(consumers(infos, sb), lambda b: not _reduces(b))
    if masked is None:
        return f'block "{sb.name}" is not read by one elementwise stage alone'
    after = consumers(infos, masked)
    row_max = _single(after, lambda b: _reduction_kind(b) is ReduceKind.MAX)
    exp = _single(after, lambda b: not _reduces(b))
    if row_max is None or exp is None or len(after) != 2:
        return f'block "{masked.name}" is not read by one row max and one exponential'
    between: list[BlockInfo] = []  # the exponentials' arguments, the causal weights
    while wb not in consumers(infos, exp):
        nxt = _single(consumers(infos, exp), lambda b: not _reduces(b))
        if nxt is None or len(between) == 2:
            return f'block "{exp.name}" is not read by the weighted sum or one elementwise stage'
        between.append(exp)
        exp = nxt
    users = consumers(infos, exp)
    row_sum = _single(users, lambda b: b is not wb and _reduction_kind(b) is ReduceKind.SUM)
    if row_sum is None or len(users) != 2 or wb not in users:
        return f'block "{exp.name}" is not read by one row sum and the weighted sum'
    if we.lhs.buffer is not exp.writes[0].buffer or len(we.k_iters) != 1:
        return f'block "{wb.name}" does not weigh the rows of "{exp.name}"'
    norm = _single(consumers(infos, wb), lambda b: not _reduces(b))
    if norm is None or row_sum not in _producers_of(infos, norm):
        return f'block "{wb.name}" is not normalized by the row sum in one elementwise stage'
    key_index = next((i for i, r in enumerate(sb.reads) if r.buffer is se.rhs.buffer), None)
    if key_index is None:
        return f'block "{sb.name}" does not list K among its reads'
    return AttentionMatch(
        scores=sb.name,
        masked=masked.name,
        row_max=row_max.name,
        exp=exp.name,
        weighted=wb.name,
        row_sum=row_sum.name,
        norm=norm.name,
        between=tuple(b.name for b in between),
        key=se.rhs.buffer,
        key_index=key_index,
        rank=len(se.output.indices),
    )


def _single(blocks: Sequence[BlockInfo], want: Callable[[BlockInfo], bool]) -> BlockInfo | None:
    hits = [b for b in blocks if want(b)]
    return hits[0] if len(hits) == 1 else None


def _reduction_kind(b: BlockInfo) -> ReduceKind | None:
    info = detect_reduction(b)
    return info.reducer if info is not None and info.reduce_innermost else None


def _producers_of(infos: Sequence[BlockInfo], b: BlockInfo) -> list[BlockInfo]:
    read = {id(r.buffer) for r in b.reads}
    return [o for o in infos if o.writes and id(o.writes[0].buffer) in read]
