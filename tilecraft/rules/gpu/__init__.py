"""GPU (CUDA) schedule rules, one per file, and :func:`default_rules`.

Each rule's numbers are in its ``Config`` (``Config.for_target(target)``), derived from the
target's CUDA architecture (:func:`.config.gpu_arch`: presets sm_70 ... sm_90, ``sm_90a`` is
sm_90). ``RMSNorm``, ``Reduction`` and ``GeneralReduction`` share the row schedule
(:mod:`._rows`); ``Transpose`` moves tiles through padded shared memory; ``Fallback`` gives
every other kernel one thread per output element. ``Matmul`` (SIMT, or tensor cores on fp16/
bf16), ``GEMV`` (either weight layout, warp-shuffle reduction) and ``LowBatchGEMV`` (a
symbolic batch in buckets) take the matmul-shaped kernels.
"""

from ..base import ScheduleRule
from ._mm_tensor_core import TensorCoreTile as TensorCoreTile
from .config import ARCH_PRESETS as ARCH_PRESETS
from .config import GPUArch as GPUArch
from .config import GPUArchRule as GPUArchRule
from .config import gpu_arch as gpu_arch
from .fallback import Fallback as Fallback
from .gemv import GEMV as GEMV
from .gemv import GEMVConfig as GEMVConfig
from .general_reduction import GeneralReduction as GeneralReduction
from .low_batch_gemv import LowBatchGEMV as LowBatchGEMV
from .low_batch_gemv import LowBatchGEMVConfig as LowBatchGEMVConfig
from .matmul import Matmul as Matmul
from .matmul import MatmulConfig as MatmulConfig
from .reduction import Reduction as Reduction
from .rmsnorm import RMSNorm as RMSNorm
from .transpose import Transpose as Transpose
from .transpose import TransposeConfig as TransposeConfig


def default_rules() -> list[ScheduleRule]:
    """The GPU rules in the order ``ApplyDefaultSchedule`` should try them.

    Most specific first, ``Fallback`` (which takes every normalized function) last. The
    matmul family goes at the front, before any rule that takes reductions (a GEMV is also
    a reduction with an epilogue): ``GEMV`` (one row of output), then ``LowBatchGEMV``
    (a symbolic batch of rows), then ``Matmul``, which would also take a symbolic batch of
    rows but without reusing each weight tile across the batch. ``RMSNorm`` comes before
    ``Reduction``, which would take an RMS norm as one reduction with its epilogue, and
    ``Reduction`` (one reduction) before ``GeneralReduction`` (several). ``Transpose`` takes
    only reduction-free layout changes, so its place among the reduction rules is free.

    Returns
    -------
    list of ScheduleRule
        New rule instances with per-target configurations.
    """
    return [
        GEMV(),
        LowBatchGEMV(),
        Matmul(),
        RMSNorm(),
        Reduction(),
        GeneralReduction(),
        Transpose(),
        Fallback(),
    ]


__all__ = [
    "ARCH_PRESETS",
    "GEMV",
    "Fallback",
    "GEMVConfig",
    "GPUArch",
    "GPUArchRule",
    "GeneralReduction",
    "LowBatchGEMV",
    "LowBatchGEMVConfig",
    "Matmul",
    "MatmulConfig",
    "RMSNorm",
    "Reduction",
    "TensorCoreTile",
    "Transpose",
    "TransposeConfig",
    "default_rules",
    "gpu_arch",
]
