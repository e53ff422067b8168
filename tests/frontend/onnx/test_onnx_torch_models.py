"""The importer tests' PyTorch models exported with torch.onnx.export (TorchScript exporter,
dynamic axes): imported, compiled with tc.compile and compared with onnxruntime at two sizes."""

from __future__ import annotations

import importlib.util
import io
import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402, N812

import tilecraft as tc  # noqa: E402
from tilecraft.frontend.onnx import from_onnx  # noqa: E402


def _torch_models():  # type: ignore[no-untyped-def]
    path = Path(__file__).parents[1] / "torch" / "torch_models.py"
    spec = importlib.util.spec_from_file_location("onnx_test_torch_models", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BasicBlock(nn.Module):
    """ResNet's basic block with a strided 1x1 projection shortcut."""

    def __init__(self, cin: int = 8, cout: int = 16, stride: int = 2) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):  # type: ignore[no-untyped-def]
        y = F.relu(self.b1(self.c1(x)))
        return F.relu(self.b2(self.c2(y)) + self.down(x))


class InvertedResidual(nn.Module):
    """MobileNetV2's inverted residual: expand 1x1, depthwise 3x3, project 1x1, add."""

    def __init__(self, c: int = 16, expand: int = 4) -> None:
        super().__init__()
        h = c * expand
        self.body = nn.Sequential(
            nn.Conv2d(c, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU6(),
            nn.Conv2d(h, h, 3, 1, 1, groups=h, bias=False), nn.BatchNorm2d(h), nn.ReLU6(),
            nn.Conv2d(h, c, 1, bias=False), nn.BatchNorm2d(c),
        )  # fmt: skip

    def forward(self, x):  # type: ignore[no-untyped-def]
        return x + self.body(x)


def _randomize_norms(net: nn.Module) -> None:
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)


def _export(net: nn.Module, shape: tuple[int, ...], axes: dict[int, str]):  # type: ignore[no-untyped-def]
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            net, (torch.randn(*shape),), buf, dynamo=False, input_names=["x"],
            output_names=["y"], dynamic_axes={"x": axes, "y": axes}, opset_version=17,
        )  # fmt: skip
    return onnx.load_from_string(buf.getvalue())


IMAGE = {0: "batch"}
SEQ = {0: "batch", 1: "seq"}
CASES = {  # model, export shape, dynamic axes, the two sizes run
    "basic_block": (BasicBlock, (2, 8, 16, 16), IMAGE, [(2, 8, 16, 16), (3, 8, 16, 16)]),
    "inverted_residual": (InvertedResidual, (2, 16, 8, 8), IMAGE, [(2, 16, 8, 8), (1, 16, 8, 8)]),
    "bert_layer": ("BertLayer", (1, 7, 32), SEQ, [(1, 7, 32), (2, 12, 32)]),
    "gpt2_block": ("GPT2Block", (1, 7, 32), SEQ, [(1, 7, 32), (2, 12, 32)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_exported_model_matches_onnxruntime_at_two_sizes(name: str) -> None:
    torch.manual_seed(0)
    make, shape, axes, sizes = CASES[name]
    net = getattr(_torch_models(), make)() if isinstance(make, str) else make()
    _randomize_norms(net)
    net.eval()
    model = _export(net, shape, axes)
    mod, params = from_onnx(model)
    assert {v.name for v in mod["forward"].shape_vars()} == set(axes.values())
    exe = tc.compile(mod, params=params)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for i, size in enumerate(sizes):
        x = np.random.default_rng(i).standard_normal(size).astype(np.float32)
        want = sess.run(None, {"x": x})[0]
        got = exe(x)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        with torch.no_grad():
            eager = net(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(got, eager, rtol=1e-4, atol=1e-5)
