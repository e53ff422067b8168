"""CPU schedule rules, one per file; each has a per-target ``Config`` dataclass.

``Matmul`` (GEMM-like einsums, conv2d as an implicit GEMM) and ``GEMV`` (matrix-vector);
the reduction, injective and fallback rules and ``default_rules()`` join them here.
"""

from .gemv import GEMV as GEMV
from .gemv import GEMVConfig as GEMVConfig
from .matmul import Matmul as Matmul
from .matmul import MatmulConfig as MatmulConfig
