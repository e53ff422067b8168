"""End to end: nn models export, go through the "zero" pipeline, build and match numpy."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.frontend import nn
from tilecraft.graph import get_pipeline


def _load_example() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "examples" / "quickstart_model.py"
    spec = importlib.util.spec_from_file_location("quickstart_model", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# the tutorial's model and its numpy implementation, as the quick-start example defines them
EXAMPLE = _load_example()
DemoModel = EXAMPLE.DemoModel
np_demo = EXAMPLE.reference


def random_state(model: nn.Module, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        n: (rng.standard_normal(p.param_shape) * 0.1).astype(p.param_dtype)
        for n, p in model.named_parameters()
    }


@pytest.fixture(scope="module")
def demo() -> tuple[tc.IRModule, tc.IRModule, dict[str, np.ndarray]]:
    model = DemoModel()
    model.load_state_dict(random_state(model, 3))
    mod, params = model.export({"forward": {"x": nn.spec.Tensor((1, 768), "float32")}})
    with tc.Target("cpu"):
        fused = get_pipeline("zero")(mod)
    return mod, fused, params


def test_tutorial_model_gives_the_tutorials_kernels(demo) -> None:
    mod, fused, params = demo
    assert sorted(n for n, _ in fused.prim_funcs()) == [
        "fused_matmul1_add1",
        "fused_matmul_add_relu",
        "layer_norm",
        "transpose",
        "transpose1",
    ]
    assert list(params) == [
        "fc1.weight",
        "fc1.bias",
        "norm.weight",
        "norm.bias",
        "fc2.weight",
        "fc2.bias",
    ]
    assert params["fc1.weight"].shape == (768, 768)
    assert params["fc2.weight"].shape == (256, 768)
    calls = [
        (b.var.name, b.value.func, [a.name for a in b.value.args])
        for b in fused["forward"].bindings
    ]
    assert calls == [
        ("permute_dims", "transpose", ["fc1_weight"]),
        ("relu", "fused_matmul_add_relu", ["x", "permute_dims", "fc1_bias"]),
        ("layer_norm", "layer_norm", ["relu", "norm_weight", "norm_bias"]),
        ("permute_dims1", "transpose1", ["fc2_weight"]),
        ("gv", "fused_matmul1_add1", ["layer_norm", "permute_dims1", "fc2_bias"]),
    ]
    # the pipeline left its input alone
    assert all(type(f).__name__ == "Function" for f in mod.functions.values())


def test_tutorial_model_matches_numpy(demo) -> None:
    _, fused, params = demo
    exe = tc.graph.build_graph_module(fused, "cpu")
    x = np.random.default_rng(0).standard_normal((1, 768)).astype("float32")
    out = exe["forward"](x, *params.values())
    np.testing.assert_allclose(out, np_demo(x, params), rtol=1e-4, atol=1e-4)
    prof = exe.profile("forward", x, *params.values())
    assert [n for n, _ in prof] == [
        "transpose",
        "fused_matmul_add_relu",
        "layer_norm",
        "transpose1",
        "fused_matmul1_add1",
    ]
    assert all(t > 0 for _, t in prof)


class MetaScheduleModel(nn.Module):
    """The MetaSchedule tutorial's model: Linear 784->256 (bias), ReLU, Linear 256->10."""

    def __init__(self) -> None:
        self.fc1 = nn.Linear(784, 256)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(256, 10, bias=False)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.fc2(self.relu(self.fc1(x)))


def test_tutorial_model_native_forward_equals_the_python_executor(demo) -> None:
    _, fused, params = demo
    x = np.random.default_rng(7).standard_normal((1, 768)).astype("float32")
    f = tc.graph.build_graph_module(fused, "cpu")["forward"]
    assert f.native is not None
    np.testing.assert_array_equal(f(x, *params.values()), f.run([x, *params.values()]))


@pytest.mark.parametrize("batch", [1, 64])
def test_metaschedule_model_native_forward_equals_the_python_executor(batch: int) -> None:
    model = MetaScheduleModel()
    mod, mparams = model.export({"forward": {"x": nn.spec.Tensor((batch, 784), "float32")}})
    g = tc.build(get_pipeline("zero")(mod), "cpu")["forward"]
    assert g.native is not None
    x = np.random.default_rng(batch).standard_normal((batch, 784)).astype("float32")
    out = g(x, *mparams.values())
    np.testing.assert_array_equal(out, g.run([x, *mparams.values()]))
    h = np.maximum(x.astype(np.float64) @ mparams["fc1.weight"].T + mparams["fc1.bias"], 0)
    np.testing.assert_allclose(out, h @ mparams["fc2.weight"].T, rtol=1e-4, atol=1e-4)


def test_default_initialisation_is_deterministic() -> None:
    spec = {"forward": {"x": nn.spec.Tensor((1, 768), "float32")}}
    _, p1 = DemoModel().export(spec, seed=5)
    _, p2 = DemoModel().export(spec, seed=5)
    _, p3 = DemoModel().export(spec, seed=6)
    assert all(np.array_equal(p1[k], p2[k]) for k in p1)
    assert not np.array_equal(p1["fc1.weight"], p3["fc1.weight"])
    np.testing.assert_array_equal(p1["norm.weight"], np.ones(768, "float32"))


def test_quickstart_example_runs_and_reports(capsys: pytest.CaptureFixture[str]) -> None:
    err = EXAMPLE.main(timing_s=0.05)
    text = capsys.readouterr().out
    assert err < 1e-4
    assert f"max abs error vs numpy: {err:.2e}" in text
    # the explain table: every kernel tc.compile built, the rule that took it, its share
    table = text[text.index("function ") : text.index("\ntotal")].splitlines()
    assert table[0].split() == ["function", "rule", "calls", "time", "(us)", "share"]
    rows = {ln.split()[0]: ln.split()[1:] for ln in table[2:] if not ln.startswith(" ")}
    assert {k: v[0] for k, v in rows.items()} == {
        "layer_norm": "GeneralReduction",
        "fused_matmul_add_relu": "GEMV",
        "fused_matmul1_add1": "GEMV",
    }
    shares = [float(v[-1].rstrip("%")) for v in rows.values()]
    assert sum(shares) == pytest.approx(100, abs=2)
    assert re.search(r"forward, batch 1: tilecraft [\d.]+ us, numpy [\d.]+ us; "
                     r"tilecraft / numpy = [\d.]+", text)  # fmt: skip
