"""nn tensors as users write them: ``+ - * / @``, unary minus, comparisons, Python scalars on
either side (a scalar takes the tensor's dtype), ``astype`` and ``where``; errors that name
calls which exist."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.frontend import nn
from tilecraft.frontend.nn import functional as F  # noqa: N812
from tilecraft.graph import GraphError

RNG = np.random.default_rng(7)


class Fn(nn.Module):
    def __init__(self, fn: Callable[..., nn.Tensor]) -> None:
        self.fn = fn

    def forward(self, *xs: nn.Tensor) -> nn.Tensor:
        return self.fn(*xs)


def run(fn: Callable[..., nn.Tensor], *inputs: np.ndarray) -> np.ndarray:
    spec = {f"x{i}": nn.spec.Tensor(a.shape, str(a.dtype)) for i, a in enumerate(inputs)}
    mod, params = Fn(fn).export({"forward": spec})
    exe = tc.compile(mod, target="cpu", params=params)
    out: np.ndarray = exe(*inputs)
    return out


def export(fn: Callable[..., nn.Tensor], *specs: nn.spec.Tensor) -> tc.IRModule:
    mod, _ = Fn(fn).export({"forward": {f"x{i}": s for i, s in enumerate(specs)}})
    return mod


X = RNG.uniform(0.5, 2.0, (3, 4)).astype("float32")
Y = RNG.uniform(0.5, 2.0, (3, 4)).astype("float32")


@pytest.mark.parametrize(
    ("fn", "ref"),
    [
        (lambda x: x * 2.0, lambda x: x * 2),
        (lambda x: 2.0 * x, lambda x: 2 * x),
        (lambda x: x + 1, lambda x: x + 1),
        (lambda x: 1 + x, lambda x: 1 + x),
        (lambda x: 1 - x, lambda x: 1 - x),
        (lambda x: x - 0.5, lambda x: x - 0.5),
        (lambda x: 2 / x, lambda x: 2 / x),
        (lambda x: x / 4, lambda x: x / 4),
        (lambda x: -x, lambda x: -x),
        (lambda x: +x * 1, lambda x: x),
    ],
)
def test_python_scalars_on_either_side(fn: Callable, ref: Callable) -> None:
    np.testing.assert_allclose(run(fn, X), ref(X), rtol=1e-6)


def test_tensor_operators_and_matmul() -> None:
    def fn(x: nn.Tensor, y: nn.Tensor) -> nn.Tensor:
        return (x + y) * (x - y) / y + x @ y.permute_dims(1, 0) @ x

    want = (X + Y) * (X - Y) / Y + X @ Y.T @ X
    np.testing.assert_allclose(run(fn, X, Y), want, rtol=1e-5)


def test_comparisons_give_bool_tensors_that_where_and_astype_take() -> None:
    y = Y.copy()
    y[0, 0] = X[0, 0]

    def fn(x: nn.Tensor, y: nn.Tensor) -> nn.Tensor:
        cmp = [x < y, x <= y, x > 1.0, x >= y, x.eq(y), x.ne(y), F.greater(y, 1)]
        acc = F.where(cmp[0], x, -x)
        for i, c in enumerate(cmp[1:], 1):
            acc = acc + c.astype("float32") * float(10**i)
        return acc + F.astype(F.equal(x, y), "float32") + F.where(x > 1.5, 0.0, x)

    x = X
    bits = [x <= y, x > 1, x >= y, x == y, x != y, y > 1]
    want = np.where(x < y, x, -x) + sum(b * 10.0**i for i, b in enumerate(bits, 1))
    want = want + (x == y) + np.where(x > 1.5, 0, x)
    np.testing.assert_allclose(run(fn, x, y), want, rtol=1e-6)


def test_comparison_dtypes_and_equality_stays_identity() -> None:
    def fn(x: nn.Tensor) -> nn.Tensor:
        c = x < 1.0
        assert c.dtype == "bool"
        assert x == x  # identity, as the IR's ==: comparisons are built with x.eq(y)
        assert x != c
        return c

    mod = export(fn, nn.spec.Tensor((2, 3)))
    assert mod["forward"].ret_type.describe() == "Tensor((2, 3), bool)"


def test_a_python_scalar_takes_the_tensor_dtype() -> None:
    def fn(x: nn.Tensor) -> nn.Tensor:
        y = 2 * x + 1
        assert y.dtype == x.dtype
        return y / 2

    for dt in ("float16", "float64", "int32"):
        mod = export(fn, nn.spec.Tensor((4,), dt))
        assert str(mod["forward"].ret_type.dtype) == dt
    x = np.arange(6, dtype="int32").reshape(2, 3)
    np.testing.assert_array_equal(run(lambda t: (3 * t + 1) / 2 - 1, x), (3 * x + 1) // 2 - 1)
    h = X.astype("float16")
    np.testing.assert_allclose(run(lambda t: t * 0.5 + 1, h), h * 0.5 + 1, rtol=1e-3)


def test_bfloat16_scalars_are_encoded_not_truncated() -> None:
    def fn(x: nn.Tensor) -> nn.Tensor:
        return (x * 0.5).astype("float32")

    x = np.array([0x3F80, 0x4000, 0xC040], dtype="uint16")  # 1.0, 2.0, -3.0 in bfloat16
    mod, params = Fn(fn).export({"forward": {"x": nn.spec.Tensor((3,), "bfloat16")}})
    out = tc.compile(mod, target="cpu", params=params)(x)
    np.testing.assert_array_equal(out, [0.5, 1.0, -1.5])


def test_astype_method_and_function() -> None:
    x = RNG.uniform(-3, 3, (2, 5)).astype("float32")
    np.testing.assert_array_equal(run(lambda t: t.astype("int32"), x), x.astype("int32"))
    np.testing.assert_array_equal(run(lambda t: F.astype(t, "int32"), x), x.astype("int32"))


def test_scalar_and_operand_errors_name_what_to_call() -> None:
    int_spec = nn.spec.Tensor((4,), "int32")
    with pytest.raises(nn.FrontendError, match=r"2.5 .* truncated.*x\.astype\('float32'\)"):
        export(lambda x: x * 2.5, int_spec)
    with pytest.raises(nn.FrontendError, match=r"-1 does not fit"):
        export(lambda x: x + -1, nn.spec.Tensor((4,), "uint8"))
    with pytest.raises(nn.FrontendError, match=r"is bool; convert it first with x\.astype"):
        export(lambda x: (x > 0) * 2.0, nn.spec.Tensor((4,)))
    with pytest.raises(nn.FrontendError, match=r"\*: expected an nn tensor or a Python scalar, "):
        export(lambda x: x * np.ones(4, "float32"), nn.spec.Tensor((4,)))
    with pytest.raises(nn.FrontendError, match=r"nn\.functional\.constant\(value, dtype\)"):
        export(lambda x: x @ [[1.0]], nn.spec.Tensor((1, 1)))
    with pytest.raises(nn.FrontendError, match=r"no truth value.*nn\.functional\.where"):
        export(lambda x: x if x > 0 else -x, nn.spec.Tensor((4,)))
    with pytest.raises(GraphError, match=r"has dtype int32, expected float32.*x\.astype"):
        export(lambda x, y: x + y, nn.spec.Tensor((4,)), int_spec)
    with pytest.raises(GraphError, match=r"where: the condition must be a bool tensor"):
        export(lambda x: F.where(x, x, 0.0), nn.spec.Tensor((4,)))
    with pytest.raises(GraphError, match=r"less: argument 1 has dtype int32, expected float32"):
        export(lambda x, y: x < y, nn.spec.Tensor((4,)), int_spec)
    assert hasattr(nn.Tensor, "astype")
    assert all(callable(f) for f in (F.where, F.constant, F.astype))


def test_every_suggested_nn_call_exists() -> None:
    """Messages and docs that say ``nn.functional.<name>`` or ``tc.<path>`` name real ones."""
    root = Path(tc.__file__).parent
    texts = [p.read_text() for p in root.rglob("*.py")]
    texts += [p.read_text() for p in (root.parent / "docs").rglob("*.md")]
    texts.append((root.parent / "README.md").read_text())
    names = set()
    for text in texts:
        names |= set(re.findall(r"nn\.functional\.([A-Za-z_]\w*)", text))
    assert {"where", "constant", "causal_lower_right"} <= names
    missing = sorted(n for n in names if not hasattr(F, n))
    assert not missing, f"messages name nn.functional.{missing}, which do not exist"
