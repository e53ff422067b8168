"""The ``"cublas.gemm"`` routine: GEMMs of CUDA targets in cuBLAS, through ctypes.

``out[..., M, N] = A[..., M, K] @ B[..., K, N]`` with the attributes, layouts and batching of
``"blas.gemm"`` (:mod:`tilecraft.runtime.executor.extern`); operands float32, float64, or
float16 / bfloat16 accumulated in float32 (the result's dtype is the accumulator's, or the
operands' for float16 results: cuBLAS computes in float32 either way).

* **On a GPU** the call is ``cublasGemmEx`` (one call when the batch folds into M) or
  ``cublasGemmStridedBatchedEx`` (a shared operand has stride 0) on device pointers; numpy
  arguments (what the graph executor passes) are copied to the device and the result back.
  The row-major product is the column-major ``C^T = B^T A^T``, so the operands are passed
  swapped. One cuBLAS handle is created on the first call and kept for the process (calls
  are serialized on it). The library is the one of NVIDIA's wheel (``nvidia-cublas`` for
  CUDA 13, ``nvidia-cublas-cu12``; ``pip install 'tilecraft[cublas]'``) or the system's.
* **Emulated** (``tc.build(..., emulate=...)``: arrays are host memory) the same product is
  computed with numpy in the accumulator's dtype, so a dispatched model is checked against
  numpy without a GPU.

A missing library raises :class:`ExternLibraryError` naming the extra; a missing GPU or
driver is the driver's :class:`~tilecraft.runtime.cuda_driver.CUDAError`; a failed cuBLAS
call raises :class:`CublasError` with its status name.
"""

from __future__ import annotations

import ctypes
import importlib
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import BuildError, GraphError
from .extern import ExternLibraryError

CUBLAS_EXTRA = "tilecraft[cublas]"
_SONAMES = ("libcublas.so.13", "libcublas.so.12", "libcublas.so")
_OP_N, _OP_T = 0, 1
_CUDA_TYPE = {"float16": 2, "float32": 0, "float64": 1, "bfloat16": 14}  # cudaDataType_t
_COMPUTE_32F, _COMPUTE_64F = 68, 70  # cublasComputeType_t
_GEMM_DEFAULT = -1
_INT_MAX = 2**31 - 1
_STATUS = {
    1: "NOT_INITIALIZED (no GPU, or the driver is too old)", 3: "ALLOC_FAILED",
    7: "INVALID_VALUE", 8: "ARCH_MISMATCH", 11: "MAPPING_ERROR", 13: "EXECUTION_FAILED",
    14: "INTERNAL_ERROR", 15: "NOT_SUPPORTED", 16: "LICENSE_ERROR",
}  # fmt: skip

ExternKernel = Callable[..., None]


class CublasError(BuildError):
    """A cuBLAS call failed (the message names the call and its status)."""


@dataclass(frozen=True)
class Cublas:
    """The loaded cuBLAS library and its GEMM entry points."""

    path: str
    dll: ctypes.CDLL
    gemm: Any
    gemm_strided: Any


_cublas: Cublas | None = None
_handle: ctypes.c_void_p | None = None
_lock = threading.Lock()


def _wheel_candidates() -> list[Path]:
    """libcublas files of NVIDIA's wheels (``nvidia/cu13/lib``, ``nvidia/cublas/lib``)."""
    try:
        nvidia = importlib.import_module("nvidia")
    except ImportError:
        return []
    found: list[Path] = []
    for root in getattr(nvidia, "__path__", []):
        for sub in ("cu13/lib", "cublas/lib", "cu12/lib"):
            found += sorted(Path(root, sub).glob("libcublas.so*"), reverse=True)
    return found


def load_cublas() -> Cublas:
    """cuBLAS, loaded once: NVIDIA's wheel first, then the system's.

    Raises
    ------
    ExternLibraryError
        When no cuBLAS library can be loaded (the message names the extra to install).
    """
    global _cublas
    with _lock:
        if _cublas is None:
            _cublas = _open_cublas()
        return _cublas


def _open_cublas() -> Cublas:
    tried: list[str] = []
    names = [str(p) for p in _wheel_candidates()] + list(_SONAMES)
    for name in names if sys.platform.startswith("linux") else []:
        try:
            dll = ctypes.CDLL(name)
        except OSError as e:
            tried.append(f"{name}: {e}")
            continue
        gemm, strided = dll.cublasGemmEx, dll.cublasGemmStridedBatchedEx
        p, i, ll = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
        gemm.argtypes = (p, i, i, i, i, i, p, p, i, i, p, i, i, p, p, i, i, i, i)
        strided.argtypes = (p, i, i, i, i, i, p, p, i, i, ll, p, i, i, ll, p, p, i, i, ll, i, i, i)
        gemm.restype = strided.restype = ctypes.c_int
        return Cublas(name, dll, gemm, strided)
    raise ExternLibraryError(
        "library dispatch to cuBLAS needs the cuBLAS library, which is not installed: pip "
        f"install '{CUBLAS_EXTRA}' (NVIDIA's nvidia-cublas wheel; nvidia-cublas-cu12 for "
        f"CUDA 12). Tried: {'; '.join(tried) or 'nothing (Linux only)'}"
    )


def _check(status: int, what: str) -> None:
    if status != 0:
        name = _STATUS.get(status, f"status {status}")
        raise CublasError(f"{what} failed: CUBLAS_STATUS_{name}")


def _get_handle(lib: Cublas) -> ctypes.c_void_p:
    """The process's cuBLAS handle (created on the first call, on the driver's context)."""
    global _handle
    if _handle is None:
        handle = ctypes.c_void_p()
        _check(lib.dll.cublasCreate_v2(ctypes.byref(handle)), "cublasCreate")
        _handle = handle
    return _handle


@dataclass(frozen=True)
class GemmShape:
    """Extents and layout of one GEMM call, read from its arrays."""

    batch: int
    m: int
    n: int
    k: int
    trans_a: bool
    trans_b: bool
    a_batched: bool
    b_batched: bool


def gemm_shape(a: np.ndarray, b: np.ndarray, out: Any, trans_a: bool, trans_b: bool) -> GemmShape:
    """The extents of ``out = op(a) @ op(b)`` (shapes only: any array kinds)."""
    m, n = out.shape[-2:]
    k = a.shape[-2] if trans_a else a.shape[-1]
    batch = int(np.prod(out.shape[:-2], dtype=np.int64))
    if max(m * batch, n, k) > _INT_MAX:
        raise GraphError(f"cublas.gemm: extents {tuple(out.shape)} x {k} exceed 32-bit sizes")
    return GemmShape(batch, m, n, k, trans_a, trans_b, len(a.shape) > 2, len(b.shape) > 2)


def host_gemm(
    a: np.ndarray, b: np.ndarray, out: np.ndarray, trans_a: bool = False, trans_b: bool = False
) -> None:
    """``out = op(a) @ op(b)`` on the host with cuBLAS's semantics (the emulated call)."""
    acc = np.float64 if out.dtype == np.float64 else np.float32
    at = np.swapaxes(a, -1, -2) if trans_a else a
    bt = np.swapaxes(b, -1, -2) if trans_b else b
    gemm_shape(a, b, out, trans_a, trans_b)
    out[...] = np.matmul(at.astype(acc), bt.astype(acc)).astype(out.dtype)


def device_gemm(lib: Cublas, ptrs: tuple[int, int, int], dtypes: tuple[str, str],
                g: GemmShape) -> None:  # fmt: skip
    """One cuBLAS GEMM on device pointers ``(a, b, out)`` of dtypes (operands, result)."""
    if g.m == 0 or g.n == 0 or g.batch == 0:
        return
    src, dst = dtypes
    wide = dst == "float64"
    alpha = (ctypes.c_double if wide else ctypes.c_float)(1.0)
    beta = (ctypes.c_double if wide else ctypes.c_float)(0.0)
    compute = _COMPUTE_64F if wide else _COMPUTE_32F
    ta, tb = (_OP_T if g.trans_a else _OP_N), (_OP_T if g.trans_b else _OP_N)
    lda, ldb = (g.m if g.trans_a else g.k), (g.k if g.trans_b else g.n)
    st, dt = _CUDA_TYPE[src], _CUDA_TYPE[dst]
    pa, pb, pc = (ctypes.c_void_p(p) for p in ptrs)
    ab, bb = ctypes.byref(alpha), ctypes.byref(beta)
    handle = _get_handle(lib)
    fold = not g.b_batched and not g.trans_a and (g.a_batched or g.batch == 1)
    if fold or g.batch == 1:  # C^T (N x M*batch) = B^T A^T, column-major
        rows = g.m * g.batch if fold else g.m
        status = lib.gemm(handle, tb, ta, g.n, rows, g.k, ab, pb, st, ldb, pa, st, lda, bb,
                          pc, dt, g.n, compute, _GEMM_DEFAULT)  # fmt: skip
        _check(status, "cublasGemmEx")
        return
    sa = g.m * g.k if g.a_batched else 0
    sb = g.k * g.n if g.b_batched else 0
    status = lib.gemm_strided(handle, tb, ta, g.n, g.m, g.k, ab, pb, st, ldb, sb, pa, st, lda,
                              sa, bb, pc, dt, g.n, g.m * g.n, g.batch, compute,
                              _GEMM_DEFAULT)  # fmt: skip
    _check(status, "cublasGemmStridedBatchedEx")


def _device_run(lib: Cublas, trans_a: bool, trans_b: bool) -> ExternKernel:
    def run(a: Any, b: Any, out: Any) -> None:
        from ..cuda import device_view  # the CUDA runtime, only on a real GPU call
        from ..cuda_driver import get_driver

        driver = get_driver()  # CUDAError without a GPU or driver
        views = [device_view(x, f"cublas.gemm: argument {i}") for i, x in enumerate((a, b, out))]
        g = gemm_shape(a, b, out, trans_a, trans_b)
        dtypes = (str(views[0].dtype), str(views[2].dtype))
        with _lock:
            device_gemm(lib, (views[0].ptr, views[1].ptr, views[2].ptr), dtypes, g)
        driver.synchronize()
        host = views[2].host
        if host is not None:
            result = np.empty(views[2].shape, views[2].dtype)
            driver.copy_dtoh(result.ctypes.data, views[2].ptr, result.nbytes)
            host[...] = result

    return run


def cublas_kernel(attrs: Mapping[str, Any], emulated: bool) -> ExternKernel:
    """The ``"cublas.gemm"`` kernel: numpy on the host when ``emulated``, else cuBLAS.

    Raises
    ------
    ExternLibraryError
        When not ``emulated`` and cuBLAS cannot be loaded.
    """
    trans_a, trans_b = bool(attrs.get("trans_a", False)), bool(attrs.get("trans_b", False))
    if emulated:

        def run(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
            host_gemm(a, b, out, trans_a, trans_b)

        return run
    return _device_run(load_cublas(), trans_a, trans_b)
