"""Float negation flips the sign of every value, zeros included.

``-x`` used to be built as ``0 - x``, which IEEE evaluates to ``+0.0`` for ``x = +0.0``:
``torch.copysign(y, -zeros)`` and ``1 / -x`` came out with the wrong sign. A float negation is
now ``x * -1`` (exact, and a sign flip for zeros, infinities and NaNs); integers keep ``0 - x``.
"""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.ir import FloatImm, Mul, Sub, Var


def _negate_func(dtype: str) -> tc.ir.PrimFunc:
    a = tc.te.placeholder((6,), dtype, name="A")
    b = tc.te.compute((6,), lambda i: -a[i], name="B")
    return tc.te.create_prim_func([a, b])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_negating_a_zero_gives_a_negative_zero(dtype: str) -> None:
    lib = tc.build(_negate_func(dtype), target="cpu")
    x = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf], dtype=dtype)
    got = np.empty_like(x)
    lib["main"](x, got)
    np.testing.assert_array_equal(np.signbit(got), ~np.signbit(x))
    np.testing.assert_array_equal(got, -x)


def test_negation_forms_by_dtype() -> None:
    f, i = Var("f", "float32"), Var("i", "int32")
    neg_f, neg_i = -f, -i
    assert isinstance(neg_f, Mul)
    assert isinstance(neg_f.b, FloatImm)
    assert neg_f.b.value == -1.0
    assert isinstance(neg_i, Sub)


def test_script_round_trip_keeps_negation_and_float_subtraction_apart() -> None:
    x = Var("x", "float32")
    sub = Sub(FloatImm("float32", 0.0), x)
    assert str(-x) == "-x"
    assert str(sub) == "T.float32(0.0) - x"
    func = _negate_func("float32")
    again = tc.script.parse(tc.script.to_script(func))
    tc.ir.assert_structural_equal(again, func)
