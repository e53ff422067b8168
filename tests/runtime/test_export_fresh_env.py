"""An exported library runs in a fresh virtual environment holding only numpy and tilecraft.

The environment is made offline and in well under a second: ``python -m venv --without-pip``,
then numpy (with its bundled libraries) and the ``tilecraft`` package linked into its
site-packages, which is what ``pip install --no-deps -e .`` plus numpy's wheel give, without
a network or a build backend. The test checks that the environment cannot import torch,
onnx, onnxruntime, rich or click (so nothing the runtime needs comes from the outer
environment), then loads the exported libraries of the tutorial model and of a small
Llama-style layer there with no C compiler on ``PATH`` and compares their outputs with the
executables they came from and with numpy; both entries of the Llama-style layer run there as
well (the TinyLlama-1.1B sizes under the ``slow`` marker).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from models import llama

import tilecraft as tc
from tilecraft.frontend import nn

ROOT = Path(__file__).resolve().parents[2]
FOREIGN = ("torch", "onnx", "onnxruntime", "rich", "click", "scipy_openblas32", "xgboost")


def _quickstart() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "quickstart_model", ROOT / "examples" / "quickstart_model.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_venv(where: Path) -> Path:
    """A venv whose site-packages holds numpy and tilecraft only; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    numpy_dir = Path(np.__file__).parent
    links = [numpy_dir, ROOT / "tilecraft"]
    links += [p for p in numpy_dir.parent.glob("numpy*") if p.name != "numpy"]  # libs, metadata
    for src in links:
        os.symlink(src, Path(site) / src.name)
    return python


SCRIPT = """
import importlib.util, sys
import numpy as np
for name in {foreign!r}:
    assert importlib.util.find_spec(name) is None, name + " is importable"
import tilecraft as tc
assert tc.__file__.startswith({site!r}), tc.__file__
for name, inputs in {cases!r}:
    exe = tc.runtime.load_module(f"{{name}}.tc")
    fn = next(iter(exe.functions.values()))
    assert fn.native is not None
    args = [np.load(p) for p in inputs]
    np.save(f"{{name}}.out.npy", fn(*args))
loaded = [m for m in sys.modules if m.split(".")[0] in {foreign!r}]
assert not loaded, loaded
"""


def test_exported_libraries_run_in_a_venv_with_only_numpy_and_tilecraft(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    rng = np.random.default_rng(0)
    quickstart = _quickstart()
    mod, demo_params = quickstart.DemoModel().export(
        {"forward": {"x": nn.spec.Tensor((1, 768), "float32")}}, seed=3
    )
    demo = tc.compile(mod, target="cpu", params=demo_params)
    demo.export_library(tmp_path / "demo.tc")
    x = rng.standard_normal((1, 768)).astype(np.float32)
    np.save(tmp_path / "demo.x.npy", x)
    cfg = llama.SMALL
    _, lmod, lparams = llama.export_layer(cfg, seed=0, entries=("prefill",))
    layer = tc.compile(lmod, target="cpu", params=lparams)
    layer.export_library(tmp_path / "llama.tc")
    (tokens,) = llama.example_inputs(cfg, "prefill", seed=1)
    np.save(tmp_path / "llama.x.npy", tokens)

    no_cc = tmp_path / "bin"
    no_cc.mkdir()
    cases = [("demo", ["demo.x.npy"]), ("llama", ["llama.x.npy"])]
    script = SCRIPT.format(foreign=FOREIGN, site=str(tmp_path / "venv"), cases=cases)
    env = {"PATH": str(no_cc), "HOME": str(tmp_path), "TILECRAFT_CACHE_DIR": str(tmp_path / "c")}
    done = subprocess.run(
        [str(python), "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr

    out = np.load(tmp_path / "demo.out.npy")
    np.testing.assert_array_equal(out, demo["forward"](x))
    np.testing.assert_allclose(out, quickstart.reference(x, demo_params), rtol=1e-4, atol=1e-4)
    out = np.load(tmp_path / "llama.out.npy")
    np.testing.assert_array_equal(out, layer["prefill"](tokens))
    np.testing.assert_allclose(out, llama.np_layer(tokens, lparams, cfg), rtol=2e-3, atol=2e-3)


LLAMA_SCRIPT = """
import numpy as np
import tilecraft as tc
assert tc.__file__.startswith({site!r}), tc.__file__
exe = tc.runtime.load_module("layer.tc")
for entry, n in {cases!r}:
    fn = exe[entry]
    assert fn.native is not None
    args = [np.load(f"{{entry}}.{{i}}.npy") for i in range(n)]
    np.save(f"{{entry}}.out.npy", fn(*args))
"""


@pytest.mark.parametrize(
    ("config", "tokens"), [("SMALL", 3), pytest.param("TINYLLAMA", 8, marks=pytest.mark.slow)]
)
def test_llama_layer_runs_in_a_venv_without_a_compiler(
    tmp_path: Path, config: str, tokens: int
) -> None:
    """Both entries of the layer (TinyLlama-1.1B sizes under ``slow``) from one library."""
    python = make_venv(tmp_path / "venv")
    cfg = getattr(llama, config)
    _, mod, params = llama.export_layer(cfg, seed=0)
    exe = tc.compile(mod, target="cpu", params=params)
    exe.export_library(tmp_path / "layer.tc")
    inputs = {
        "prefill": llama.example_inputs(cfg, "prefill", seed=1, tokens=tokens),
        "decode": llama.example_inputs(cfg, "decode", seed=2),
    }
    for entry, arrays in inputs.items():
        for i, a in enumerate(arrays):
            np.save(tmp_path / f"{entry}.{i}.npy", a)
    no_cc = tmp_path / "bin"
    no_cc.mkdir()
    cases = [(entry, len(arrays)) for entry, arrays in inputs.items()]
    script = LLAMA_SCRIPT.format(site=str(tmp_path / "venv"), cases=cases)
    env = {"PATH": str(no_cc), "HOME": str(tmp_path), "TILECRAFT_CACHE_DIR": str(tmp_path / "c")}
    done = subprocess.run(
        [str(python), "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    for entry, arrays in inputs.items():
        out = np.load(tmp_path / f"{entry}.out.npy")
        np.testing.assert_array_equal(out, exe[entry](*arrays))
        ref = llama.reference_for(cfg, entry)(arrays, params)
        np.testing.assert_allclose(out, ref, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("name", ["torch", "rich"])
def test_the_venv_really_lacks_the_outer_packages(tmp_path: Path, name: str) -> None:
    python = make_venv(tmp_path / "venv")
    assert importlib.util.find_spec(name) is not None  # present outside
    done = subprocess.run([str(python), "-c", f"import {name}"], capture_output=True, text=True)
    assert done.returncode != 0
    assert "ModuleNotFoundError" in done.stderr
