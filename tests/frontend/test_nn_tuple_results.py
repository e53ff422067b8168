"""nn modules whose forward returns several tensors: one graph function returning a tuple."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.frontend import nn
from tilecraft.graph.ir import CallExtern, CallTIR


class TwoHeads(nn.Module):
    """A shared trunk (one matmul) feeding two heads; returns (relu head, scaled head)."""

    def __init__(self, as_list: bool = False) -> None:
        self.trunk = nn.Linear(8, 16)
        self.a = nn.Linear(16, 4)
        self.b = nn.Linear(16, 3)
        self.as_list = as_list

    def forward(self, x: nn.Tensor) -> tuple[nn.Tensor, nn.Tensor] | list[nn.Tensor]:
        h = nn.functional.relu(self.trunk(x))
        outs = [self.a(h), self.b(h) * 2.0]
        return outs if self.as_list else tuple(outs)


def _reference(state: dict[str, np.ndarray], x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h = np.maximum(x @ state["trunk.weight"].T + state["trunk.bias"], 0)
    a = h @ state["a.weight"].T + state["a.bias"]
    b = (h @ state["b.weight"].T + state["b.bias"]) * 2.0
    return a, b


SPEC = {"forward": {"x": nn.spec.Tensor(("n", 8), "float32")}}


@pytest.mark.parametrize("as_list", [False, True])
def test_two_outputs_one_function_shared_trunk_computed_once(as_list: bool) -> None:
    model = TwoHeads(as_list)
    mod, params = model.export(SPEC)
    f = mod["forward"]
    assert list(mod.functions) == ["forward"]
    assert f.returns_tuple
    assert [t.describe() for t in f.ret_types] == [
        "Tensor((n, 4), float32)",
        "Tensor((n, 3), float32)",
    ]
    exe = tc.compile(mod, params=params)
    lowered = exe.mod["forward"]
    calls = [b.value.func for b in lowered.bindings if isinstance(b.value, (CallTIR, CallExtern))]
    # three matmuls in the model (trunk, two heads): the trunk's is one call, not one per head
    assert len([c for c in calls if "matmul" in c or "gemm" in c]) == 3
    x = np.random.default_rng(0).standard_normal((5, 8)).astype("float32")
    out = exe["forward"](x)
    assert isinstance(out, tuple)
    assert len(out) == 2
    assert all(isinstance(o, np.ndarray) for o in out)
    for got, ref in zip(out, _reference(params, x), strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    a, b = exe(x[:2])  # another extent of the symbolic batch
    assert a.shape == (2, 4)
    assert b.shape == (2, 3)


def test_tuple_result_torch_in_torch_out() -> None:
    torch = pytest.importorskip("torch")
    model = TwoHeads()
    mod, params = model.export(SPEC)
    exe = tc.compile(mod, params=params)
    x = torch.randn(3, 8, requires_grad=True)
    out = exe.forward(x=x)
    assert isinstance(out, tuple)
    assert all(isinstance(o, torch.Tensor) for o in out)
    for got, ref in zip(out, _reference(params, x.detach().numpy()), strict=True):
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-5, atol=1e-5)


class Returns(nn.Module):
    def __init__(self, make: object) -> None:
        self.fc = nn.Linear(4, 4)
        self.make = make

    def forward(self, x: nn.Tensor) -> object:
        return self.make(self.fc(x), x)  # type: ignore[operator]


def test_returning_an_input_and_a_repeat_in_the_tuple() -> None:
    model = Returns(lambda y, x: (y, x, y))
    mod, params = model.export({"forward": {"x": nn.spec.Tensor((2, 4))}})
    exe = tc.compile(mod, params=params)
    x = np.arange(8, dtype="float32").reshape(2, 4)
    y, x2, y2 = exe(x)
    ref = x @ params["fc.weight"].T + params["fc.bias"]
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(x2, x)
    np.testing.assert_array_equal(y2, y)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda y, x: 3.0, "must return an nn tensor or a tuple of nn tensors, got float"),
        (lambda y, x: None, "must return an nn tensor or a tuple of nn tensors, got NoneType"),
        (lambda y, x: {"y": y}, "got dict"),
        (lambda y, x: (y, 2), r"non-empty tuple of nn tensors, got a tuple of Tensor, int"),
        (lambda y, x: [y, (x,)], r"got a list of Tensor, tuple"),
        (lambda y, x: (), r"got a tuple of nothing"),
    ],
)
def test_forward_returning_something_else_is_a_clear_error(make: object, message: str) -> None:
    with pytest.raises(nn.FrontendError, match=message):
        Returns(make).export({"forward": {"x": nn.spec.Tensor((2, 4))}})
