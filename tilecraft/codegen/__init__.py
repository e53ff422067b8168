"""Code generation: source text from lowered IR (C for the CPU, CUDA C++ for NVIDIA GPUs)."""

from .base import LineBuffer as LineBuffer
from .base import NameTable as NameTable
from .base import symbol_table as symbol_table
from .c import CCodegen as CCodegen
from .c import CSource as CSource
from .c import build_c_source as build_c_source
from .c import c_source as c_source
from .c import c_symbol as c_symbol
from .c import compute_ctype as compute_ctype
from .c import storage_ctype as storage_ctype
from .cuda import CUDASource as CUDASource
from .cuda import build_cuda_source as build_cuda_source
from .cuda import cuda_source as cuda_source
