"""Math on values is reachable from ``tc.te``; ``te.max``/``te.min`` also take two values."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.errors import TilecraftError


def test_math_functions_are_reachable_from_te() -> None:
    from tilecraft.ir import op

    for name in op.__all__:
        assert callable(getattr(tc.te, name)), name
    x = tc.te.placeholder((6,), "float32", name="x")
    n = tc.te.placeholder((6,), "int32", name="n")
    outs = [
        tc.te.compute((6,), lambda i: tc.te.rsqrt(tc.te.abs(x[i]) + 1.0), name="r"),
        tc.te.compute((6,), lambda i: tc.te.max(x[i], 0.5), name="m"),  # two values: elementwise
        tc.te.compute((6,), lambda i: tc.te.abs(n[i]), name="a"),
    ]
    lib = tc.build(tc.te.create_prim_func([x, n, *outs]))
    xv = np.linspace(-2, 3, 6).astype("float32")
    nv = np.array([-3, -1, 0, 1, 2, -(2**31) + 1], "int32")
    got = [np.zeros(6, "float32"), np.zeros(6, "float32"), np.zeros(6, "int32")]
    lib["main"](xv, nv, *got)
    np.testing.assert_allclose(got[0], 1 / np.sqrt(np.abs(xv) + 1), rtol=1e-6)
    np.testing.assert_array_equal(got[1], np.maximum(xv, np.float32(0.5)))
    np.testing.assert_array_equal(got[2], np.abs(nv))
    k = tc.te.reduce_axis((0, 6), name="k")
    total = tc.te.compute((1,), lambda _: tc.te.max(x[k], axis=k), name="total")
    assert tc.te.create_prim_func([x, total]).name == "main"  # still a reducer with axis=


def test_two_value_max_rejects_reduction_options() -> None:
    x = tc.te.placeholder((4,), "float32", name="x")
    with pytest.raises(TilecraftError, match=r"max\(a, b\)"):
        tc.te.compute((4,), lambda i: tc.te.max(x[i], 0.0, where=x[i] > 0.0), name="m")
    with pytest.raises(TilecraftError, match="needs reduce axes"):
        tc.te.sum(x[0])
