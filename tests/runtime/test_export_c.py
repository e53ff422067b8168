"""The plain C entry of an exported library: a C program runs the model without Python.

The tutorial model (bound weights), a symbolic-batch MLP at two batch sizes and the ``prefill``
entry of a small Llama-style layer (symbolic sequence length) are exported, unpacked with
:func:`tilecraft.runtime.export.extract_c` (the header) or plain ``unzip`` semantics, and run
by ``data/run_exported.c`` compiled with gcc against the header and ``dlopen``-ing the
library; its outputs match the executable's and numpy's. A model whose GEMMs go to BLAS
(``DispatchLibrary``) runs from C too: the program sets the cblas routines with
``tc_set_extern`` (from the scipy-openblas32 wheel's library, ``dlopen``-ed); before that
the entry refuses with ``TC_ERR_EXTERN``.
"""

from __future__ import annotations

import ctypes
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
from tilecraft.runtime.export.library import C_HEADER

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
    driver: Path,
    unpacked: Path,
    func: str,
    inputs: list[np.ndarray],
    out_ndim: int,
    env: dict[str, str] | None = None,
) -> tuple[np.ndarray, str]:
    """Run ``func`` of the unpacked library from C; (raw float32 output, the program's line).

    ``env``: more environment variables (``TC_BLAS_LIB``, ``TC_BLAS_PREFIX``, ``TC_BLAS_PATH``,
    ``TILECRAFT_BLAS_LIBRARY``, ``LD_LIBRARY_PATH``)."""
    args = [str(driver), str(unpacked), func, str(out_ndim), str(unpacked / "y.bin")]
    for i, x in enumerate(inputs):
        path = unpacked / f"x{i}.bin"
        np.ascontiguousarray(x, np.float32).tofile(path)
        args += [str(path), ",".join(str(d) for d in x.shape)]
    done = subprocess.run(args, capture_output=True, text=True, env={"PATH": "", **(env or {})})
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


@pytest.mark.parametrize(
    ("config", "lengths"),
    [("SMALL", (5, 2)), pytest.param("TINYLLAMA", (8, 3), marks=pytest.mark.slow)],
)
def test_llama_layer_runs_from_c(
    driver: Path, tmp_path: Path, config: str, lengths: tuple[int, ...]
) -> None:
    """Both entries of the layer (TinyLlama-1.1B sizes under ``slow``), from one library."""
    cfg = getattr(llama, config)
    _, mod, params = llama.export_layer(cfg, seed=0)
    exe = tc.compile(mod, target="cpu", params=params)
    path = exe.export_library(tmp_path / "llama.tc", require_c_entry=True)
    unpacked = extract_c(path, tmp_path / "llama")
    header = (unpacked / "include" / "tilecraft_model.h").read_text()
    assert "int tc_prefill(const tc_tensor* inputs" in header
    assert "int tc_decode(const tc_tensor* inputs" in header
    assert f"float32[1, seq, {cfg.hidden}]" in header
    loaded = tc.runtime.load_module(path)  # a 0-d constant (the rms eps) keeps its shape
    shapes = [c.shape for c in exe["prefill"].program.constants]
    assert () in shapes
    assert [c.shape for c in loaded["prefill"].program.constants] == shapes
    cases = [("prefill", llama.example_inputs(cfg, "prefill", seed=n, tokens=n)) for n in lengths]
    cases.append(("decode", llama.example_inputs(cfg, "decode", seed=1)))
    for entry, inputs in cases:
        seq = inputs[0].shape[1]
        raw, line = run_from_c(driver, unpacked, entry, list(inputs), 3)
        assert line.endswith(f"shape 1 {seq} {cfg.out_width}")
        out = raw.reshape(1, seq, cfg.out_width)
        np.testing.assert_allclose(out, exe[entry](*inputs), rtol=1e-5, atol=1e-5)
        ref = llama.reference_for(cfg, entry)(inputs, params)
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


def _blas_env() -> dict[str, str]:
    """What the C program needs to find the cblas routines: the wheel's library and prefix."""
    wheel = pytest.importorskip("scipy_openblas32")
    lib = sorted(Path(wheel.get_lib_dir()).glob(f"*{wheel.get_library()}*.so"))[0]
    return {"TC_BLAS_LIB": str(lib), "TC_BLAS_PREFIX": "scipy_"}


def _blas_mlp() -> tuple[Any, dict[str, np.ndarray]]:
    """The MLP with its two GEMMs in BLAS, built for the CPU, and its parameters."""
    from tilecraft import rules as dl
    from tilecraft.dispatch import DispatchLibrary
    from tilecraft.graph import get_pipeline

    mod, params = MLP().export({"forward": {"x": nn.spec.Tensor(("batch", 16), "float32")}})
    target = tc.Target("cpu")
    with target:
        mod = DispatchLibrary()(get_pipeline("default", params=params)(mod))
        mod = dl.ApplyDefaultSchedule(*dl.cpu.default_rules())(mod)
    return tc.build(mod, target), params


def test_blas_dispatched_model_runs_from_c(driver: Path, tmp_path: Path) -> None:
    env = _blas_env()
    exe, params = _blas_mlp()
    assert [s.func for s in exe["forward"].program.steps if s.is_extern] == ["blas.gemm"] * 2
    path = exe.export_library(tmp_path / "blas.tc", require_c_entry=True)
    unpacked = extract_c(path, tmp_path / "blas")
    header = (unpacked / "include" / "tilecraft_model.h").read_text()
    assert 'calls cblas_sgemm: tc_load_blas(path) or tc_set_extern("cblas_sgemm", fn)' in header
    assert "int tc_set_extern(const char* name, void* fn);" in header
    loaded = tc.runtime.load_module(path)  # Python still runs it, through its own BLAS
    rng = np.random.default_rng(4)
    for batch in (3, 17):
        x = rng.standard_normal((batch, 16)).astype(np.float32)
        raw, line = run_from_c(driver, unpacked, "forward", [x], 2, env)
        assert line.split()[:2] == ["before_weights", "-5"]
        assert line.endswith(f"externs 1 shape {batch} 8")
        out = raw.reshape(batch, 8)
        np.testing.assert_allclose(out, exe["forward"](x), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(out, loaded["forward"](x), rtol=1e-6, atol=1e-6)
        h = np.maximum(x.astype(np.float64) @ params["fc1.weight"].T + params["fc1.bias"], 0)
        ref = h @ params["fc2.weight"].T + params["fc2.bias"]
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("trans_a", "trans_b", "a_shape", "b_shape"),
    [
        (False, False, (3, 5, 7), (7, 4)),  # the batch folds into M
        (True, False, (3, 7, 5), (7, 4)),  # transposed A: one call per batch
        (False, True, (3, 5, 7), (3, 4, 7)),  # both batched
        (True, True, (7, 5), (3, 4, 7)),  # only B batched
        (False, False, (5, 0), (0, 4)),  # K = 0: zeros
    ],
)
def test_extern_only_gemm_layouts_run_from_c(
    driver: Path,
    tmp_path: Path,
    trans_a: bool,
    trans_b: bool,
    a_shape: tuple[int, ...],
    b_shape: tuple[int, ...],
) -> None:
    env = _blas_env()
    from tilecraft.graph.script import parse

    at_shape = (*a_shape[:-2], a_shape[-1], a_shape[-2]) if trans_a else a_shape
    bt_shape = (*b_shape[:-2], b_shape[-1], b_shape[-2]) if trans_b else b_shape
    out_shape = (*(a_shape[:-2] or b_shape[:-2]), at_shape[-2], bt_shape[-1])
    script = f"""
@R.function
def forward(a: R.Tensor({a_shape}, "float32"), b: R.Tensor({b_shape}, "float32")) -> R.Tensor({out_shape}, "float32"):
    with R.dataflow():
        y = R.call_extern('blas.gemm', (a, b), out_sinfo=R.Tensor({out_shape}, "float32"), trans_a={trans_a}, trans_b={trans_b})
        R.output(y)
    return y
"""  # noqa: E501
    exe = tc.build(tc.IRModule({"forward": parse(script)}), tc.Target("cpu"))
    assert exe.lib is not None  # no kernel, but a library holding the plain C entry
    path = exe.export_library(tmp_path / "gemm.tc", require_c_entry=True)
    unpacked = extract_c(path, tmp_path / "gemm")
    rng = np.random.default_rng(5)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    raw, line = run_from_c(driver, unpacked, "forward", [a, b], len(out_shape), env)
    assert line.endswith("externs 1 shape " + " ".join(map(str, out_shape)))
    out = raw.reshape(out_shape)
    at = np.swapaxes(a, -1, -2) if trans_a else a
    bt = np.swapaxes(b, -1, -2) if trans_b else b
    np.testing.assert_allclose(out, at @ bt, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out, exe["forward"](a, b), rtol=1e-6, atol=1e-6)


def test_unset_blas_routine_is_an_error_code_not_a_crash(driver: Path, tmp_path: Path) -> None:
    _blas_env()
    from tilecraft.dispatch import DispatchLibrary
    from tilecraft.graph import get_pipeline

    mod, params = MLP().export({"forward": {"x": nn.spec.Tensor((2, 16), "float32")}})
    with tc.Target("cpu"):
        mod = DispatchLibrary()(get_pipeline("default", params=params)(mod))
    path = tc.build(mod, "cpu").export_library(tmp_path / "m.tc", require_c_entry=True)
    unpacked = extract_c(path, tmp_path / "m")
    x = np.zeros((2, 16), np.float32)
    np.ascontiguousarray(x).tofile(unpacked / "x0.bin")
    args = [str(driver), str(unpacked), "forward", "2", str(unpacked / "y.bin"),
            str(unpacked / "x0.bin"), "2,16"]  # fmt: skip
    # no BLAS given: the entry refused with TC_ERR_EXTERN (checked by the program), then
    # tc_load_blas(NULL) found no library: the default one is not on the loader's path
    done = subprocess.run(args, capture_output=True, text=True, env={"PATH": ""})
    assert done.returncode == 6, done.stderr
    assert "BLAS: tc_load_blas: cannot open the BLAS library libscipy_openblas.so" in done.stderr
    with zipfile.ZipFile(path) as zf:
        (f,) = json.loads(zf.read("manifest.json"))["functions"]
    assert f["c_refused"] is None
    assert f["c_entry"]["symbol"] == "tc_forward"


def test_bounds_checked_blas_build_says_why_it_has_no_c_entry(tmp_path: Path) -> None:
    _blas_env()
    from tilecraft.dispatch import DispatchLibrary
    from tilecraft.graph import get_pipeline

    mod, params = MLP().export({"forward": {"x": nn.spec.Tensor((2, 16), "float32")}})
    with tc.Target("cpu"):
        mod = DispatchLibrary()(get_pipeline("default", params=params)(mod))
    exe = tc.build(mod, "cpu", bounds_check=True)
    with pytest.raises(ExportError, match=r"forward: .*'blas.gemm'.*bounds-checked"):
        exe.export_library(tmp_path / "refused.tc", require_c_entry=True)
    assert not (tmp_path / "refused.tc").exists()


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


@pytest.mark.parametrize("how", ["argument", "environment", "default name"])
def test_blas_model_finds_its_blas_itself_with_tc_load_blas(
    driver: Path, tmp_path: Path, how: str
) -> None:
    lib = _blas_env()["TC_BLAS_LIB"]
    env = {
        "argument": {"TC_BLAS_PATH": lib},  # tc_load_blas(path)
        "environment": {"TILECRAFT_BLAS_LIBRARY": lib},  # tc_load_blas(NULL)
        "default name": {"LD_LIBRARY_PATH": str(Path(lib).parent)},  # libscipy_openblas.so
    }[how]
    exe, params = _blas_mlp()
    path = exe.export_library(tmp_path / "blas.tc", require_c_entry=True)
    with zipfile.ZipFile(path) as zf:
        manifest = json.loads(zf.read("manifest.json"))
    assert manifest["version"] == "1.5"
    assert manifest["c_externs"] == {
        "routines": ["cblas_sgemm"], "loader": "tc_load_blas",
        "default_library": "libscipy_openblas.so", "environment": "TILECRAFT_BLAS_LIBRARY",
        "symbol_prefixes": ["", "scipy_"],
    }  # fmt: skip
    unpacked = extract_c(path, tmp_path / "blas")
    assert "int tc_load_blas(const char* path);" in (unpacked / C_HEADER).read_text()
    x = np.random.default_rng(6).standard_normal((5, 16)).astype(np.float32)
    raw, line = run_from_c(driver, unpacked, "forward", [x], 2, env)
    assert line.endswith("externs 1 shape 5 8")
    out = raw.reshape(5, 8)
    np.testing.assert_allclose(out, exe["forward"](x), rtol=1e-6, atol=1e-6)
    h = np.maximum(x.astype(np.float64) @ params["fc1.weight"].T + params["fc1.bias"], 0)
    np.testing.assert_allclose(out, h @ params["fc2.weight"].T + params["fc2.bias"], atol=1e-4)


def test_tc_load_blas_says_what_is_missing(driver: Path, tmp_path: Path) -> None:
    _blas_env()
    exe, _ = _blas_mlp()
    unpacked = extract_c(exe.export_library(tmp_path / "m.tc"), tmp_path / "m")
    x = np.zeros((2, 16), np.float32)
    np.ascontiguousarray(x).tofile(unpacked / "x0.bin")
    args = [str(driver), str(unpacked), "forward", "2", str(unpacked / "y.bin"),
            str(unpacked / "x0.bin"), "2,16"]  # fmt: skip
    for given, why in [
        ("libm.so.6", "the BLAS library libm.so.6 has no cblas_sgemm (nor a prefixed one)"),
        (str(tmp_path / "none.so"), f"cannot open the BLAS library {tmp_path / 'none.so'}"),
    ]:
        env = {"PATH": "", "TC_BLAS_PATH": given}
        done = subprocess.run(args, capture_output=True, text=True, env=env)
        assert done.returncode == 6, done.stderr
        assert f"BLAS: tc_load_blas: {why}" in done.stderr


def test_a_library_without_blas_steps_records_none_and_loads_nothing(tmp_path: Path) -> None:
    mod, params = MLP().export({"forward": {"x": nn.spec.Tensor((2, 16), "float32")}})
    path = tc.compile(mod, target="cpu", params=params).export_library(tmp_path / "m.tc")
    with zipfile.ZipFile(path) as zf:
        assert json.loads(zf.read("manifest.json"))["c_externs"] is None
    lib = ctypes.CDLL(str(extract_c(path, tmp_path / "m") / "kernels" / "library.so"))
    assert lib.tc_load_blas(b"/no/such/library.so") == 0  # no routine to find


def test_only_a_source_calling_dlopen_links_libdl() -> None:
    from tilecraft.runtime.compiler import build_flags, find_compiler, link_flags

    _blas_env()
    cc = find_compiler()
    blas, _ = _blas_mlp()
    assert blas.lib is not None
    assert "-ldl" in link_flags(build_flags(cc, blas.lib.source))
    mod, params = MLP().export({"forward": {"x": nn.spec.Tensor((2, 16), "float32")}})
    plain = tc.compile(mod, target="cpu", params=params)
    assert plain.lib is not None
    assert "dlopen(" not in plain.lib.source
    assert "-ldl" not in link_flags(build_flags(cc, plain.lib.source))
