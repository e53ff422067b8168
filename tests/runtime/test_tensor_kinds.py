"""Tensors stay what they were: numpy in gives numpy out, PyTorch in gives PyTorch out (by
DLPack, sharing memory), through single kernels and compiled models; a tensor that requires
grad is detached for inference."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.frontend import nn
from tilecraft.runtime.arguments import for_inference, result_like

torch = pytest.importorskip("torch")


class MLP(nn.Module):
    def __init__(self) -> None:
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.fc2(nn.functional.relu(self.fc1(x)))


@pytest.fixture(scope="module")
def model() -> tuple[tc.runtime.Executable, dict[str, np.ndarray]]:
    mod, params = MLP().export({"forward": {"x": nn.spec.Tensor(("n", 8))}})
    exe = tc.compile(mod, target="cpu", params=params)
    return exe, params


def reference(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    h = np.maximum(x @ p["fc1.weight"].T + p["fc1.bias"], 0)
    out: np.ndarray = h @ p["fc2.weight"].T + p["fc2.bias"]
    return out


@pytest.fixture(scope="module")
def kernel() -> tc.runtime.Module:
    a = tc.te.placeholder((4, 6), "float32", name="A")
    b = tc.te.compute((4, 6), lambda i, j: a[i, j] * 2.0 + 1.0, name="B")
    return tc.build(tc.te.create_prim_func([a, b]), target="cpu")


def test_numpy_in_numpy_out(model) -> None:  # type: ignore[no-untyped-def]
    exe, params = model
    x = np.random.default_rng(0).standard_normal((3, 8)).astype("float32")
    for out in (exe(x), exe["forward"](x), exe.forward(x=x)):
        assert type(out) is np.ndarray
        np.testing.assert_allclose(out, reference(x, params), rtol=1e-5, atol=1e-6)


def test_torch_in_torch_out_on_the_same_device_without_a_copy(model) -> None:  # type: ignore[no-untyped-def]
    exe, params = model
    x = torch.randn(5, 8)
    for out in (exe(x), exe["forward"](x=x), exe.forward(x)):
        assert isinstance(out, torch.Tensor)
        assert out.device == x.device
        assert out.dtype == torch.float32
        np.testing.assert_allclose(out.numpy(), reference(x.numpy(), params), rtol=1e-5, atol=1e-6)
    # the torch result is a view of the executor's result: from_dlpack, no copy
    arr = np.arange(6, dtype="float32")
    wrapped = result_like([torch.zeros(1)], arr)
    assert wrapped.data_ptr() == arr.ctypes.data


def test_requires_grad_and_strided_torch_tensors_run_for_inference(model) -> None:  # type: ignore[no-untyped-def]
    exe, params = model
    x = torch.randn(8, 3, requires_grad=True)
    out = exe(x.T)  # requires grad and is not contiguous
    assert isinstance(out, torch.Tensor)
    assert not out.requires_grad
    want = reference(x.detach().numpy().T, params)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)
    assert x.grad is None


def test_a_kernel_writes_into_torch_tensors_in_place(kernel) -> None:  # type: ignore[no-untyped-def]
    a = torch.randn(4, 6, requires_grad=True)
    b = torch.zeros(4, 6, requires_grad=True)
    ptr = b.data_ptr()
    assert kernel["main"](a, b) is None
    assert b.data_ptr() == ptr  # written in place: the caller's storage, no copy
    np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy() * 2 + 1, rtol=1e-6)
    a_np, b_np = np.ones((4, 6), "float32"), np.zeros((4, 6), "float32")
    kernel["main"](a_np, b_np)
    np.testing.assert_array_equal(b_np, np.full((4, 6), 3.0, "float32"))


def test_kernel_argument_errors_stay_the_runtimes(kernel) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(tc.runtime.ArgumentTypeError, match=r"expected dtype float32, got float64"):
        kernel["main"](torch.zeros(4, 6, dtype=torch.float64), torch.zeros(4, 6))
    with pytest.raises(tc.runtime.ArgumentError, match=r"C-contiguous"):
        kernel["main"](torch.zeros(6, 4).T, torch.zeros(4, 6))


def test_for_inference_leaves_other_values_alone() -> None:
    x = np.zeros(3)
    assert for_inference(x, "x") is x
    t = torch.zeros(2)
    assert for_inference(t, "t") is t
    g = torch.zeros(2, requires_grad=True)
    d = for_inference(g, "g")
    assert not d.requires_grad
    assert d.data_ptr() == g.data_ptr()


def test_importing_tilecraft_does_not_import_torch() -> None:
    code = (
        "import sys, tilecraft, tilecraft.frontend.nn, tilecraft.runtime; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
