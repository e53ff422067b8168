"""The plain C entry of an exported library: a C program runs the model without Python.

The tutorial model (bound weights), a symbolic-batch MLP at two batch sizes and the ``prefill``
entry of a small Llama-style layer (symbolic sequence length) are exported, unpacked with
:func:`tilecraft.runtime.export.extract_c` (the header) or plain ``unzip`` semantics, and run
by ``data/run_exported.c`` compiled with gcc against the header and ``dlopen``-ing the
library; its outputs match the executable's and numpy's. A model whose GEMMs go to BLAS
(``DispatchLibrary``) has no plain C entry: ``require_c_entry`` refuses to export it and
``write_c_header`` says why.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from models import llama

import tilecraft as tc
from tilecraft.frontend import nn
from tilecraft.runtime import ExportError
from tilecraft.runtime.export import extract_c, write_c_header

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).parent / "data" / "run_exported.c"
GCC = shutil.which("gcc") or shutil.which("cc")
pytestmark = pytest.mark.skipif(GCC is None, reason="needs a C compiler for the C program")


def _quickstart() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "quickstart_model", ROOT / "examples" / "quickstart_model.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class MLP(nn.Module):
    """Linear 16->32, ReLU, Linear 32->8 over a symbolic batch."""

    def __init__(self) -> None:
        self.fc1 = nn.Linear(16, 32)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(32, 8)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        """fc2(relu(fc1(x)))."""
        return self.fc2(self.relu(self.fc1(x)))


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The C program, compiled against a header written by an export (any: it is generic)."""
    mod, params = MLP().export({"forward": {"x": nn.spec.Tensor(("batch", 16), "float32")}})
    exe = tc.compile(mod, target="cpu", params=params)
    out = tmp_path_factory.mktemp("driver")
    lib = exe.export_library(out / "mlp.tc")
    header = write_c_header(lib, out / "include" / "tilecraft_model.h")
    binary = out / "run_exported"
    cmd = [GCC, "-std=c11", "-O1", "-Wall", "-Werror", f"-I{header.parent}", str(DRIVER),
           "-o", str(binary), "-ldl"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return binary


def run_from_c(
    driver: Path, unpacked: Path, func: str, inputs: list[np.ndarray], out_ndim: int
) -> tuple[np.ndarray, str]:
    """Run ``func`` of the unpacked library from C; (raw float32 output, the program's line)."""
    args = [str(driver), str(unpacked), func, str(out_ndim), str(unpacked / "y.bin")]
    for i, x in enumerate(inputs):
        path = unpacked / f"x{i}.bin"
        np.ascontiguousarray(x, np.float32).tofile(path)
        args += [str(path), ",".join(str(d) for d in x.shape)]
    done = subprocess.run(args, capture_output=True, text=True, env={"PATH": ""})
    assert done.returncode == 0, done.stderr
    return np.fromfile(unpacked / "y.bin", np.float32), done.stdout.strip()


def test_tutorial_model_runs_from_c(driver: Path, tmp_path: Path) -> None:
    quickstart = _quickstart()
    mod, params = quickstart.DemoModel().export(
        {"forward": {"x": nn.spec.Tensor((1, 768), "float32")}}, seed=3
    )
    exe = tc.compile(mod, target="cpu", params=params)
    path = exe.export_library(tmp_path / "demo.tc", require_c_entry=True)
    unpacked = extract_c(path, tmp_path / "demo")
    x = np.random.default_rng(0).standard_normal((1, 768)).astype(np.float32)
    raw, line = run_from_c(driver, unpacked, "forward", [x], 2)
    assert line.split()[:2] == ["before_weights", "-5"]  # TC_ERR_WEIGHTS before loading
    assert line.endswith("shape 1 256")
    out = raw.reshape(1, 256)
    np.testing.assert_array_equal(out, exe["forward"](x))
    np.testing.assert_allclose(out, quickstart.reference(x, params), rtol=1e-4, atol=1e-4)


def test_symbolic_batch_model_runs_from_c_at_two_sizes(driver: Path, tmp_path: Path) -> None:
    model = MLP()
    mod, params = model.export({"forward": {"x": nn.spec.Tensor(("batch", 16), "float32")}})
    exe = tc.compile(mod, target="cpu", params=params)
    path = exe.export_library(tmp_path / "mlp.tc")
    unpacked = tmp_path / "mlp"
    with zipfile.ZipFile(path) as zf:  # a plain unzip is enough
        zf.extractall(unpacked)
    rng = np.random.default_rng(1)
    workspaces = []
    for batch in (3, 17):
        x = rng.standard_normal((batch, 16)).astype(np.float32)
        raw, line = run_from_c(driver, unpacked, "forward", [x], 2)
        assert line.endswith(f"shape {batch} 8")
        workspaces.append(int(line.split()[3]))
        out = raw.reshape(batch, 8)
        np.testing.assert_array_equal(out, exe["forward"](x))
        h = np.maximum(x.astype(np.float64) @ params["fc1.weight"].T + params["fc1.bias"], 0)
        ref = h @ params["fc2.weight"].T + params["fc2.bias"]
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    assert workspaces == [-(-b * 32 * 4 // 64) * 64 for b in (3, 17)]  # the hidden layer


def test_llama_layer_prefill_runs_from_c(driver: Path, tmp_path: Path) -> None:
    cfg = llama.SMALL
    _, mod, params = llama.export_layer(cfg, seed=0, entries=("prefill",))
    exe = tc.compile(mod, target="cpu", params=params)
    path = exe.export_library(tmp_path / "llama.tc", require_c_entry=True)
    unpacked = extract_c(path, tmp_path / "llama")
    header = (unpacked / "include" / "tilecraft_model.h").read_text()
    assert "int tc_prefill(const tc_tensor* inputs" in header
    assert f"float32[1, seq, {cfg.hidden}]" in header
    loaded = tc.runtime.load_module(path)  # a 0-d constant (the rms eps) keeps its shape
    shapes = [c.shape for c in exe["prefill"].program.constants]
    assert () in shapes
    assert [c.shape for c in loaded["prefill"].program.constants] == shapes
    for seq in (cfg.prefill, 2):
        (x,) = llama.example_inputs(cfg, "prefill", seed=seq, tokens=seq)
        raw, line = run_from_c(driver, unpacked, "prefill", [x], 3)
        assert line.endswith(f"shape 1 {seq} {cfg.out_width}")
        out = raw.reshape(1, seq, cfg.out_width)
        np.testing.assert_allclose(out, exe["prefill"](x), rtol=1e-5, atol=1e-5)
        ref = llama.np_layer(x, params, cfg)
        np.testing.assert_allclose(out, ref, rtol=2e-3, atol=2e-3)


def test_manifest_names_the_c_entry(tmp_path: Path) -> None:
    mod, params = MLP().export({"forward": {"x": nn.spec.Tensor((2, 16), "float32")}})
    path = tc.compile(mod, target="cpu", params=params).export_library(tmp_path / "m.tc")
    with zipfile.ZipFile(path) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        header = zf.read(manifest["c_header"]).decode()
    (f,) = manifest["functions"]
    assert f["c_entry"] == {"symbol": "tc_forward", "workspace_size": "tc_forward_workspace_size",
                            "output_shape": "tc_forward_output_shape"}  # fmt: skip
    assert f["c_refused"] is None
    assert manifest["c_header"] == "include/tilecraft_model.h"
    assert "typedef struct tc_tensor" in header
    assert "int tc_load_weights(const char* dir);" in header
    assert header == write_c_header(path, tmp_path / "h.h").read_text()


def test_blas_steps_have_no_c_entry(tmp_path: Path) -> None:
    pytest.importorskip("scipy_openblas32")
    from tilecraft import rules as dl
    from tilecraft.dispatch import DispatchLibrary
    from tilecraft.graph import get_pipeline

    mod, params = MLP().export({"forward": {"x": nn.spec.Tensor((4, 16), "float32")}})
    target = tc.Target("cpu")
    with target:
        mod = DispatchLibrary()(get_pipeline("default", params=params)(mod))
        mod = dl.ApplyDefaultSchedule(*dl.cpu.default_rules())(mod)
    exe = tc.build(mod, target)
    assert exe["forward"].program.has_extern_steps
    with pytest.raises(ExportError, match=r"no plain C entry for graph function forward: .*blas"):
        exe.export_library(tmp_path / "refused.tc", require_c_entry=True)
    assert not (tmp_path / "refused.tc").exists()
    path = exe.export_library(tmp_path / "blas.tc")  # still loads from Python
    x = np.ones((4, 16), np.float32)
    np.testing.assert_array_equal(tc.runtime.load_module(path)["forward"](x), exe["forward"](x))
    with pytest.raises(ExportError, match=r"no plain C entry \(forward: .*DispatchLibrary"):
        write_c_header(path, tmp_path / "h.h")


def test_header_compiles_as_cxx_and_documents_the_layout(tmp_path: Path, driver: Any) -> None:
    header = driver.parent / "include" / "tilecraft_model.h"
    text = header.read_text()
    for word in ("tc_load_weights", "workspace", "TC_ERR_WEIGHTS", "offset 0", "24 bytes"):
        assert word in text
    probe = tmp_path / "probe.c"
    probe.write_text(
        '#include <stddef.h>\n#include "tilecraft_model.h"\n'
        '_Static_assert(sizeof(tc_tensor) == 24, "size");\n'
        '_Static_assert(offsetof(tc_tensor, shape) == 8, "shape");\n'
        '_Static_assert(offsetof(tc_tensor, ndim) == 16, "ndim");\n'
        '_Static_assert(offsetof(tc_tensor, dtype) == 20, "dtype");\n'
    )
    cmd = [str(GCC), "-std=c11", "-Wall", "-Werror", "-c", f"-I{header.parent}", str(probe),
           "-o", str(tmp_path / "probe.o")]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
