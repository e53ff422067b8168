"""CPU schedule rules, one per file, and :func:`default_rules`.

``Attention`` (softmax attention fused per block of query rows), ``Conv`` (direct NCHW
conv2d, dense and depthwise), ``Matmul`` (GEMM-like einsums, other convolutions as an
implicit GEMM) and ``GEMV`` (matrix-vector) tile
for registers and caches; ``Reduction``, ``GeneralReduction``, ``Injective`` and ``Fallback``
vectorize for the target's SIMD width and run outer loops on its cores. Their numbers are in
each rule's ``Config`` (``Config.for_target(target)``).
"""

from ..base import ScheduleRule
from ._matmul_parts import MatmulConfig as MatmulConfig
from ._vector_config import VectorConfig as VectorConfig
from .attention import Attention as Attention
from .attention import AttentionConfig as AttentionConfig
from .conv import Conv as Conv
from .conv import ConvConfig as ConvConfig
from .fallback import Fallback as Fallback
from .gemv import GEMV as GEMV
from .gemv import GEMVConfig as GEMVConfig
from .general_reduction import GeneralReduction as GeneralReduction
from .injective import Injective as Injective
from .matmul import Matmul as Matmul
from .reduction import Reduction as Reduction


def default_rules() -> list[ScheduleRule]:
    """The CPU rules in the order ``ApplyDefaultSchedule`` should try them.

    Most specific first, ``Fallback`` (which takes everything) last: Attention, Conv, Matmul,
    GEMV, Reduction, GeneralReduction, Injective, Fallback.

    Returns
    -------
    list of ScheduleRule
        New rule instances with per-target configurations.
    """
    return [
        Attention(),
        Conv(),
        Matmul(),
        GEMV(),
        Reduction(),
        GeneralReduction(),
        Injective(),
        Fallback(),
    ]


__all__ = [
    "Attention",
    "AttentionConfig",
    "Conv",
    "ConvConfig",
    "GEMV",
    "Fallback",
    "GEMVConfig",
    "GeneralReduction",
    "Injective",
    "Matmul",
    "MatmulConfig",
    "Reduction",
    "VectorConfig",
    "default_rules",
]
