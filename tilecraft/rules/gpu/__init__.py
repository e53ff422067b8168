"""GPU (CUDA) schedule rules, one per file."""

from .gemv import GEMV as GEMV
from .gemv import GEMVConfig as GEMVConfig
from .matmul import Matmul as Matmul
from .matmul import MatmulConfig as MatmulConfig
