"""Modules exported with torch.onnx.export (the offline TorchScript exporter) import and match."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import tilecraft as tc  # noqa: E402
from tilecraft.frontend.onnx import from_onnx  # noqa: E402


def _export(module, x, dynamic_axes):  # type: ignore[no-untyped-def]
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            (x,),
            buf,
            dynamo=False,
            input_names=["x"],
            output_names=["y"],
            dynamic_axes={"x": dynamic_axes},
            opset_version=17,
        )
    return onnx.load_from_string(buf.getvalue())


class _ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.dw = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8)
        self.ln = torch.nn.LayerNorm(8)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):  # type: ignore[no-untyped-def]
        h = torch.relu(self.bn(self.conv(x)))
        h = torch.nn.functional.max_pool2d(torch.nn.functional.relu6(self.dw(h)), 2)
        h = torch.nn.functional.gelu(self.ln(h.mean(dim=(2, 3))))
        return torch.softmax(self.fc(h), -1)


class _Attention(torch.nn.Module):
    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.o = torch.nn.Linear(d, d)
        self.ln = torch.nn.LayerNorm(d)
        self.register_buffer("pos", torch.randn(64, d))

    def forward(self, x):  # type: ignore[no-untyped-def]
        b, n, d = x.shape
        x = x + self.pos[:n]
        q, k, v = (
            t.view(b, n, self.heads, d // self.heads).transpose(1, 2)
            for t in self.qkv(self.ln(x)).split(d, dim=-1)
        )
        a = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, -1) @ v
        return x + self.o(a.transpose(1, 2).reshape(b, n, d))


def test_exported_conv_net_dynamic_batch() -> None:
    torch.manual_seed(0)
    net = _ConvNet().eval()
    with torch.no_grad():
        net.bn.running_mean.uniform_(-1, 1)
        net.bn.running_var.uniform_(0.5, 2)
    model = _export(net, torch.randn(2, 3, 16, 16), {0: "batch"})
    mod, params = from_onnx(model)
    exe = tc.compile(mod, params=params)
    for batch in (2, 3):
        x = torch.randn(batch, 3, 16, 16)
        with torch.no_grad():
            want = net(x).numpy()
        np.testing.assert_allclose(exe(x.numpy()), want, rtol=1e-4, atol=1e-6)


def test_exported_attention_dynamic_sequence() -> None:
    torch.manual_seed(0)
    net = _Attention().eval()
    model = _export(net, torch.randn(1, 7, 32), {1: "seq"})
    mod, params = from_onnx(model)
    assert [v.name for v in mod["forward"].shape_vars()] == ["seq"]
    exe = tc.compile(mod, params=params)
    for seq in (7, 12):
        x = torch.randn(1, seq, 32)
        with torch.no_grad():
            want = net(x).numpy()
        np.testing.assert_allclose(exe(x.numpy()), want, rtol=1e-4, atol=1e-5)
