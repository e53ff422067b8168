"""DispatchLibrary: GEMMs of nn models go to BLAS as extern calls, epilogues stay our kernels."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft.dispatch import DispatchLibrary, dispatched_functions
from tilecraft.frontend import nn
from tilecraft.graph import CallExtern, CallTIR, get_pipeline
from tilecraft.ir import PrimFunc, scheduled_by

pytest.importorskip("scipy_openblas32")

TARGET = tc.Target("x86-64-v2 -num-cores=2")


def _load_example() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "examples" / "quickstart_model.py"
    spec = importlib.util.spec_from_file_location("quickstart_model_dispatch", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXAMPLE = _load_example()


class MLP(nn.Module):
    """The MetaSchedule tutorial's model: Linear (bias), ReLU, Linear (no bias)."""

    def __init__(self, k: int = 48, h: int = 32, o: int = 10) -> None:
        self.fc1 = nn.Linear(k, h)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(h, o, bias=False)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.fc2(self.relu(self.fc1(x)))


def _rules(mod: tc.IRModule) -> tc.IRModule:
    return dl.ApplyDefaultSchedule(*dl.cpu.default_rules())(mod)


def _lowered(mod: tc.IRModule, params: dict[str, np.ndarray] | None = None) -> tc.IRModule:
    with TARGET:
        return get_pipeline("default", params=params)(mod)


def _externs(mod: tc.IRModule) -> list[CallExtern]:
    return [b.value for b in mod["forward"].bindings if isinstance(b.value, CallExtern)]


def _call_tirs(mod: tc.IRModule) -> list[str]:
    return [b.value.func for b in mod["forward"].bindings if isinstance(b.value, CallTIR)]


def _mlp_ref(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    h = np.maximum(x.astype(np.float64) @ p["fc1.weight"].T + p["fc1.bias"], 0)
    return h @ p["fc2.weight"].T


@pytest.mark.parametrize("bound", [True, False])
def test_tutorial_model_matches_numpy_with_its_matmuls_in_blas(bound: bool) -> None:
    model = EXAMPLE.DemoModel()
    rng = np.random.default_rng(3)
    state = {
        n: (rng.standard_normal(p.param_shape) * 0.1).astype(p.param_dtype)
        for n, p in model.named_parameters()
    }
    model.load_state_dict(state)
    mod, params = model.export({"forward": {"x": nn.spec.Tensor((2, 768), "float32")}})
    with TARGET:
        mod = _rules(DispatchLibrary()(_lowered(mod, params if bound else None)))
    externs = _externs(mod)
    assert [e.func for e in externs] == ["blas.gemm", "blas.gemm"]  # fc1 and fc2
    # unbound weights are read as (out, in): the transposed layout, no transpose kernel
    assert all(e.attrs["trans_b"] is (not bound) for e in externs)
    exe = tc.build(mod, TARGET)
    x = rng.standard_normal((2, 768)).astype("float32")
    out = exe(x) if bound else exe(x, *params.values())
    np.testing.assert_allclose(out, EXAMPLE.reference(x, params), rtol=1e-4, atol=1e-4)


def test_linear_bias_relu_splits_into_blas_and_an_epilogue_kernel() -> None:
    model = MLP()
    mod, params = model.export({"forward": {"x": nn.spec.Tensor((5, 48), "float32")}})
    with TARGET:
        before = _lowered(mod, params)
        pass_ = DispatchLibrary()
        after = pass_(before)
    fused = [n for n in _call_tirs(before) if "add" in n]
    assert len(fused) == 1  # fc1 + bias + relu, one fused kernel
    assert sorted(pass_.report.dispatched) == sorted(_call_tirs(before))
    # the graph: gemm -> epilogue kernel -> gemm
    kinds = [type(b.value).__name__ for b in after["forward"].bindings if b.value.args]
    assert kinds == ["CallExtern", "CallTIR", "CallExtern"]
    epilogue = after[_call_tirs(after)[0]]
    assert isinstance(epilogue, PrimFunc)
    assert scheduled_by(epilogue) is None  # ours, left for the rules
    assert [p.name for p in epilogue.params][1:] == ["fc1_bias", "relu"]
    blocks = epilogue.script()
    assert "T.axis.reduce" not in blocks
    assert "T_add" in blocks
    assert "T_relu" in blocks
    # the replaced functions stay, marked, and are not compiled
    assert sorted(dispatched_functions(after)) == sorted(_call_tirs(before))
    assert all(scheduled_by(after[n]) == "dispatch:blas" for n in dispatched_functions(after))
    with TARGET:
        exe = tc.build(_rules(after), TARGET)
    assert set(exe.lib.function_names) == {epilogue.name}
    x = np.random.default_rng(0).standard_normal((5, 48)).astype("float32")
    np.testing.assert_allclose(exe(x), _mlp_ref(x, params), rtol=1e-4, atol=1e-4)


def test_symbolic_batch_runs_at_two_sizes() -> None:
    model = MLP()
    mod, params = model.export({"forward": {"x": nn.spec.Tensor(("n", 48), "float32")}})
    with TARGET:
        mod = _rules(DispatchLibrary()(_lowered(mod, params)))
    assert len(_externs(mod)) == 2
    exe = tc.build(mod, TARGET)
    for n in (1, 37):
        x = np.random.default_rng(n).standard_normal((n, 48)).astype("float32")
        np.testing.assert_allclose(exe(x), _mlp_ref(x, params), rtol=1e-4, atol=1e-4)


class Attention(nn.Module):
    """Batched matmuls with a symbolic sequence length: scores = q @ k^T, out = p @ v."""

    def forward(self, q: nn.Tensor, k: nn.Tensor, v: nn.Tensor) -> nn.Tensor:
        return (q @ k) @ v


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batched_matmul_with_symbolic_sequence(dtype: str) -> None:
    spec = {
        "q": nn.spec.Tensor((3, "s", 8), dtype),
        "k": nn.spec.Tensor((3, 8, "s"), dtype),
        "v": nn.spec.Tensor((3, "s", 5), dtype),
    }
    mod, _ = Attention().export({"forward": spec})
    with TARGET:
        mod = _rules(DispatchLibrary()(_lowered(mod)))
    assert len(_externs(mod)) == 2
    assert _call_tirs(mod) == []
    exe = tc.build(mod, TARGET)
    for s in (4, 9):
        rng = np.random.default_rng(s)
        shapes = ((3, s, 8), (3, 8, s), (3, s, 5))
        q, k, v = (rng.standard_normal(sh).astype(dtype) for sh in shapes)
        tol = 1e-4 if dtype == "float32" else 1e-12
        np.testing.assert_allclose(exe(q, k, v), (q @ k) @ v, rtol=tol, atol=tol)


def test_rank3_input_against_a_shared_weight() -> None:
    spec = {"x": nn.spec.Tensor((2, "s", 6), "float32"), "w": nn.spec.Tensor((6, 4), "float32")}

    class M(nn.Module):
        def forward(self, x: nn.Tensor, w: nn.Tensor) -> nn.Tensor:
            return x @ w

    mod, _ = M().export({"forward": spec})
    with TARGET:
        mod = DispatchLibrary()(_lowered(mod))
    exe = tc.build(mod, TARGET)
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 3, 6)).astype("float32"), rng.standard_normal((6, 4))
    w = w.astype("float32")
    np.testing.assert_allclose(exe(x, w), x @ w, rtol=1e-5, atol=1e-5)


def test_order_with_the_rules_decides_who_owns_a_function() -> None:
    mod, params = MLP().export({"forward": {"x": nn.spec.Tensor((4, 48), "float32")}})
    lowered = _lowered(mod, params)
    with TARGET:
        rules_first = DispatchLibrary()(_rules(lowered))
        dispatch_first = _rules(DispatchLibrary()(lowered))
        twice = DispatchLibrary()(dispatch_first)
    # rules first schedule every kernel: dispatch finds nothing unscheduled and changes nothing
    assert _externs(rules_first) == []
    assert all(scheduled_by(f).startswith("rule:") for _, f in rules_first.prim_funcs())
    # dispatch first takes the GEMMs; the rules schedule only the epilogue, not marked ones
    assert len(_externs(dispatch_first)) == 2
    for name, f in dispatch_first.prim_funcs():
        by = scheduled_by(f)
        assert by == ("dispatch:blas" if name in dispatched_functions(dispatch_first) else by)
        assert by is not None
    assert twice is dispatch_first  # idempotent: nothing left to take
    x = np.random.default_rng(2).standard_normal((4, 48)).astype("float32")
    for m in (rules_first, dispatch_first):
        np.testing.assert_allclose(
            tc.build(m, TARGET)(x), _mlp_ref(x, params), rtol=1e-4, atol=1e-4
        )


def test_non_gemm_functions_are_declined_with_a_reason() -> None:
    class M(nn.Module):
        def forward(self, x: nn.Tensor) -> nn.Tensor:
            return nn.functional.softmax(x, axis=-1)

    mod, _ = M().export({"forward": {"x": nn.spec.Tensor((4, 8), "float32")}})
    with TARGET:
        lowered = _lowered(mod)
        pass_ = DispatchLibrary()
        out = pass_(lowered)
    assert out is lowered
    assert pass_.report.dispatched == []
    assert pass_.report.declined
    assert all(pass_.report.declined.values())


def test_dispatch_refuses_a_gpu_target_and_unknown_libraries() -> None:
    with pytest.raises(tc.errors.TilecraftError, match="unknown library 'mkl'"):
        DispatchLibrary("mkl")
    mod, _ = MLP().export({"forward": {"x": nn.spec.Tensor((4, 48), "float32")}})
    lowered = _lowered(mod)
    with tc.Target("cuda -arch=sm_90"), pytest.raises(tc.errors.TilecraftError, match="CPU"):
        DispatchLibrary()(lowered)
