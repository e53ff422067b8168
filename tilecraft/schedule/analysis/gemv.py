"""GEMV detection: an einsum whose one operand is a vector, the other a matrix.

An einsum block (:func:`~tilecraft.schedule.analysis.classify_einsum`) is a GEMV when every
non-batch spatial iterator of one operand (the *vector*) has the constant extent 1, or it has
none, while the other operand (the *matrix*) has at least one non-batch spatial iterator whose
extent is not the constant 1 (a symbolic extent counts as not 1). Batch iterators are
allowed: ``C[h, j] = q[h, k] * K[h, j, k]`` is a batched GEMV. Examples: ``A[i, k] * x[k]``,
``x[0, k] * W[j, k]`` (linear at batch 1), ``x[k] * W[k, j]``. Both operands with non-unit
spatial iterators is a matmul; neither is a (batched) dot product: both are rejected.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir import Block, IntImm, Var
from .block_info import BlockInfo, block_of
from .einsum import EinsumInfo, EinsumOperand, einsum_or_reason


@dataclass(frozen=True, slots=True, eq=False)
class GEMVInfo:
    """A GEMV block (module docstring).

    Attributes
    ----------
    einsum
        Its einsum classification.
    vector, matrix
        The two operands (each also ``einsum.lhs`` or ``einsum.rhs``).
    vector_is_lhs
        Whether the vector is the einsum's left operand.
    """

    einsum: EinsumInfo
    vector: EinsumOperand
    matrix: EinsumOperand
    vector_is_lhs: bool

    @property
    def matrix_k_contiguous(self) -> bool:
        """Whether the matrix's innermost indexed dimensions are the reduce iterators."""
        return self.matrix.reduce_innermost

    @property
    def vector_k_contiguous(self) -> bool:
        """Whether the vector's innermost indexed dimensions are the reduce iterators."""
        return self.vector.reduce_innermost


def _has_non_unit(block: Block, iters: tuple[Var, ...]) -> bool:
    doms = {id(iv.var): iv.dom.extent for iv in block.iter_vars}
    for v in iters:
        ext = doms[id(v)]
        if not (isinstance(ext, IntImm) and ext.value == 1):
            return True
    return False


def _gemv(block: Block) -> GEMVInfo | str:
    e = einsum_or_reason(block)
    if isinstance(e, str):
        return e
    lhs_big, rhs_big = _has_non_unit(block, e.i_iters), _has_non_unit(block, e.j_iters)
    where = f'block "{block.name}"'
    if lhs_big and rhs_big:
        return f"{where}: both operands have non-unit spatial iterators (a matmul)"
    if not (lhs_big or rhs_big):
        return f"{where}: neither operand has a non-unit spatial iterator (a dot product)"
    if lhs_big:
        return GEMVInfo(e, e.rhs, e.lhs, False)
    return GEMVInfo(e, e.lhs, e.rhs, True)


def detect_gemv(block: Block | BlockInfo) -> GEMVInfo | None:
    """Describe ``block`` as a GEMV (module docstring), or None when it is not one.

    Parameters
    ----------
    block
        A Block or a BlockInfo.

    Returns
    -------
    GEMVInfo or None
        :func:`why_not_gemv` says why it is None.

    Raises
    ------
    ScheduleError
        When ``block`` is neither a Block nor a BlockInfo.
    """
    got = _gemv(block_of(block, "detect_gemv"))
    return None if isinstance(got, str) else got


def why_not_gemv(block: Block | BlockInfo) -> str | None:
    """Why :func:`detect_gemv` rejects ``block``; None when it is a GEMV.

    Parameters
    ----------
    block
        A Block or a BlockInfo.

    Returns
    -------
    str or None
        The first broken condition, naming the block.
    """
    got = _gemv(block_of(block, "why_not_gemv"))
    return got if isinstance(got, str) else None


def is_dot_product(block: Block | BlockInfo) -> bool:
    """Whether ``block`` is a (batched) dot product: a multiply-accumulate whose operands have
    no non-unit spatial iterator besides the ones both share (a sum of products per output)."""
    got = _gemv(block_of(block, "is_dot_product"))
    return isinstance(got, str) and got.endswith("(a dot product)")
