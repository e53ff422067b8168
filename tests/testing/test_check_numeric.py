"""check_numeric and assert_ir_equal."""

import numpy as np
import pytest

from tilecraft.ir import Buffer, BufferStore, For, ForKind, PrimFunc, Var
from tilecraft.testing import assert_ir_equal, bf16_to_f32, check_numeric, f32_to_bf16


def scale(factor, n=None, dtype="float32"):
    size = n if n is not None else Var("n")
    A, B = Buffer("A", (size,), dtype), Buffer("B", (size,), dtype)
    i = Var("i")
    return PrimFunc((A, B), For(i, 0, size, ForKind.SERIAL, BufferStore(B, A[i] * factor, (i,))))


def test_passes_against_numpy_and_primfunc():
    out = check_numeric(scale(2.0, 16), lambda a: a * 2.0)
    assert out[0].shape == (16,)
    check_numeric(scale(2.0, 16), scale(2.0, 16))


def test_reports_worst_element():
    with pytest.raises(AssertionError, match=r"max abs error .* at \(\d+,\)"):
        check_numeric(scale(2.0, 16), lambda a: a * 2.001)


def test_symbolic_shape_vars():
    out = check_numeric(scale(3.0), lambda a: a * 3.0, shape_vars={"n": 7})
    assert out[0].shape == (7,)
    with pytest.raises(ValueError, match="shape_vars"):
        check_numeric(scale(3.0), lambda a: a * 3.0)
    with pytest.raises(ValueError, match="'m'"):
        check_numeric(scale(3.0), lambda a: a * 3.0, shape_vars={"m": 7})


def test_given_inputs_and_float16_tolerance():
    a = np.linspace(-1, 1, 8).astype("float16")
    out = check_numeric(scale(0.5, 8, "float16"), lambda x: x * np.float16(0.5), inputs=[a])
    np.testing.assert_array_equal(out[0], a * np.float16(0.5))


def test_unwritten_output_is_caught():
    A, B = Buffer("A", (8,), "float32"), Buffer("B", (8,), "float32")
    i = Var("i")
    half = PrimFunc((A, B), For(i, 0, 4, ForKind.SERIAL, BufferStore(B, A[i], (i,))))
    with pytest.raises(AssertionError, match="out of tolerance"):
        check_numeric(half, lambda a: a)


def test_bf16_roundtrip():
    x = np.array([1.0, -2.5, 3.140625, 1e-3], "float32")
    bits = f32_to_bf16(x)
    assert bits.dtype == np.uint16
    np.testing.assert_allclose(bf16_to_f32(bits), x, rtol=1e-2)
    assert bf16_to_f32(bits)[2] == 3.140625


def test_assert_ir_equal():
    i, j = Var("i"), Var("j")
    assert_ir_equal(i + 1, i + 1)
    with pytest.raises(AssertionError, match="IR differs"):
        assert_ir_equal(i + 1, j * 2)
