"""Converters of ATen's FFT operators: ``_fft_r2c``, ``_fft_c2r``, ``_fft_c2c``.

``torch.fft.rfft/irfft/fft/ifft/rfftn/irfftn/fftn/ifftn/rfft2/irfft2/hfft...`` reach the
exported program as these three operators. Each is imported as a discrete Fourier transform
by matrix multiplication, one transformed axis at a time: the axis is moved last (next to
the complex axis, see :mod:`._complex`), flattened with it, and multiplied by a real matrix
of cosines and sines built at import time in float64, with the normalization folded in.

Complexity: an axis of ``N`` inputs and ``M`` outputs costs ``O(N * M)`` multiply-adds per
transformed vector (``4 N M`` for complex to complex) instead of an FFT's ``O(N log N)``,
and a constant of ``2N x 2M`` elements; that is cheap for the sizes models use (a few
hundred points per axis) and runs as a matmul, which the rules and the library dispatch
schedule well. Transformed axes must have static sizes; the other axes may be symbolic.

``normalization`` follows ATen: 0 none, 1 ``1/sqrt(n)``, 2 ``1/n``, where ``n`` is the
number of points of the signal (the product over the transformed axes; for ``c2r`` the
output's sizes). ``c2r`` reads the one-sided spectrum the way pocketfft does: the imaginary
parts of the zero and Nyquist bins are ignored.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from ...graph import TensorVar
from ...ir import Expr, as_expr
from ._complex import (
    ComplexValue,
    complex_arg,
    handles_complex,
    part_dtype,
    static_extent,
)
from ._context import Context, UnsupportedNodeError
from ._registry import handles


def _norm(mode: int, n: int) -> float:
    if mode == 0:
        return 1.0
    if mode == 1:
        return 1.0 / float(np.sqrt(n))
    if mode == 2:
        return 1.0 / n
    raise UnsupportedNodeError(f"FFT normalization mode {mode} (expected 0, 1 or 2)")


def _angles(n_in: int, n_out: int, length: int) -> np.ndarray:
    """``2 pi k n / length`` as ``[n, k]``, reduced mod ``length`` first for accuracy."""
    kn = np.outer(np.arange(n_in, dtype=np.int64), np.arange(n_out, dtype=np.int64)) % length
    return 2.0 * np.pi * kn / length


def r2c_matrix(n: int, m: int, factor: float) -> np.ndarray:
    """``(n, 2m)``: real samples -> interleaved (re, im) of the first ``m`` forward bins."""
    t = _angles(n, m, n)
    w = np.empty((n, m, 2))
    w[:, :, 0], w[:, :, 1] = np.cos(t), -np.sin(t)
    return (w * factor).reshape(n, 2 * m)


def c2c_matrix(n: int, forward: bool, factor: float) -> np.ndarray:
    """``(2n, 2n)``: interleaved (re, im) -> interleaved DFT (``e^{-i}`` forward)."""
    t = _angles(n, n, n)
    s = -1.0 if forward else 1.0
    c, sn = np.cos(t), np.sin(t)
    w = np.empty((n, 2, n, 2))
    w[:, 0, :, 0], w[:, 1, :, 0] = c, -s * sn
    w[:, 0, :, 1], w[:, 1, :, 1] = s * sn, c
    return (w * factor).reshape(2 * n, 2 * n)


def c2r_matrix(k: int, n: int, factor: float) -> np.ndarray:
    """``(2k, n)``: ``k`` interleaved one-sided bins -> ``n`` real samples (inverse)."""
    bins = min(k, n // 2 + 1)
    t = _angles(k, n, n)
    weight = np.full(k, 2.0)
    weight[bins:] = 0.0  # bins past the Nyquist one are not part of the spectrum
    weight[0] = 1.0
    if n % 2 == 0 and n // 2 < k:
        weight[n // 2] = 1.0
    w = np.empty((k, 2, n))
    w[:, 0, :] = weight[:, None] * np.cos(t)
    w[:, 1, :] = -weight[:, None] * np.sin(t)
    return (w * factor).reshape(2 * k, n)


# per conversion: the DFT constants bound so far, so equal transforms share one
_BOUND: weakref.WeakKeyDictionary[Context, dict[tuple[Any, ...], TensorVar]] = (
    weakref.WeakKeyDictionary()
)


def _dft_const(ctx: Context, w: np.ndarray, dtype: str) -> TensorVar:
    data = w.astype(dtype)
    key = (dtype, data.shape, data.tobytes())
    bound = _BOUND.setdefault(ctx, {})
    if key not in bound:
        bound[key] = ctx.const(data, "dft")
    return bound[key]


def _matmul_last(ctx: Context, x: TensorVar, w: np.ndarray) -> TensorVar:
    """``x (..., K) @ w (K, M)`` with ``w`` a constant of ``x``'s dtype."""
    wt = _dft_const(ctx, w, str(x.type.dtype))
    if x.type.ndim >= 2:
        return ctx.emit("matmul", [x, wt])
    row = ctx.reshape(x, (as_expr(1), x.type.shape[0]))
    out = ctx.emit("matmul", [row, wt])
    return ctx.reshape(out, (as_expr(w.shape[1]),))


def _to_last(ctx: Context, x: TensorVar, axis: int, keep: int) -> tuple[TensorVar, list[int]]:
    """Move ``axis`` to just before the last ``keep`` axes; also the inverse permutation."""
    n = x.type.ndim
    lead = [d for d in range(n - keep) if d != axis]
    perm = [*lead, axis, *range(n - keep, n)]
    inv = [perm.index(d) for d in range(n)]
    if perm == list(range(n)):
        return x, inv
    return ctx.emit("permute_dims", [x], {"axes": tuple(perm)}), inv


def _back(ctx: Context, y: TensorVar, inv: list[int]) -> TensorVar:
    if inv == list(range(len(inv))):
        return y
    return ctx.emit("permute_dims", [y], {"axes": tuple(inv)})


def _c2c_axis(
    ctx: Context, z: ComplexValue, axis: int, forward: bool, factor: float
) -> ComplexValue:
    """The complex DFT of ``z`` along ``axis``."""
    n = static_extent(z.shape[axis], "FFT axis")
    x, inv = _to_last(ctx, z.data, axis, 1)
    lead = tuple(x.type.shape[:-2])
    flat = ctx.reshape(x, (*lead, as_expr(2 * n)))
    y = _matmul_last(ctx, flat, c2c_matrix(n, forward, factor))
    return ComplexValue(_back(ctx, ctx.reshape(y, (*lead, as_expr(n), as_expr(2))), inv))


def _r2c_axis(ctx: Context, r: TensorVar, axis: int, m: int, factor: float) -> ComplexValue:
    """The first ``m`` forward DFT bins of real ``r`` along ``axis``."""
    n = static_extent(r.type.shape[axis], "FFT axis")
    x, _ = _to_last(ctx, r, axis, 0)
    lead = tuple(x.type.shape[:-1])
    y = _matmul_last(ctx, x, r2c_matrix(n, m, factor))
    y = ctx.reshape(y, (*lead, as_expr(m), as_expr(2)))
    rank = r.type.ndim  # the new axis sits at rank - 1; put it back at ``axis``
    perm = [*range(axis), rank - 1, *range(axis, rank - 1), rank]
    return ComplexValue(_back(ctx, y, perm))


def _c2r_axis(ctx: Context, z: ComplexValue, axis: int, n: int, factor: float) -> TensorVar:
    """``n`` real samples from the one-sided spectrum ``z`` along ``axis``."""
    k = static_extent(z.shape[axis], "FFT axis")
    x, _ = _to_last(ctx, z.data, axis, 1)
    lead = tuple(x.type.shape[:-2])
    flat = ctx.reshape(x, (*lead, as_expr(2 * k)))
    y = _matmul_last(ctx, flat, c2r_matrix(k, n, factor))
    rank = z.ndim  # the new axis sits at rank - 1; put it back at ``axis``
    perm = [*range(axis), rank - 1, *range(axis, rank - 1)]
    return _back(ctx, y, perm)


def _axes(ctx: Context, node: Any, rank: int) -> list[int]:
    return [int(d) % rank for d in ctx.arg(node, 1, "dim")]


def _sizes(shape: tuple[Expr, ...], axes: list[int]) -> list[int]:
    return [static_extent(shape[a], "FFT axis") for a in axes]


@handles_complex("aten::_fft_r2c")
def _fft_r2c(ctx: Context, node: Any) -> ComplexValue:
    x = ctx.tensor(node, 0)
    x = ctx.cast(x, part_dtype(ctx.meta(node).dtype))
    axes = _axes(ctx, node, x.type.ndim)
    mode, onesided = int(ctx.arg(node, 2, "normalization")), bool(ctx.arg(node, 3, "onesided"))
    sizes = _sizes(x.type.shape, axes)
    if not axes:
        raise UnsupportedNodeError("an FFT over no axes")
    factor = _norm(mode, int(np.prod(sizes)))
    last, n = axes[-1], sizes[-1]
    z = _r2c_axis(ctx, x, last, n // 2 + 1 if onesided else n, factor)
    for a in axes[:-1]:
        z = _c2c_axis(ctx, z, a, True, 1.0)
    return z


@handles_complex("aten::_fft_c2c")
def _fft_c2c(ctx: Context, node: Any) -> ComplexValue:
    z = complex_arg(ctx, node, 0)
    axes = _axes(ctx, node, z.ndim)
    mode, forward = int(ctx.arg(node, 2, "normalization")), bool(ctx.arg(node, 3, "forward"))
    if not axes:
        return z
    factor = _norm(mode, int(np.prod(_sizes(z.shape, axes))))
    for i, a in enumerate(axes):
        z = _c2c_axis(ctx, z, a, forward, factor if i == 0 else 1.0)
    return z


@handles_complex("aten::_fft_c2r")
def _fft_c2r(ctx: Context, node: Any) -> TensorVar:
    z = complex_arg(ctx, node, 0)
    axes = _axes(ctx, node, z.ndim)
    if not axes:
        raise UnsupportedNodeError("an FFT over no axes")
    mode, n = int(ctx.arg(node, 2, "normalization")), int(ctx.arg(node, 3, "last_dim_size"))
    signal = int(np.prod(_sizes(z.shape, axes[:-1]))) * n
    for a in axes[:-1]:
        z = _c2c_axis(ctx, z, a, False, 1.0)
    return ctx.cast(_c2r_axis(ctx, z, axes[-1], n, _norm(mode, signal)), ctx.out_dtype(node))


@handles("aten::unfold")
def _unfold(ctx: Context, node: Any) -> TensorVar:
    """Sliding windows (``torch.stft`` frames its signal so): a gather of constant indices."""
    x = ctx.tensor(node, 0)
    axis = int(ctx.arg(node, 1, "dimension")) % max(x.type.ndim, 1)
    size, step = int(ctx.arg(node, 2, "size")), int(ctx.arg(node, 3, "step"))
    if x.type.ndim == 0:
        raise UnsupportedNodeError("unfold of a 0-d tensor")
    n = static_extent(x.type.shape[axis], "unfolded axis")
    count = (n - size) // step + 1
    index = np.arange(count)[:, None] * step + np.arange(size)[None, :]
    windows = ctx.emit("take", [x, ctx.const(index.astype("int64"), "windows")], {"axis": axis})
    rank = x.type.ndim + 1  # (..., count, size, ...): the window axis goes last
    perm = [d for d in range(rank) if d != axis + 1] + [axis + 1]
    return _back(ctx, windows, perm)


@handles("aten::fft_fftfreq", "aten::fft_rfftfreq")
def _fftfreq(ctx: Context, node: Any) -> TensorVar:
    """The sample frequencies of an FFT: a constant."""
    n, d = ctx.arg(node, 0, "n"), ctx.arg(node, 1, "d", 1.0)
    if not isinstance(n, int) or not isinstance(d, (int, float)):
        raise UnsupportedNodeError("FFT frequencies of a symbolic length")
    freqs = np.fft.rfftfreq if node.target.name() == "aten::fft_rfftfreq" else np.fft.fftfreq
    return ctx.const(freqs(n, d).astype(ctx.out_dtype(node)), "freqs")
