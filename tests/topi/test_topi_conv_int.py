"""Integer convolution with padding: the padded border holds a zero of the input's dtype."""

from __future__ import annotations

import numpy as np
import pytest

from tilecraft import te, topi
from tilecraft.testing import check_numeric


def _np_conv2d(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    """NCHW, stride 1, in int64 (no overflow for the small test values)."""
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, _, h, wd = xp.shape
    o, _, kh, kw = w.shape
    out = np.zeros((n, o, h - kh + 1, wd - kw + 1), dtype=np.int64)
    for y in range(kh):
        for z in range(kw):
            win = xp[:, :, y : y + out.shape[2], z : z + out.shape[3]]
            out += np.einsum("nchw,oc->nohw", win, w[:, :, y, z].astype(np.int64))
    return out


def test_conv2d_int32_with_padding() -> None:
    x = te.placeholder((1, 3, 6, 5), "int32", name="X")
    w = te.placeholder((4, 3, 3, 3), "int32", name="W")
    y = topi.conv2d(x, w, padding=1)
    assert y.dtype == x.dtype
    func = te.create_prim_func([x, w, y])
    rng = np.random.default_rng(0)
    a = rng.integers(-50, 50, (1, 3, 6, 5), dtype=np.int32)
    b = rng.integers(-50, 50, (4, 3, 3, 3), dtype=np.int32)
    check_numeric(func, lambda a, b: _np_conv2d(a, b, 1).astype(np.int32), inputs=[a, b])


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_conv2d_int8_widened_to_int32_with_padding(layout: str) -> None:
    shape_x, shape_w = ((1, 2, 5, 5), (3, 2, 3, 3))
    if layout == "NHWC":
        shape_x, shape_w = ((1, 5, 5, 2), (3, 3, 2, 3))
    x = te.placeholder(shape_x, "int8", name="X")
    w = te.placeholder(shape_w, "int8", name="W")
    y = topi.conv2d(topi.cast(x, "int32"), topi.cast(w, "int32"), padding=2, layout=layout)
    func = te.create_prim_func([x, w, y])
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, shape_x, dtype=np.int8)
    b = rng.integers(-128, 128, shape_w, dtype=np.int8)

    def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if layout == "NCHW":
            return _np_conv2d(a, b, 2).astype(np.int32)
        got = _np_conv2d(a.transpose(0, 3, 1, 2), b.transpose(3, 2, 0, 1), 2)
        return got.transpose(0, 2, 3, 1).astype(np.int32)

    check_numeric(func, reference, inputs=[a, b])


def test_conv2d_int8_with_padding_keeps_int8() -> None:
    x = te.placeholder((1, 1, 4, 4), "int8", name="X")
    w = te.placeholder((1, 1, 3, 3), "int8", name="W")
    y = topi.conv2d(x, w, padding=1)
    func = te.create_prim_func([x, w, y])
    a = np.arange(16, dtype=np.int8).reshape(1, 1, 4, 4) % 5
    b = np.ones((1, 1, 3, 3), dtype=np.int8)
    check_numeric(func, lambda a, b: _np_conv2d(a, b, 1).astype(np.int8), inputs=[a, b])
