"""GPU (CUDA) schedule rules, one per file."""

from .gemv import GEMV as GEMV
from .gemv import GEMVConfig as GEMVConfig
from .low_batch_gemv import LowBatchGEMV as LowBatchGEMV
from .low_batch_gemv import LowBatchGEMVConfig as LowBatchGEMVConfig
from .matmul import Matmul as Matmul
from .matmul import MatmulConfig as MatmulConfig
