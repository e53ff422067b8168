"""External library routines: what the executor calls for a ``call_extern`` step.

A routine is named ``"<library>.<routine>"`` and configured by its step's attributes; it is
called like a kernel, ``routine(*inputs, out)``, on C-contiguous arrays, and reads every extent
from them (so symbolic extents need nothing more). The routines:

``"blas.gemm"`` (attributes ``trans_a``, ``trans_b``, optional ``num_threads``)
    ``out[..., M, N] = A[..., M, K] @ B[..., K, N]`` in float32 (``cblas_sgemm``) or float64
    (``cblas_dgemm``). ``A`` is stored ``(..., K, M)`` when ``trans_a``, ``B`` ``(..., N, K)``
    when ``trans_b``; ``num_threads`` (> 0) is the number of BLAS threads the call runs on
    (``DispatchLibrary`` sets the target's ``-num-cores``), capped by the threads this
    process's own kernels run on (:mod:`tilecraft.runtime.threads`). An operand of rank 2 is
    shared by every batch; an operand of the output's rank has the output's batch extents.
    One GEMM call when only ``A`` is batched (and not transposed: the batch folds into M),
    the strided-batched call when both are, a loop of calls when only ``B`` is.

``"cublas.gemm"`` (attributes ``trans_a``, ``trans_b``)
    The same product on CUDA targets, in cuBLAS (float16/bfloat16 operands accumulate in
    float32): :mod:`tilecraft.runtime.executor.extern_cublas`; in an emulated build it runs
    on the host with numpy.

BLAS is OpenBLAS from the ``scipy-openblas32`` wheel (``pip install 'tilecraft[blas]'``),
loaded once through ctypes; its symbols carry the wheel's ``scipy_`` prefix. Without the wheel
:func:`load_blas` raises :class:`ExternLibraryError` naming the extra.
"""

from __future__ import annotations

import ctypes
import importlib
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import BuildError, GraphError
from ..threads import library_threads

BLAS_EXTRA = "tilecraft[blas]"
BLAS_WHEEL = "scipy_openblas32"
_PREFIX = "scipy_"
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_INT_MAX = 2**31 - 1  # the wheel's BLAS takes 32-bit sizes

ExternKernel = Callable[..., None]


class ExternLibraryError(BuildError):
    """An external library a dispatched call needs is not installed or cannot be loaded."""


@dataclass(frozen=True)
class Blas:
    """The loaded BLAS: its GEMM routines by numpy dtype, and its thread control."""

    path: Path
    gemm: Mapping[np.dtype[Any], Any]
    gemm_batch_strided: Mapping[np.dtype[Any], Any]
    dll: ctypes.CDLL

    def set_num_threads(self, n: int) -> None:
        """Run later BLAS calls on ``n`` threads."""
        getattr(self.dll, f"{_PREFIX}openblas_set_num_threads")(ctypes.c_int(n))

    def get_num_threads(self) -> int:
        """The number of threads BLAS calls run on now."""
        return int(getattr(self.dll, f"{_PREFIX}openblas_get_num_threads")())

    def use_threads(self, n: int) -> None:
        """Run later BLAS calls on ``n`` threads (no library call when it already does)."""
        if self.get_num_threads() != n:
            self.set_num_threads(n)

    def config(self) -> str:
        """The library's build and core description (``openblas_get_config``)."""
        fn = getattr(self.dll, f"{_PREFIX}openblas_get_config")
        fn.restype = ctypes.c_char_p
        return str(fn().decode())


_blas: Blas | None = None


def load_blas() -> Blas:
    """The BLAS of the ``scipy-openblas32`` wheel, loaded once.

    Raises
    ------
    ExternLibraryError
        When the wheel is not installed (naming the ``blas`` extra) or its library cannot
        be loaded.
    """
    global _blas
    if _blas is None:
        _blas = _open_blas()
    return _blas


def _open_blas() -> Blas:
    try:
        wheel = importlib.import_module(BLAS_WHEEL)
    except ImportError:
        raise ExternLibraryError(
            "library dispatch to BLAS needs the scipy-openblas32 wheel, which is not "
            f"installed: pip install '{BLAS_EXTRA}' (or pip install scipy-openblas32)"
        ) from None
    lib_dir = Path(wheel.get_lib_dir())
    suffix = {"win32": ".dll", "darwin": ".dylib"}.get(sys.platform, ".so")
    candidates = sorted(lib_dir.glob(f"*{wheel.get_library()}*{suffix}"))
    if not candidates:
        raise ExternLibraryError(f"no BLAS library ({suffix}) in {lib_dir}; reinstall {BLAS_EXTRA}")
    try:
        dll = ctypes.CDLL(str(candidates[0]))
    except OSError as e:
        raise ExternLibraryError(f"cannot load BLAS from {candidates[0]}: {e}") from None
    gemm, strided = {}, {}
    for dt, letter, c in ((np.float32, "s", ctypes.c_float), (np.float64, "d", ctypes.c_double)):
        ptr, i = ctypes.c_void_p, ctypes.c_int
        fn = getattr(dll, f"{_PREFIX}cblas_{letter}gemm")
        fn.argtypes = (i, i, i, i, i, i, c, ptr, i, ptr, i, c, ptr, i)
        fn.restype = None
        gemm[np.dtype(dt)] = fn
        fb = getattr(dll, f"{_PREFIX}cblas_{letter}gemm_batch_strided")
        fb.argtypes = (i, i, i, i, i, i, c, ptr, i, i, ptr, i, i, c, ptr, i, i, i)
        fb.restype = None
        strided[np.dtype(dt)] = fb
    return Blas(candidates[0], gemm, strided, dll)


def blas_gemm(
    a: np.ndarray, b: np.ndarray, out: np.ndarray, trans_a: bool = False, trans_b: bool = False
) -> None:
    """``out = a @ b`` through BLAS (see the module docstring for layouts and batching)."""
    blas = load_blas()
    dt = out.dtype
    fn = blas.gemm.get(dt)
    if fn is None or a.dtype != dt or b.dtype != dt or out.ndim < 2:
        raise GraphError(f"blas.gemm: needs float32 or float64 operands, got {a.dtype} {b.dtype}")
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    m, n = out.shape[-2:]
    k = a.shape[-2] if trans_a else a.shape[-1]
    batch = int(np.prod(out.shape[:-2], dtype=np.int64))
    if max(m * batch, n, k) > _INT_MAX:
        raise GraphError(f"blas.gemm: extents {out.shape} x {k} exceed 32-bit BLAS sizes")
    if m == 0 or n == 0 or batch == 0:
        return
    if k == 0:
        out.fill(0)
        return
    ta, tb = (_TRANS if trans_a else _NO_TRANS), (_TRANS if trans_b else _NO_TRANS)
    lda, ldb = (m if trans_a else k), (k if trans_b else n)
    a_batched, b_batched = a.ndim > 2 and batch > 1, b.ndim > 2 and batch > 1
    pa, pb, pc = a.ctypes.data, b.ctypes.data, out.ctypes.data
    if not b_batched and not trans_a and (a_batched or batch == 1):  # the batch folds into M
        fn(_ROW_MAJOR, ta, tb, m * batch, n, k, 1.0, pa, lda, pb, ldb, 0.0, pc, n)
    elif a_batched and b_batched:
        blas.gemm_batch_strided[dt](
            _ROW_MAJOR, ta, tb, m, n, k, 1.0, pa, lda, m * k, pb, ldb, k * n,
            0.0, pc, n, m * n, batch,
        )  # fmt: skip
    else:
        size = dt.itemsize
        for i in range(batch):
            fn(
                _ROW_MAJOR, ta, tb, m, n, k, 1.0, pa + (i * m * k * size if a_batched else 0),
                lda, pb + (i * k * n * size if b_batched else 0), ldb, 0.0, pc + i * m * n * size,
                n,
            )  # fmt: skip


def _gemm_kernel(attrs: Mapping[str, Any], emulated: bool) -> ExternKernel:
    trans_a, trans_b = bool(attrs.get("trans_a", False)), bool(attrs.get("trans_b", False))
    threads = attrs.get("num_threads", 0)
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 0:
        raise GraphError(f"blas.gemm: num_threads must be an int >= 0, got {threads!r}")
    blas = load_blas()  # a missing library is reported now, not at the first call

    def run(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        blas.use_threads(library_threads(threads))
        blas_gemm(a, b, out, trans_a, trans_b)

    return run


def _cublas_kernel(attrs: Mapping[str, Any], emulated: bool) -> ExternKernel:
    from .extern_cublas import cublas_kernel  # it imports this module's error class

    return cublas_kernel(attrs, emulated)


ROUTINES: dict[str, Callable[[Mapping[str, Any], bool], ExternKernel]] = {
    "blas.gemm": _gemm_kernel,
    "cublas.gemm": _cublas_kernel,
}
"""Routine name -> a factory of its kernel from the step's attributes and whether the build
is emulated (arrays in host memory)."""

ROUTINE_ARITY = {"blas.gemm": 2, "cublas.gemm": 2}
"""Routine name -> how many input tensors it takes."""


def extern_kernel(name: str, attrs: Mapping[str, Any], *, emulated: bool = False) -> ExternKernel:
    """The callable ``kernel(*inputs, out)`` of routine ``name`` configured by ``attrs``
    (``emulated``: a GPU routine runs on the host arrays of an emulated build).

    Raises
    ------
    GraphError
        For a routine this tilecraft does not know.
    ExternLibraryError
        When the routine's library is not installed.
    """
    factory = ROUTINES.get(name)
    if factory is None:
        raise GraphError(f"unknown external routine {name!r}; known: {sorted(ROUTINES)}")
    return factory(attrs, emulated)
