"""call_extern bindings: script, JSON, structural hash, lowered programs, export, errors."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.dispatch import DispatchLibrary, ExternLibraryError
from tilecraft.frontend import nn
from tilecraft.graph import CallExtern, GraphError, TensorType, TensorVar, get_pipeline
from tilecraft.graph.build import lower_graph_function
from tilecraft.graph.script import parse
from tilecraft.lower.graph_program_json import program_from_json, program_to_json
from tilecraft.runtime.executor import extern

TARGET = tc.Target("x86-64-v2 -num-cores=2")

SCRIPT = """
@R.function
def forward(a: R.Tensor(("n", 8), "float32"), w: R.Tensor((4, 8), "float32")) -> R.Tensor(("n", 4), "float32"):
    with R.dataflow():
        y = R.call_extern('blas.gemm', (a, w), out_sinfo=R.Tensor(("n", 4), "float32"), trans_a=False, trans_b=True)
        R.output(y)
    return y
"""  # noqa: E501


def test_script_json_and_structural_hash_round_trip() -> None:
    func = parse(SCRIPT)
    assert func.script().strip() == SCRIPT.strip()
    again = tc.ir.from_json(tc.ir.to_json(func))
    assert tc.ir.structural_equal(again, func)
    assert tc.ir.structural_hash(again) == tc.ir.structural_hash(func)
    # the attributes and the routine are part of the meaning
    other = parse(SCRIPT.replace("trans_b=True", "trans_b=False"))
    assert tc.ir.structural_hash(other) != tc.ir.structural_hash(func)
    assert not tc.ir.structural_equal(other, func)


def test_call_extern_rejects_bad_routine_names_and_arguments() -> None:
    t = TensorType((2, 2), "float32")
    with pytest.raises(tc.errors.IRError, match=r"<library>\.<routine>"):
        CallExtern("gemm", (), t)
    with pytest.raises(tc.errors.IRError, match="TensorVars"):
        CallExtern("blas.gemm", ("a",), t)  # type: ignore[arg-type]
    with pytest.raises(tc.errors.ScriptParseError, match="call_extern"):
        parse(SCRIPT.replace("out_sinfo=", "sinfo="))


def test_lowered_program_keeps_extern_steps_through_json() -> None:
    program = lower_graph_function(parse(SCRIPT))
    (step,) = program.steps
    assert step.is_extern
    assert step.func == "blas.gemm"
    assert step.extern == (("trans_a", False), ("trans_b", True))
    back = program_from_json(program_to_json(program), [])
    assert back.steps == program.steps


def test_build_refuses_an_unknown_routine() -> None:
    func = parse(SCRIPT.replace("'blas.gemm'", "'blas.syrk'"))
    with pytest.raises(
        GraphError, match=r"unknown; known routines: \['blas.gemm', 'cublas.gemm'\]"
    ):
        tc.build(tc.IRModule({"forward": func}), TARGET)


def _model_module() -> tuple[tc.IRModule, dict[str, np.ndarray]]:
    class M(nn.Module):
        def __init__(self) -> None:
            self.fc = nn.Linear(16, 8)

        def forward(self, x: nn.Tensor) -> nn.Tensor:
            return nn.functional.gelu(self.fc(x))

    mod, params = M().export({"forward": {"x": nn.spec.Tensor(("n", 16), "float32")}})
    with TARGET:
        mod = get_pipeline("default", params=params)(mod)
    return mod, params


def test_module_with_extern_calls_round_trips_as_script_and_json() -> None:
    pytest.importorskip("scipy_openblas32")
    mod, _ = _model_module()
    with TARGET:
        mod = DispatchLibrary()(mod)
    text = mod.script()
    assert "R.call_extern('blas.gemm'" in text
    for again in (parse(text), tc.ir.from_json(tc.ir.to_json(mod))):
        assert tc.ir.structural_equal(again, mod)
        assert tc.ir.structural_hash(again) == tc.ir.structural_hash(mod)


def test_exported_library_with_extern_steps_loads_and_runs(tmp_path: Path) -> None:
    pytest.importorskip("scipy_openblas32")
    mod, params = _model_module()
    with TARGET:
        mod = tc.rules.ApplyDefaultSchedule(*tc.rules.cpu.default_rules())(DispatchLibrary()(mod))
    exe = tc.build(mod, TARGET)
    assert exe["forward"].native is None  # extern steps run through the Python executor
    x = np.random.default_rng(0).standard_normal((3, 16)).astype("float32")
    want = exe(x)
    h = x.astype(np.float64) @ params["fc.weight"].T + params["fc.bias"]
    ref = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))
    np.testing.assert_allclose(want, ref, rtol=1e-3, atol=1e-3)
    loaded = tc.runtime.load_module(exe.export_library(tmp_path / "m.tc"))
    np.testing.assert_array_equal(loaded(x), want)


def test_missing_library_is_an_error_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = importlib.import_module

    def no_blas(name: str, *args: Any) -> Any:
        if name == extern.BLAS_WHEEL:
            raise ModuleNotFoundError(f"No module named {name!r}")
        return real_import(name, *args)

    monkeypatch.setattr(extern, "_blas", None)
    monkeypatch.setattr(extern.importlib, "import_module", no_blas)
    mod, _ = _model_module()
    with TARGET, pytest.raises(ExternLibraryError, match=r"pip install 'tilecraft\[blas\]'"):
        DispatchLibrary()(mod)
    assert isinstance(ExternLibraryError("x"), tc.errors.TilecraftError)
    # building a graph that calls BLAS is refused the same way, not with a crash
    with pytest.raises(ExternLibraryError, match="scipy-openblas32"):
        tc.build(tc.IRModule({"forward": parse(SCRIPT)}), TARGET)


@pytest.mark.parametrize(
    ("trans_a", "trans_b", "a_shape", "b_shape"),
    [
        (False, False, (3, 5, 7), (7, 4)),  # batch folds into M
        (True, False, (3, 7, 5), (7, 4)),  # transposed A: a loop of calls
        (False, True, (3, 5, 7), (3, 4, 7)),  # strided batch
        (True, True, (7, 5), (3, 4, 7)),  # only B batched: a loop
        (False, False, (5, 0), (0, 4)),  # K = 0: zeros
    ],
)
def test_blas_gemm_layouts(
    trans_a: bool, trans_b: bool, a_shape: tuple[int, ...], b_shape: tuple[int, ...]
) -> None:
    pytest.importorskip("scipy_openblas32")
    rng = np.random.default_rng(0)
    a = rng.standard_normal(a_shape).astype("float32")
    b = rng.standard_normal(b_shape).astype("float32")
    at = np.swapaxes(a, -1, -2) if trans_a else a
    bt = np.swapaxes(b, -1, -2) if trans_b else b
    want = at @ bt
    out = np.full(want.shape, np.nan, "float32")
    extern.blas_gemm(a, b, out, trans_a, trans_b)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_tensor_var_of_extern_result_is_typed() -> None:
    t = TensorType((2, 3), "float32")
    v = TensorVar("y", t)
    call = CallExtern("blas.gemm", (v, v), t, {"trans_b": True})
    assert call.attrs["trans_b"] is True
    assert call.out_type is t
