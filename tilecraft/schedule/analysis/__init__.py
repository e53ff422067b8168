"""Block analysis shared by rule-based scheduling and the tuner.

Every rule starts with ``infos = normalize_prim_func(sch)``: the blocks under the root, in
program order, each a :class:`BlockInfo` with its iterators (:class:`IterInfo`: kind, extent,
loop handle, binding) and questions to ask (``dom_kind()``, ``is_reduction()``,
``is_injective()``, ``is_elementwise()``). Finer questions take a Block or a BlockInfo:

* :func:`block_op_pattern` / :func:`classify_prim_func`: the :class:`OpPattern` the graph's
  ``AnnotateOpPattern`` records;
* :func:`classify_einsum`: ``C[S, I, J] += A[S, I, K] * B[S, J, K]`` groups and layouts;
* :func:`detect_gemv`: which operand is the vector, which the matrix;
* :func:`detect_reduction`: the reducer, the spatial and reduce iterators, their layout;
* :func:`dominant_read`, :func:`read_accesses`: which input decides the loop layout;
* :func:`producers`, :func:`consumers`, :func:`output_blocks`: dataflow among the blocks.

Detectors return None for "not this pattern" and never raise for it; each has a ``why_not_*``
companion returning the reason (for ``Decline`` messages and the explain report). Only
misuse (an argument of the wrong type) raises, as :class:`~tilecraft.errors.ScheduleError`.
Nothing here changes a schedule; see :mod:`.block_info` for what normalization traces.
"""

from .access import ReadAccess as ReadAccess
from .access import dominant_read as dominant_read
from .access import read_accesses as read_accesses
from .block_info import BlockInfo as BlockInfo
from .block_info import IterInfo as IterInfo
from .block_info import normalize_prim_func as normalize_prim_func
from .block_info import why_not_normalized as why_not_normalized
from .dataflow import consumers as consumers
from .dataflow import output_blocks as output_blocks
from .dataflow import producers as producers
from .einsum import EinsumInfo as EinsumInfo
from .einsum import EinsumOperand as EinsumOperand
from .einsum import IndexRole as IndexRole
from .einsum import classify_einsum as classify_einsum
from .einsum import why_not_einsum as why_not_einsum
from .gemv import GEMVInfo as GEMVInfo
from .gemv import detect_gemv as detect_gemv
from .gemv import is_dot_product as is_dot_product
from .gemv import why_not_gemv as why_not_gemv
from .op_pattern import OpPattern as OpPattern
from .op_pattern import block_op_pattern as block_op_pattern
from .op_pattern import classify_prim_func as classify_prim_func
from .op_pattern import is_multiply_accumulate as is_multiply_accumulate
from .reduction import ReduceKind as ReduceKind
from .reduction import ReductionInfo as ReductionInfo
from .reduction import detect_reduction as detect_reduction
from .reduction import why_not_reduction as why_not_reduction

__all__ = [
    "BlockInfo",
    "EinsumInfo",
    "EinsumOperand",
    "GEMVInfo",
    "IndexRole",
    "IterInfo",
    "OpPattern",
    "ReadAccess",
    "ReduceKind",
    "ReductionInfo",
    "block_op_pattern",
    "classify_einsum",
    "classify_prim_func",
    "consumers",
    "detect_gemv",
    "is_dot_product",
    "detect_reduction",
    "dominant_read",
    "is_multiply_accumulate",
    "normalize_prim_func",
    "output_blocks",
    "producers",
    "read_accesses",
    "why_not_einsum",
    "why_not_gemv",
    "why_not_normalized",
    "why_not_reduction",
]
