"""2-D convolution and pooling in NCHW or NHWC layout."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import TilecraftError
from ..ir import Expr, as_expr
from ..ir import op as irop
from ..te import Tensor, compute, min_value, reduce_axis
from ..te import max as te_max
from ..te import sum as te_sum
from ._util import add, const_int, floordiv, mul, padding4, pair, sub
from .transform import pad

IntOr2 = int | Sequence[int]


def _layout_axes(layout: str) -> tuple[int, int, int]:
    """Positions of (channel, height, width) in a 4-D tensor of ``layout``."""
    if layout == "NCHW":
        return 1, 2, 3
    if layout == "NHWC":
        return 3, 1, 2
    raise TilecraftError(f"layout must be 'NCHW' or 'NHWC', got {layout!r}")


def _out_extent(size: Expr, before: int, after: int, k: Expr, stride: int, dil: int) -> Expr:
    """``(size + before + after - dil * (k - 1) - 1) // stride + 1``."""
    span = add(mul(sub(k, 1), dil), 1)
    return add(floordiv(sub(add(size, before + after), span), stride), 1)


def _pad_input(x: Tensor, layout: str, p: tuple[int, int, int, int], value: float | int) -> Tensor:
    """``x`` padded on its spatial axes with ``value`` (an int for integer dtypes)."""
    if not any(p):
        return x
    _, ha, wa = _layout_axes(layout)
    before, after = [0] * 4, [0] * 4
    before[ha], before[wa], after[ha], after[wa] = p[0], p[1], p[2], p[3]
    return pad(x, before, after, value=value, name="pad_temp")


def _nchw(layout: str, n: Expr, c: Expr, h: Expr, w: Expr) -> tuple[Expr, ...]:
    return (n, c, h, w) if layout == "NCHW" else (n, h, w, c)


def conv2d(
    x: Tensor,
    w: Tensor,
    stride: IntOr2 = 1,
    padding: int | Sequence[int] = 0,
    dilation: IntOr2 = 1,
    groups: int = 1,
    layout: str = "NCHW",
    name: str = "conv2d",
) -> Tensor:
    """2-D convolution (cross-correlation, as in PyTorch) with groups.

    Parameters
    ----------
    x
        Input: ``(N, C, H, W)`` for NCHW, ``(N, H, W, C)`` for NHWC.
    w
        Weights: ``(O, C // groups, KH, KW)`` (OIHW) for NCHW, ``(KH, KW, C // groups, O)``
        (HWIO) for NHWC.
    stride, dilation
        An int or ``(h, w)``.
    padding
        An int, ``(ph, pw)`` or ``(top, left, bottom, right)``; zero padding is a separate
        stage ``pad_temp`` (a Select on the bounds).
    groups
        ``C`` and ``O`` must both be divisible by it.
    layout
        ``"NCHW"`` or ``"NHWC"``.
    name
        Stage name.

    Returns
    -------
    Tensor
        ``(N, O, OH, OW)`` or ``(N, OH, OW, O)``.
    """
    if x.ndim != 4 or w.ndim != 4:
        raise TilecraftError(f"conv2d: expected 4-D input and weight, got {x.ndim}, {w.ndim}")
    if x.dtype != w.dtype:
        raise TilecraftError(f"conv2d: dtypes differ: {x.dtype} vs {w.dtype}")
    ca, ha, wa = _layout_axes(layout)
    if layout == "NCHW":
        oc, icg, kh, kw = w.shape
    else:
        kh, kw, icg, oc = w.shape
    c = x.shape[ca]
    for what, v in (("input channels", c), ("output channels", oc)):
        cv = const_int(v)
        if cv is not None and cv % groups != 0:
            raise TilecraftError(f"conv2d: {what} {cv} not divisible by groups={groups}")
    cc, ci = const_int(c), const_int(icg)
    if cc is not None and ci is not None and cc != ci * groups:
        raise TilecraftError(f"conv2d: weight expects {const_int(icg)}x{groups} input channels")
    sh, sw = pair(stride, "conv2d stride")
    dh, dw = pair(dilation, "conv2d dilation")
    p = padding4(padding)
    oh = _out_extent(x.shape[ha], p[0], p[2], kh, sh, dh)
    ow = _out_extent(x.shape[wa], p[1], p[3], kw, sw, dw)
    xp = _pad_input(x, layout, p, 0.0 if x.dtype.is_float else 0)  # a zero of x's dtype
    ocg = floordiv(oc, groups)
    rc, ry, rx = reduce_axis(icg, "rc"), reduce_axis(kh, "ry"), reduce_axis(kw, "rx")

    def body(n: Expr, a: Expr, b: Expr, d: Expr) -> object:
        f, y, xx = (a, b, d) if layout == "NCHW" else (d, a, b)
        cin = rc if groups == 1 else floordiv(f, ocg) * icg + rc
        src = xp[_nchw(layout, n, cin, add(mul(y, sh), mul(ry, dh)), add(mul(xx, sw), mul(rx, dw)))]
        wt = w[(f, rc, ry, rx) if layout == "NCHW" else (ry, rx, rc, f)]
        return te_sum(src * wt, axis=[rc, ry, rx])

    shape = _nchw(layout, x.shape[0], oc, oh, ow)
    return compute(shape, body, name=name)  # type: ignore[no-any-return]


def _pool_setup(
    x: Tensor, kernel: IntOr2, stride: IntOr2 | None, padding: int | Sequence[int], layout: str
) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int, int, int], Expr, Expr]:
    if x.ndim != 4:
        raise TilecraftError(f"pool2d: expected a 4-D input, got rank {x.ndim}")
    _, ha, wa = _layout_axes(layout)
    k = pair(kernel, "pool2d kernel")
    s = pair(stride if stride is not None else k, "pool2d stride")
    p = padding4(padding)
    oh = _out_extent(x.shape[ha], p[0], p[2], as_expr(k[0]), s[0], 1)
    ow = _out_extent(x.shape[wa], p[1], p[3], as_expr(k[1]), s[1], 1)
    return k, s, p, oh, ow


def _window(layout: str, n: Expr, a: Expr, b: Expr, d: Expr) -> tuple[Expr, Expr, Expr, Expr]:
    """(n, c, oh, ow) from an output index of ``layout``."""
    return (n, a, b, d) if layout == "NCHW" else (n, d, a, b)


def max_pool2d(
    x: Tensor,
    kernel: IntOr2,
    stride: IntOr2 | None = None,
    padding: int | Sequence[int] = 0,
    layout: str = "NCHW",
    name: str = "max_pool2d",
) -> Tensor:
    """Max pooling; padded positions hold the dtype's lowest value (never chosen over data).

    ``stride`` defaults to ``kernel``; padding as in :func:`conv2d`; floor output size.
    """
    k, s, p, oh, ow = _pool_setup(x, kernel, stride, padding, layout)
    if x.dtype.is_float:
        xp = _pad_input(x, layout, p, float("-inf"))
    else:
        xp = _pad_int(x, layout, p) if any(p) else x
    ry, rx = reduce_axis(k[0], "ry"), reduce_axis(k[1], "rx")

    def body(*idx: Expr) -> object:
        n, c, y, xx = _window(layout, *idx)
        return te_max(
            xp[_nchw(layout, n, c, add(mul(y, s[0]), ry), add(mul(xx, s[1]), rx))], axis=[ry, rx]
        )

    ca, _, _ = _layout_axes(layout)
    return compute(_nchw(layout, x.shape[0], x.shape[ca], oh, ow), body, name=name)  # type: ignore[no-any-return]


def _pad_int(x: Tensor, layout: str, p: tuple[int, int, int, int]) -> Tensor:
    """Integer max-pool padding with the dtype's minimum (``pad`` only takes floats)."""
    _, ha, wa = _layout_axes(layout)
    lo = min_value(x.dtype)

    def body(*idx: Expr) -> Expr:
        src = list(idx)
        src[ha], src[wa] = sub(idx[ha], p[0]), sub(idx[wa], p[1])
        ok = (
            (idx[ha] >= p[0]) & (idx[ha] < add(x.shape[ha], p[0]))
            & (idx[wa] >= p[1]) & (idx[wa] < add(x.shape[wa], p[1]))
        )  # fmt: skip
        return irop.select(ok, x[tuple(src)], lo)

    shape = list(x.shape)
    shape[ha] = add(x.shape[ha], p[0] + p[2])
    shape[wa] = add(x.shape[wa], p[1] + p[3])
    return compute(shape, body, name="pad_temp")  # type: ignore[no-any-return]


def avg_pool2d(
    x: Tensor,
    kernel: IntOr2,
    stride: IntOr2 | None = None,
    padding: int | Sequence[int] = 0,
    layout: str = "NCHW",
    count_include_pad: bool = False,
    name: str = "avg_pool2d",
) -> Tensor:
    """Average pooling (floating point).

    With ``count_include_pad=False`` (default) each window's sum is divided by the number
    of its elements inside the input; with True by ``kh * kw`` (PyTorch's flag). Stages:
    ``pad_temp`` when padded, ``name_sum`` and ``name``.
    """
    if not x.dtype.is_float:
        raise TilecraftError(f"avg_pool2d: needs a floating-point tensor, got {x.dtype}")
    k, s, p, oh, ow = _pool_setup(x, kernel, stride, padding, layout)
    _, ha, wa = _layout_axes(layout)
    xp = _pad_input(x, layout, p, 0.0)
    ry, rx = reduce_axis(k[0], "ry"), reduce_axis(k[1], "rx")

    def body(*idx: Expr) -> object:
        n, c, y, xx = _window(layout, *idx)
        return te_sum(
            xp[_nchw(layout, n, c, add(mul(y, s[0]), ry), add(mul(xx, s[1]), rx))], axis=[ry, rx]
        )

    ca, _, _ = _layout_axes(layout)
    shape = _nchw(layout, x.shape[0], x.shape[ca], oh, ow)
    total: Tensor = compute(shape, body, name=f"{name}_sum")

    def count(start: Expr, size: Expr, kk: int, before: int) -> Expr:
        lo = irop.max(start - before, as_expr(0, start.dtype))
        hi = irop.min(start - before + kk, size)
        return hi - lo

    def norm(*idx: Expr) -> Expr:
        if count_include_pad or not any(p):
            return total[idx] / float(k[0] * k[1])
        _, _, y, xx = _window(layout, *idx)
        cnt = count(y * s[0], x.shape[ha], k[0], p[0]) * count(xx * s[1], x.shape[wa], k[1], p[1])
        return total[idx] / irop.cast(cnt, x.dtype)

    return compute(shape, norm, name=name)  # type: ignore[no-any-return]
