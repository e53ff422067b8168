"""N-d pooling over the trailing axes of a channels-first tensor, with PyTorch's options.

Every function pools the last ``len(kernel)`` axes (1, 2 or 3 of them, or more) and keeps
the leading ones (batch, channels). Windows follow PyTorch: ``padding`` on both sides,
``dilation`` between taps (max pooling), ``ceil_mode`` adding a last partial window when it
starts inside the input or its left padding. Padded taps are never read: each tap checks
that it lies inside the input, so no padded copy is made.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import TilecraftError
from ..ir import Expr, IntImm, as_expr, const
from ..ir import op as irop
from ..te import ReduceAxis, Tensor, compute, max_value, min_value, reduce_axis
from ..te import max as te_max
from ..te import min as te_min
from ..te import sum as te_sum


@dataclass(frozen=True)
class Window:
    """Per pooled axis: ``kernel``, ``stride``, ``padding`` and ``dilation``; ``ceil_mode``."""

    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    ceil_mode: bool = False

    def __post_init__(self) -> None:
        n = len(self.kernel)
        parts = (self.stride, self.padding, self.dilation)
        if n == 0 or any(len(v) != n for v in parts):
            raise TilecraftError(f"pool: kernel, stride, padding, dilation differ in length {self}")
        if min(self.kernel + self.stride + self.dilation) < 1 or min(self.padding) < 0:
            raise TilecraftError(f"pool: needs positive sizes and non-negative padding {self}")

    def extent(self, d: int, n: int) -> int:
        """The output extent along pooled axis ``d`` of input extent ``n`` (PyTorch's rule)."""
        k, s, p, dil = self.kernel[d], self.stride[d], self.padding[d], self.dilation[d]
        num = n + 2 * p - dil * (k - 1) - 1
        out = (-(-num // s) if self.ceil_mode else num // s) + 1
        if self.ceil_mode and (out - 1) * s >= n + p:
            out -= 1  # the last window would start in the right padding
        if out < 1:
            raise TilecraftError(f"pool: window {k} (dilation {dil}) does not fit extent {n}")
        return out


def spatial_extents(x_shape: Sequence[Expr], rank: int, op: str) -> tuple[int, ...]:
    """The static extents of the last ``rank`` axes; TilecraftError when one is symbolic."""
    if rank > len(x_shape):
        raise TilecraftError(f"{op}: pools {rank} axes of a rank-{len(x_shape)} tensor")
    out: list[int] = []
    for e in x_shape[len(x_shape) - rank :]:
        if not isinstance(e, IntImm):
            raise TilecraftError(f"{op}: the pooled extents must be static")
        out.append(e.value)
    return tuple(out)


def pool_shape(x_shape: Sequence[Expr], win: Window, op: str) -> tuple[Expr, ...]:
    """The output shape of pooling a tensor of ``x_shape`` with ``win``."""
    r = len(win.kernel)
    ns = spatial_extents(x_shape, r, op)
    outs = (as_expr(win.extent(d, n)) for d, n in enumerate(ns))
    return (*x_shape[: len(x_shape) - r], *outs)


def _taps(win: Window, name: str) -> list[ReduceAxis]:
    """One reduction axis per pooled axis, over the kernel's taps."""
    return [reduce_axis(k, f"r{name}{d}") for d, k in enumerate(win.kernel)]


def _tap(
    x: Tensor, win: Window, idx: Sequence[Expr], rs: Sequence[ReduceAxis]
) -> tuple[Expr, Expr, list[Expr]]:
    """(inside the input?, the value there (clamped read), the tap's position per axis)."""
    lead = len(idx) - len(rs)
    inside: Expr | None = None
    pos: list[Expr] = []
    for d, r in enumerate(rs):
        o, n = idx[lead + d], x.shape[lead + d]
        at = o * win.stride[d] - win.padding[d] + r * win.dilation[d]
        ok = (at >= 0) & (at < n)
        inside = ok if inside is None else inside & ok
        pos.append(at)
    safe = [irop.min(irop.max(a, as_expr(0, a.dtype)), x.shape[lead + d] - 1)
            for d, a in enumerate(pos)]  # fmt: skip
    assert inside is not None
    key = (*idx[:lead], *safe)
    return inside, x[key], pos


def max_pool(x: Tensor, win: Window, name: str = "T_max_pool") -> Tensor:
    """The maximum over each window's taps inside the input."""
    shape = pool_shape(x.shape, win, "max_pool")
    rs = _taps(win, "m")

    def body(*idx: Expr) -> Expr:
        inside, v, _ = _tap(x, win, idx, rs)
        out: Expr = te_max(irop.select(inside, v, min_value(x.dtype)), axis=rs)
        return out

    return compute(shape, body, name=name)  # type: ignore[no-any-return]


def max_pool_index(x: Tensor, win: Window, name: str = "T_max_pool_index") -> Tensor:
    """int64 position of each window's maximum, flat over the pooled axes (PyTorch's indices).

    The first tap in scan order holding the maximum wins, as in PyTorch; a second stage finds
    it as the smallest flat position whose value equals the window's maximum.
    """
    best = max_pool(x, win, name=f"{name}_max")
    rs = _taps(win, "i")
    strides: list[int] = []
    step = 1
    for n in reversed(spatial_extents(x.shape, len(win.kernel), "max_pool_index")):
        strides.insert(0, step)
        step *= n

    def body(*idx: Expr) -> Expr:
        inside, v, pos = _tap(x, win, idx, rs)
        flat: Expr = const(0, "int64")
        for a, s in zip(pos, strides, strict=True):
            flat = flat + irop.cast(a, "int64") * const(s, "int64")
        hit = inside & v.eq(best[idx])
        out: Expr = te_min(irop.select(hit, flat, max_value("int64")), axis=rs)
        return out

    return compute(best.shape, body, name=name)  # type: ignore[no-any-return]


def avg_pool(
    x: Tensor,
    win: Window,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
    name: str = "T_avg_pool",
) -> Tensor:
    """The mean of each window (floating point), divided as PyTorch divides.

    The divisor is ``divisor_override`` when given; else the window's size clipped to the
    padded input (``count_include_pad``) or the number of its taps inside the input.
    """
    if not x.dtype.is_float:
        raise TilecraftError(f"avg_pool: needs a floating-point tensor, got {x.dtype}")
    if any(d != 1 for d in win.dilation):
        raise TilecraftError("avg_pool: has no dilation")
    shape = pool_shape(x.shape, win, "avg_pool")
    rs = _taps(win, "a")
    lead = x.ndim - len(win.kernel)
    total = compute(
        shape,
        lambda *idx: te_sum(irop.select(*_tap(x, win, idx, rs)[:2], const(0, x.dtype)), axis=rs),
        name=f"{name}_sum",
    )

    def divisor(idx: Sequence[Expr]) -> Expr:
        if divisor_override is not None:
            return const(float(divisor_override), x.dtype)
        count: Expr | None = None
        for d in range(len(win.kernel)):
            n, p = x.shape[lead + d], win.padding[d]
            start = idx[lead + d] * win.stride[d] - p
            end = irop.min(start + win.kernel[d], n + p)
            if not count_include_pad:
                start, end = irop.max(start, as_expr(0, start.dtype)), irop.min(end, n)
            count = end - start if count is None else count * (end - start)
        assert count is not None
        return irop.cast(count, x.dtype)

    return compute(shape, lambda *idx: total[idx] / divisor(idx), name=name)  # type: ignore[no-any-return]


def adaptive_bounds(n: int, out: int) -> list[tuple[int, int]]:
    """PyTorch's adaptive windows: ``[floor(i * n / out), ceil((i + 1) * n / out))``."""
    return [((i * n) // out, -(-((i + 1) * n) // out)) for i in range(out)]


def adaptive_avg_pool(
    x: Tensor, output_size: Sequence[int], name: str = "T_adaptive_avg_pool"
) -> Tensor:
    """Adaptive average pooling of the last ``len(output_size)`` axes (windows may differ in
    size and overlap); each window's taps run over the largest window, masked."""
    if not x.dtype.is_float:
        raise TilecraftError(f"adaptive_avg_pool: needs a floating-point tensor, got {x.dtype}")
    r = len(output_size)
    ns = spatial_extents(x.shape, r, "adaptive_avg_pool")
    lead = x.ndim - r
    widest = [
        max(e - s for s, e in adaptive_bounds(n, o)) for n, o in zip(ns, output_size, strict=True)
    ]
    rs = [reduce_axis(w, f"ra{d}") for d, w in enumerate(widest)]

    def bounds(i: Expr, d: int) -> tuple[Expr, Expr]:
        n, o = ns[d], output_size[d]
        start = (i * n) // o
        return start, ((i + 1) * n + (o - 1)) // o

    def body(*idx: Expr) -> Expr:
        inside: Expr | None = None
        at: list[Expr] = []
        for d, rr in enumerate(rs):
            start, end = bounds(idx[lead + d], d)
            ok = start + rr < end
            inside = ok if inside is None else inside & ok
            at.append(irop.min(start + rr, as_expr(ns[d] - 1, start.dtype)))
        assert inside is not None
        key = (*idx[:lead], *at)
        out: Expr = te_sum(irop.select(inside, x[key], const(0, x.dtype)), axis=rs)
        return out

    shape = (*x.shape[:lead], *(as_expr(o) for o in output_size))
    total = compute(shape, body, name=f"{name}_sum")

    def mean(*idx: Expr) -> Expr:
        count: Expr | None = None
        for d in range(r):
            start, end = bounds(idx[lead + d], d)
            count = end - start if count is None else count * (end - start)
        assert count is not None
        quotient: Expr = total[idx] / irop.cast(count, x.dtype)
        return quotient

    return compute(shape, mean, name=name)  # type: ignore[no-any-return]
