"""GPU (CUDA) schedule rules, one per file."""

from .matmul import Matmul as Matmul
from .matmul import MatmulConfig as MatmulConfig
