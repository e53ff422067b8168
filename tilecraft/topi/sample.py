"""Reading at computed positions: ``col2im`` (blocks summed back into an image) and
``grid_sample`` (an image sampled at normalized positions), with PyTorch's semantics."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import TilecraftError
from ..ir import Expr, IntImm, as_expr, const
from ..ir import op as irop
from ..te import Tensor, compute, reduce_axis
from ..te import sum as te_sum


def _pair(attrs: Mapping[str, Any], key: str, default: int | None = None) -> tuple[int, int]:
    v = attrs.get(key, default)
    items = (v, v) if isinstance(v, int) else tuple(v) if isinstance(v, (tuple, list)) else ()
    if len(items) == 1:
        items = items * 2
    if len(items) != 2 or not all(isinstance(i, int) and not isinstance(i, bool) for i in items):
        raise TilecraftError(f"attribute {key!r} must be an int or 2 ints, got {v!r}")
    return int(items[0]), int(items[1])


@dataclass(frozen=True)
class Col2im:
    """``col2im``'s image size and the window that cut the blocks (each per axis)."""

    output_size: tuple[int, int]
    kernel: tuple[int, int]
    dilation: tuple[int, int]
    padding: tuple[int, int]
    stride: tuple[int, int]

    def blocks(self, d: int) -> int:
        """How many window positions fit along axis ``d``."""
        n, k, dil = self.output_size[d], self.kernel[d], self.dilation[d]
        return (n + 2 * self.padding[d] - dil * (k - 1) - 1) // self.stride[d] + 1


def col2im_spec(attrs: Mapping[str, Any]) -> Col2im:
    """The :class:`Col2im` of an operator's attributes."""
    spec = Col2im(*(_pair(attrs, k) for k in ("output_size", "kernel_size", "dilation",
                                               "padding", "stride")))  # fmt: skip
    if min(spec.kernel + spec.dilation + spec.stride) < 1 or min(spec.padding) < 0:
        raise TilecraftError(f"col2im: needs positive sizes and non-negative padding, {spec}")
    if min(spec.blocks(0), spec.blocks(1)) < 1:
        raise TilecraftError(f"col2im: the window does not fit the image, {spec}")
    return spec


def col2im_channels(shape: Sequence[Expr], spec: Col2im) -> Expr:
    """The image's channels for blocks of ``shape`` ``(N, C * kh * kw, L)``."""
    taps = spec.kernel[0] * spec.kernel[1]
    if len(shape) != 3 or not isinstance(shape[1], IntImm) or shape[1].value % taps:
        raise TilecraftError(f"needs (N, C * {taps}, L) blocks of static C")
    length = shape[2]
    if isinstance(length, IntImm) and length.value != spec.blocks(0) * spec.blocks(1):
        raise TilecraftError(f"has {length.value} blocks, the window gives {spec.blocks(0)} x "
                             f"{spec.blocks(1)}")  # fmt: skip
    return as_expr(shape[1].value // taps)


def col2im(cols: Tensor, spec: Col2im, name: str = "T_col2im") -> Tensor:
    """Each pixel sums the block entries that cover it (inverse of an unfold's gather)."""
    c = col2im_channels(cols.shape, spec)
    kh, kw = spec.kernel
    rk = [reduce_axis(kh, "rkh"), reduce_axis(kw, "rkw")]
    nb = (spec.blocks(0), spec.blocks(1))

    def body(n: Expr, ch: Expr, *pix: Expr) -> Expr:
        ok: Expr | None = None
        safe: list[Expr] = []
        for d in range(2):
            t = pix[d] + spec.padding[d] - rk[d] * spec.dilation[d]
            s = spec.stride[d]
            b = t // s if s != 1 else t
            hit = (t >= 0) & (b < nb[d])
            if s != 1:
                hit = hit & (t % s).eq(0)
            ok = hit if ok is None else ok & hit
            safe.append(irop.min(irop.max(b, as_expr(0, b.dtype)), as_expr(nb[d] - 1, b.dtype)))
        assert ok is not None
        row = ch * (kh * kw) + rk[0] * kw + rk[1]
        v = cols[n, row, safe[0] * nb[1] + safe[1]]
        out: Expr = te_sum(irop.select(ok, v, const(0, cols.dtype)), axis=rk)
        return out

    shape = (cols.shape[0], c, as_expr(spec.output_size[0]), as_expr(spec.output_size[1]))
    return compute(shape, body, name=name)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class GridSpec:
    """``mode`` (bilinear, nearest, bicubic), ``padding_mode`` (zeros, border, reflection)."""

    mode: str
    padding_mode: str
    align_corners: bool


def grid_spec(attrs: Mapping[str, Any]) -> GridSpec:
    """The :class:`GridSpec` of an operator's attributes."""
    spec = GridSpec(str(attrs.get("mode", "bilinear")), str(attrs.get("padding_mode", "zeros")),
                    bool(attrs.get("align_corners", False)))  # fmt: skip
    if spec.mode not in ("bilinear", "nearest", "bicubic"):
        raise TilecraftError(f"grid_sample: mode must be bilinear, nearest or bicubic, got "
                             f"{spec.mode!r}")  # fmt: skip
    if spec.padding_mode not in ("zeros", "border", "reflection"):
        raise TilecraftError(f"grid_sample: padding_mode must be zeros, border or reflection, "
                             f"got {spec.padding_mode!r}")  # fmt: skip
    return spec


def _reflect(c: Expr, twice_lo: int, twice_hi: int) -> Expr:
    """``c`` reflected into ``[twice_lo / 2, twice_hi / 2]`` (PyTorch's reflect_coordinates)."""
    dt = c.dtype
    if twice_lo == twice_hi:
        return const(0.0, dt)
    lo, span = twice_lo / 2, (twice_hi - twice_lo) / 2
    a = irop.abs(c - const(lo, dt))
    flips = irop.floor(a / const(span, dt))
    extra = a - flips * const(span, dt)
    even = irop.floor(flips * const(0.5, dt)).eq(flips * const(0.5, dt))
    return irop.select(even, extra + const(lo, dt), const(span + lo, dt) - extra)


def _padded(c: Expr, size: Expr, spec: GridSpec) -> Expr:
    """A source coordinate after the padding mode (border clips, reflection folds)."""
    dt = c.dtype
    top = irop.cast(size, dt) - const(1.0, dt)
    if spec.padding_mode == "zeros":
        return c
    if spec.padding_mode == "reflection":
        if not isinstance(size, IntImm):
            raise TilecraftError("grid_sample: reflection padding needs static extents")
        n = size.value
        c = _reflect(c, 0, 2 * (n - 1)) if spec.align_corners else _reflect(c, -1, 2 * n - 1)
    return irop.min(irop.max(c, const(0.0, dt)), top)


def _unnormalize(g: Expr, size: Expr, align: bool) -> Expr:
    dt = g.dtype
    n = irop.cast(size, dt)
    one = const(1.0, dt)
    if align:
        return (g + one) * const(0.5, dt) * (n - one)
    return ((g + one) * n - one) * const(0.5, dt)


def _cubic(t: Expr) -> list[Expr]:
    """The four cubic-convolution weights (A = -0.75) of taps -1, 0, 1, 2 at offset ``t``."""
    dt = t.dtype
    a = -0.75

    def near(x: Expr) -> Expr:  # |x| <= 1
        return ((const(a + 2, dt) * x - const(a + 3, dt)) * x) * x + const(1.0, dt)

    def far(x: Expr) -> Expr:  # 1 < |x| < 2
        return ((const(a, dt) * x - const(5 * a, dt)) * x + const(8 * a, dt)) * x - const(4 * a, dt)

    one = const(1.0, dt)
    return [far(t + one), near(t), near(one - t), far(one - t + one)]


def grid_sample(x: Tensor, grid: Tensor, spec: GridSpec, name: str = "T_grid_sample") -> Tensor:
    """``x`` (N, C, H, W) sampled at ``grid`` (N, Ho, Wo, 2) holding (x, y) in [-1, 1].

    Taps outside the image read zero (``padding_mode`` zeros, or after border / reflection
    folding, none are outside). Nearest rounds half to even, as PyTorch does.
    """
    h, w = x.shape[2], x.shape[3]
    dt = x.dtype

    def tap(n: Expr, c: Expr, fy: Expr, fx: Expr) -> Expr:
        iy, ix = irop.cast(irop.floor(fy), "int32"), irop.cast(irop.floor(fx), "int32")
        ok = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
        sy = irop.min(irop.max(iy, as_expr(0, "int32")), irop.cast(h, "int32") - 1)
        sx = irop.min(irop.max(ix, as_expr(0, "int32")), irop.cast(w, "int32") - 1)
        return irop.select(ok, x[n, c, sy, sx], const(0.0, dt))

    def body(n: Expr, c: Expr, i: Expr, j: Expr) -> Expr:
        gx = _unnormalize(grid[n, i, j, 0], w, spec.align_corners)
        gy = _unnormalize(grid[n, i, j, 1], h, spec.align_corners)
        if spec.mode == "bicubic":
            return _bicubic(tap, n, c, gy, gx, (h, w), spec)
        gx, gy = _padded(gx, w, spec), _padded(gy, h, spec)
        if spec.mode == "nearest":
            return tap(n, c, irop.round(gy), irop.round(gx))
        y0, x0 = irop.floor(gy), irop.floor(gx)
        fy, fx = gy - y0, gx - x0
        one = const(1.0, dt)
        top = tap(n, c, y0, x0) * (one - fx) + tap(n, c, y0, x0 + one) * fx
        bottom = tap(n, c, y0 + one, x0) * (one - fx) + tap(n, c, y0 + one, x0 + one) * fx
        return top * (one - fy) + bottom * fy

    shape = (x.shape[0], x.shape[1], grid.shape[1], grid.shape[2])
    return compute(shape, body, name=name)  # type: ignore[no-any-return]


Tap = Callable[[Expr, Expr, Expr, Expr], Expr]


def _bicubic(
    tap: Tap, n: Expr, c: Expr, gy: Expr, gx: Expr, hw: tuple[Expr, Expr], spec: GridSpec
) -> Expr:
    """Bicubic interpolation of a 4 x 4 neighbourhood, each tap padded on its own."""
    dt = gy.dtype
    y0, x0 = irop.floor(gy), irop.floor(gx)
    wy, wx = _cubic(gy - y0), _cubic(gx - x0)
    out: Expr | None = None
    for a in range(4):
        ty = _padded(y0 + const(float(a - 1), dt), hw[0], spec)
        row: Expr | None = None
        for b in range(4):
            tx = _padded(x0 + const(float(b - 1), dt), hw[1], spec)
            term = tap(n, c, ty, tx) * wx[b]
            row = term if row is None else row + term
        assert row is not None
        out = row * wy[a] if out is None else out + row * wy[a]
    assert out is not None
    return out
