"""Code generation: source text from lowered IR (C for the CPU, CUDA C++ for NVIDIA GPUs).

Emitters only emit: they take functions already lowered by a backend
(:func:`tilecraft.runtime.backend_of`) and build text. The convenience functions that lower
and emit in one call (``c_source``, ``build_c_source``, ``cuda_source``,
``build_cuda_source``) belong to the runtime's backends (:mod:`tilecraft.runtime.backend`);
the names here are aliases of those, resolved when first used (the runtime is a layer above).
"""

from __future__ import annotations

import importlib as _importlib
from typing import Any as _Any

from .base import LineBuffer as LineBuffer
from .base import NameTable as NameTable
from .base import symbol_table as symbol_table
from .c import CCodegen as CCodegen
from .c import CSource as CSource
from .c import c_symbol as c_symbol
from .c import compute_ctype as compute_ctype
from .c import emit_c as emit_c
from .c import storage_ctype as storage_ctype
from .cuda import CUDASource as CUDASource
from .cuda import emit_cuda as emit_cuda

_RUNTIME_ALIASES = frozenset({"c_source", "build_c_source", "cuda_source", "build_cuda_source"})


def __getattr__(name: str) -> _Any:
    if name in _RUNTIME_ALIASES:
        return getattr(_importlib.import_module("tilecraft.runtime.backend"), name)
    raise AttributeError(f"module 'tilecraft.codegen' has no attribute {name!r}")
