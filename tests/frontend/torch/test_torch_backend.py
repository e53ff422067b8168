"""torch.compile(model, backend="tilecraft"): torch tensors in, torch tensors out."""

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
tomllib = pytest.importorskip("tomllib")  # Python 3.11+

from torch_models import MLP  # noqa: E402

from tilecraft.frontend.torch import TorchFrontendError, tilecraft_backend  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


def test_entry_point_names_the_backend():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    target = project["entry-points"]["torch_dynamo_backends"]["tilecraft"]
    module, _, name = target.partition(":")
    assert (module, name) == ("tilecraft.frontend.torch.backend", "tilecraft_backend")


def _backend():
    # "tilecraft" once the package is installed (the entry point); the function otherwise
    return "tilecraft" if "tilecraft" in torch._dynamo.list_backends() else tilecraft_backend


def test_compile_mlp_matches_eager_at_two_batch_sizes():
    torch.manual_seed(0)
    model = MLP().eval()
    torch._dynamo.reset()
    fast = torch.compile(model, backend=_backend(), options={"target": "cpu"})
    for n in (4, 9):
        x = torch.randn(n, 16)
        with torch.no_grad():
            out, ref = fast(x), model(x)
        assert isinstance(out, torch.Tensor)
        assert out.shape == ref.shape
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)


def test_unknown_option_is_a_tilecraft_error():
    with pytest.raises(TorchFrontendError, match="unknown options"):
        tilecraft_backend(None, [], {"bogus": 1})


def _counting(monkeypatch):
    import tilecraft.driver as driver

    calls = []
    real = driver.compile

    def compile_(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(driver, "compile", compile_)
    return calls


def test_one_symbolic_compile_serves_every_batch_size(monkeypatch):
    calls = _counting(monkeypatch)
    torch.manual_seed(0)
    model = MLP().eval()
    torch._dynamo.reset()
    fast = torch.compile(model, backend=_backend())
    for n in (4, 9, 13, 2):  # 4: static; 9: dynamo marks the batch dynamic; 13, 2: reused
        x = torch.randn(n, 16)
        with torch.no_grad():
            torch.testing.assert_close(fast(x), model(x), rtol=1e-4, atol=1e-5)
    assert len(calls) == 2


def test_dynamic_true_compiles_once_and_returns_tensors_without_copy(monkeypatch):
    calls = _counting(monkeypatch)
    torch.manual_seed(0)
    model = MLP().eval()
    torch._dynamo.reset()
    fast = torch.compile(model, backend=_backend(), dynamic=True)
    with torch.no_grad():  # compiled here (dynamo guards on grad mode too)
        fast(torch.randn(2, 16))  # the calls below must not copy through numpy

    def no_numpy(*args):
        raise AssertionError("an output went through torch.from_numpy")

    monkeypatch.setattr(torch, "from_numpy", no_numpy)
    for n in (3, 8):
        x = torch.randn(n, 16)
        with torch.no_grad():
            out = fast(x)
            torch.testing.assert_close(out, model(x), rtol=1e-4, atol=1e-5)
        assert type(out) is torch.Tensor
        assert out.device == x.device
    assert len(calls) == 1


def test_multiple_outputs_come_back_as_a_tuple():
    class Two(torch.nn.Module):
        def forward(self, x):
            return x.relu(), x.sum(-1)

    torch._dynamo.reset()
    fast = torch.compile(Two(), backend=_backend())
    x = torch.randn(3, 5)
    a, b = fast(x)
    torch.testing.assert_close(a, x.relu())
    torch.testing.assert_close(b, x.sum(-1))
