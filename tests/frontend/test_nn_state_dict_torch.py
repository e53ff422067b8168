"""``Module.load_state_dict`` takes a PyTorch ``state_dict()`` as is."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.frontend import nn

torch = pytest.importorskip("torch")


class Net(nn.Module):
    def __init__(self) -> None:
        self.fc = nn.Linear(6, 4)
        self.bn = nn.BatchNorm2d(4)


class TorchNet(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(6, 4)
        self.bn = torch.nn.BatchNorm2d(4)


def test_a_torch_state_dict_loads_as_is() -> None:
    ref = TorchNet()
    state = ref.state_dict(keep_vars=True)  # Parameters that require grad
    assert state["fc.weight"].requires_grad
    state["bn.running_var"] = torch.rand(8)[::2] + 0.5  # non-contiguous
    net = Net()
    net.load_state_dict(state)  # num_batches_tracked is ignored
    got = net.state_dict()
    for name, value in state.items():
        if name.endswith("num_batches_tracked"):
            assert name not in got
            continue
        np.testing.assert_array_equal(got[name], value.detach().numpy())
        assert got[name].flags.c_contiguous
        assert got[name].dtype == np.float32
    # the loaded values are copies: changing the torch tensor later changes nothing
    with torch.no_grad():
        state["fc.weight"].add_(1.0)
    assert not np.array_equal(net.state_dict()["fc.weight"], state["fc.weight"].detach().numpy())
    net.load_state_dict(ref.state_dict())  # plain tensors too


def test_state_dict_errors_are_frontend_errors() -> None:
    state = TorchNet().state_dict()
    with pytest.raises(nn.FrontendError, match=r"fc\.weight has shape \(4, 5\)"):
        Net().load_state_dict({**state, "fc.weight": torch.zeros(4, 5)})
    with pytest.raises(nn.FrontendError, match=r"missing \['fc\.bias'\], unexpected \['extra'\]"):
        Net().load_state_dict(
            {**{k: v for k, v in state.items() if k != "fc.bias"}, "extra": torch.zeros(1)}
        )
    with pytest.raises(nn.FrontendError, match=r"fc\.weight has dtype complex64, which does not"):
        Net().load_state_dict({**state, "fc.weight": torch.zeros(4, 6, dtype=torch.complex64)})


def test_loaded_torch_weights_compile_and_match_torch() -> None:
    class Lin(nn.Module):
        def __init__(self) -> None:
            self.fc = nn.Linear(6, 4)

        def forward(self, x: nn.Tensor) -> nn.Tensor:
            return self.fc(x)

    ref = torch.nn.Linear(6, 4)
    net = Lin()
    net.load_state_dict({"fc." + k: v for k, v in ref.state_dict(keep_vars=True).items()})
    mod, params = net.export({"forward": {"x": nn.spec.Tensor((2, 6))}})
    x = torch.randn(2, 6)
    out = tc.compile(mod, target="cpu", params=params)(x)
    assert isinstance(out, torch.Tensor)
    np.testing.assert_allclose(out.numpy(), ref(x).detach().numpy(), rtol=1e-5, atol=1e-6)
