"""The numbers the vectorizing CPU rules share.

:class:`VectorConfig` is the base of the ``Config`` of ``Reduction``, ``GeneralReduction``,
``Injective`` and ``Fallback``: SIMD width and core count from the target, the work below which
a kernel stays on one thread, how many vectors of partial sums a reduction keeps, how many
vectors a parallel chunk holds. The helpers these rules use live in :mod:`tilecraft.rules.common`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from ...ir import DataType
from ...target import Target

_C = TypeVar("_C", bound="VectorConfig")


@dataclass(frozen=True)
class VectorConfig:
    """Per-target numbers of the vectorizing CPU rules.

    Attributes
    ----------
    vector_bits
        Width of one SIMD register (``Target.simd_bits``): 512 on AVX-512, 256 on AVX2.
    num_cores
        Cores a kernel may use (``Target.num_cores``); 1 disables ``parallel``.
    min_parallel_work
        Elements a kernel must touch before its outer loop runs in parallel: below this the
        OpenMP fork/join (a few microseconds) costs more than the work. Symbolic extents
        count as enough work.
    reduce_vectors
        Vectors of independent partial results a vectorized reduction keeps (more hide the
        latency of the add; the reduction length must be a multiple of their total width).
    chunk_vectors
        Vectors per iteration of a single loop cut into parallel chunks.
    """

    vector_bits: int = 256
    num_cores: int = 1
    min_parallel_work: int = 1 << 15
    reduce_vectors: int = 2
    chunk_vectors: int = 4

    @classmethod
    def for_target(cls: type[_C], target: Target) -> _C:
        """The defaults with the SIMD width and core count of ``target``."""
        return cls(vector_bits=max(128, target.simd_bits), num_cores=max(1, target.num_cores))

    def lanes(self, dtype: DataType) -> int:
        """Elements of ``dtype`` in one vector register (between 4 and 64)."""
        bits = max(8, dtype.bits * dtype.lanes)
        return max(4, min(64, self.vector_bits // bits))

    def worth_parallel(self, work: int | None, extent: int | None) -> bool:
        """Whether a loop of ``extent`` iterations over ``work`` elements should be parallel."""
        if self.num_cores < 2 or (extent is not None and extent < 2):
            return False
        return work is None or work >= self.min_parallel_work
