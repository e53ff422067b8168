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
* **Emulated** (``tc.build(..., emulate=...)``: arrays are host memory) the same call's
  arguments (:func:`cublas_args`, a pure function: operands swapped, transposes, leading
  dimensions, batch strides) are run by :func:`emulate_call`, which reads and writes the
  arrays' memory column-major as cuBLAS does, in numpy and in the accumulator's dtype; so a
  dispatched model, and the argument mapping the GPU call uses, are checked without a GPU.

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


@dataclass(frozen=True)
class CublasArgs:
    """The column-major cuBLAS call computing a row-major GEMM (pure data, no library).

    Row-major ``C = op(A) @ op(B)`` is column-major ``C^T = op(B)^T @ op(A)^T``: cuBLAS's
    first operand is our ``B`` and its second our ``A``. The call is ``cublasGemmEx`` when
    ``strided`` is False (``batch_count`` 1: one GEMM, or a batch folded into the rows),
    else ``cublasGemmStridedBatchedEx`` with element strides between the batch's matrices
    (0 for an operand all the batch shares).
    """

    trans_first: bool  # cuBLAS transa, applied to our B
    trans_second: bool  # cuBLAS transb, applied to our A
    m: int  # rows of column-major C: N
    n: int  # columns of column-major C: M (times the batch when it folds)
    k: int
    ld_first: int
    ld_second: int
    ldc: int
    stride_first: int
    stride_second: int
    stride_c: int
    batch_count: int
    strided: bool


def cublas_args(g: GemmShape) -> CublasArgs:
    """The cuBLAS arguments of the row-major GEMM ``g`` (see :class:`CublasArgs`).

    A batch folds into M (one call) when B is shared and A is not transposed: the batch's
    A matrices are then one ``(batch * M, K)`` matrix and its results one ``(batch * M, N)``.
    """
    fold = not g.b_batched and not g.trans_a and (g.a_batched or g.batch == 1)
    single = fold or g.batch == 1
    return CublasArgs(
        trans_first=g.trans_b,
        trans_second=g.trans_a,
        m=g.n,
        n=g.m * g.batch if fold else g.m,
        k=g.k,
        ld_first=max(1, g.k if g.trans_b else g.n),
        ld_second=max(1, g.m if g.trans_a else g.k),
        ldc=max(1, g.n),
        stride_first=0 if single or not g.b_batched else g.k * g.n,
        stride_second=0 if single or not g.a_batched else g.m * g.k,
        stride_c=0 if single else g.m * g.n,
        batch_count=1 if single else g.batch,
        strided=not single,
    )


def column_major_view(
    flat: np.ndarray, rows: int, cols: int, ld: int, stride: int, batch: int
) -> np.ndarray:
    """The ``batch`` column-major ``rows x cols`` matrices of leading dimension ``ld`` in
    ``flat`` (a read-only view), as cuBLAS reads them; out-of-range extents are refused."""
    if ld < max(1, rows):
        raise GraphError(f"cublas.gemm: leading dimension {ld} < {rows} rows")
    last = (batch - 1) * stride + (rows - 1) + (cols - 1) * ld if rows and cols and batch else -1
    if last >= flat.size:
        raise GraphError(f"cublas.gemm: a {rows}x{cols} (ld {ld}) matrix overruns its buffer")
    size = flat.itemsize
    return np.lib.stride_tricks.as_strided(
        flat, (batch, rows, cols), (stride * size, size, ld * size), writeable=False
    )


def emulate_call(args: CublasArgs, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """Run ``args`` as cuBLAS would on the C-contiguous arrays ``(a, b, out)``: in numpy,
    reading and writing their memory column-major, accumulating in float32 (float64 for
    float64 results)."""
    acc = np.float64 if out.dtype == np.float64 else np.float32
    batch = args.batch_count
    if args.m == 0 or args.n == 0 or batch == 0:
        return
    fa = (args.k, args.m) if args.trans_first else (args.m, args.k)
    fb = (args.n, args.k) if args.trans_second else (args.k, args.n)
    first = column_major_view(b.reshape(-1), *fa, args.ld_first, args.stride_first, batch)
    second = column_major_view(a.reshape(-1), *fb, args.ld_second, args.stride_second, batch)
    c = column_major_view(out.reshape(-1), args.m, args.n, args.ldc, args.stride_c, batch)
    op_first = np.swapaxes(first, -1, -2) if args.trans_first else first
    op_second = np.swapaxes(second, -1, -2) if args.trans_second else second
    result = np.matmul(op_first.astype(acc), op_second.astype(acc)).astype(out.dtype)
    # write through C's own layout (column-major with ldc): transposed, into out's memory
    np.lib.stride_tricks.as_strided(out.reshape(-1), c.shape, c.strides)[...] = result


def host_gemm(
    a: np.ndarray, b: np.ndarray, out: np.ndarray, trans_a: bool = False, trans_b: bool = False
) -> None:
    """``out = op(a) @ op(b)`` on the host, through the arguments a cuBLAS call would get
    (the emulated call: :func:`cublas_args` run by :func:`emulate_call`)."""
    g = gemm_shape(a, b, out, trans_a, trans_b)
    dst = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
    emulate_call(cublas_args(g), np.ascontiguousarray(a), np.ascontiguousarray(b), dst)
    if dst is not out:
        out[...] = dst


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
    c = cublas_args(g)
    ta, tb = (_OP_T if c.trans_first else _OP_N), (_OP_T if c.trans_second else _OP_N)
    st, dt = _CUDA_TYPE[src], _CUDA_TYPE[dst]
    pa, pb, pc = (ctypes.c_void_p(p) for p in ptrs)
    ab, bb = ctypes.byref(alpha), ctypes.byref(beta)
    handle = _get_handle(lib)
    if not c.strided:
        status = lib.gemm(handle, ta, tb, c.m, c.n, c.k, ab, pb, st, c.ld_first, pa, st,
                          c.ld_second, bb, pc, dt, c.ldc, compute, _GEMM_DEFAULT)  # fmt: skip
        _check(status, "cublasGemmEx")
        return
    status = lib.gemm_strided(handle, ta, tb, c.m, c.n, c.k, ab, pb, st, c.ld_first,
                              c.stride_first, pa, st, c.ld_second, c.stride_second, bb, pc, dt,
                              c.ldc, c.stride_c, c.batch_count, compute,
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
