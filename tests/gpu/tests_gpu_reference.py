"""The GPU-scheduled GEMV + bias + ReLU of the reference document (a reduction over threadIdx.y).

The script text lives with the script tests (tests/script/reference_kernels.py); this module
only makes it importable from tests/gpu.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "script"))

from reference_kernels import GPU_FUSED_MATMUL_ADD_RELU as REFERENCE_GEMV

__all__ = ["REFERENCE_GEMV"]
