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
