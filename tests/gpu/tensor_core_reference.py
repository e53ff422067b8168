"""ctypes access to the C reference semantics of the tensor-core intrinsics (tests only).

:func:`library` compiles
:data:`tilecraft.codegen.emulate.tensor_core_semantics.TENSOR_CORE_EMULATION_C` once with the
project's C compiler helper; the wrappers take and return numpy arrays laid out per lane
(``[32, n]``).
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from tilecraft.codegen.emulate.tensor_core_semantics import TENSOR_CORE_EMULATION_C
from tilecraft.runtime.compiler import compile_shared


@functools.cache
def library() -> ctypes.CDLL:
    return ctypes.CDLL(str(compile_shared(TENSOR_CORE_EMULATION_C)))


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    assert a.flags["C_CONTIGUOUS"]
    return ctypes.c_void_p(a.ctypes.data)


def ldmatrix(num: int, trans: int, base: np.ndarray, offs: np.ndarray) -> np.ndarray:
    """Lane ``l`` addresses ``base[offs[l]]``; returns ``[32, 2 * num]`` 16-bit patterns."""
    base16 = np.ascontiguousarray(base).view(np.uint16)
    offs64 = np.ascontiguousarray(offs, dtype=np.int64)
    dst = np.zeros((32, 8), np.uint16)
    library().tc_emu_ldmatrix(num, trans, _ptr(base16), _ptr(offs64), _ptr(dst))
    return dst[:, : 2 * num]


def mma(a: np.ndarray, b: np.ndarray, c: np.ndarray, *, bf16: bool = False) -> np.ndarray:
    """Per-lane ``a[32, 8]``, ``b[32, 4]`` (float16, or bfloat16 bit patterns when ``bf16``),
    ``c[32, 4]``; returns the new ``c``."""
    kind = 1 if bf16 else 0
    a16 = np.ascontiguousarray(a).view(np.uint16)
    b16 = np.ascontiguousarray(b).view(np.uint16)
    out = np.ascontiguousarray(c, dtype=np.float32).copy()
    library().tc_emu_mma_m16n8k16(kind, _ptr(a16), _ptr(b16), _ptr(out))
    return out
