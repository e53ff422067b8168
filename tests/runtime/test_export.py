"""Deployable libraries: ``exe.export_library(path)`` and ``tc.runtime.load_module(path)``.

The tutorial model (examples/quickstart_model.py) with bound weights and a symbolic-batch MLP
are exported, loaded with no C compiler on PATH and nothing compiled, and give the outputs of
the executable they came from; libraries this machine cannot run or read are refused, with a
message saying what differs, before any of their code is loaded.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tilecraft as tc
from tilecraft import target as target_module
from tilecraft.frontend import nn
from tilecraft.runtime import ExportError, load_module
from tilecraft.runtime.backend import CPUBackend
from tilecraft.runtime.export import VERSION, check_gpu_arch
from tilecraft.runtime.export import library as library_module
from tilecraft.runtime.export import manifest as manifest_module

ROOT = Path(__file__).resolve().parents[2]


def _quickstart() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "quickstart_model", ROOT / "examples" / "quickstart_model.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


QUICKSTART = _quickstart()


class MLP(nn.Module):
    """Linear 16->32, ReLU, Linear 32->8 over a symbolic batch."""

    def __init__(self) -> None:
        self.fc1 = nn.Linear(16, 32)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(32, 8)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        """fc2(relu(fc1(x)))."""
        return self.fc2(self.relu(self.fc1(x)))


def _np_mlp(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    h = np.maximum(x.astype(np.float64) @ p["fc1.weight"].T + p["fc1.bias"], 0)
    return h @ p["fc2.weight"].T + p["fc2.bias"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, np.ndarray], Path]:
    """The tutorial model compiled with its weights bound, and its exported library."""
    mod, params = QUICKSTART.DemoModel().export(
        {"forward": {"x": nn.spec.Tensor((1, 768), "float32")}}, seed=3
    )
    exe = tc.compile(mod, target="cpu", params=params)
    path = exe.export_library(tmp_path_factory.mktemp("demo") / "demo.tc")
    return exe, params, path


@pytest.fixture(scope="module")
def mlp(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, np.ndarray], Path]:
    """The symbolic-batch MLP compiled with its weights bound, and its exported library."""
    mod, params = MLP().export({"forward": {"x": nn.spec.Tensor(("batch", 16), "float32")}})
    exe = tc.compile(mod, target="cpu", params=params)
    path = exe.export_library(tmp_path_factory.mktemp("mlp") / "mlp.tc")
    return exe, params, path


@pytest.fixture
def no_compiler(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No C compiler on PATH, an empty compile cache, and every compile or lowering an error."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(tc.errors.BuildError, match="no C compiler"):
        tc.runtime.find_compiler()

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("loading an exported library compiled or lowered something")

    for name in ("lower", "emit", "compile"):
        monkeypatch.setattr(CPUBackend, name, forbidden)
    monkeypatch.setattr(tc.runtime.compiler, "run_compiler", forbidden)


def _rewrite(
    path: Path, out: Path, edit: Callable[[dict[str, Any], dict[str, bytes]], None]
) -> Path:
    """A copy of the library at ``path`` with its manifest and members changed by ``edit``."""
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    manifest = json.loads(members.pop("manifest.json"))
    edit(manifest, members)
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("manifest.json", json.dumps(manifest))
        for name, data in members.items():
            zf.writestr(name, data)
    return out


def _never_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make loading the kernels' library an error: a refusal must come before it."""

    def forbidden(*args: object) -> None:
        raise AssertionError("the library's code was loaded before the refusal")

    monkeypatch.setattr(library_module, "load_artifact", forbidden)


def test_tutorial_model_loads_without_a_compiler_and_matches(demo: Any, no_compiler: None) -> None:
    exe, params, path = demo
    x = np.random.default_rng(0).standard_normal((1, 768)).astype(np.float32)
    loaded = load_module(path)
    assert loaded.functions["forward"].native is not None  # one C call per forward
    out = loaded["forward"](x)
    np.testing.assert_array_equal(out, exe["forward"](x))
    np.testing.assert_allclose(out, QUICKSTART.reference(x, params), rtol=1e-4, atol=1e-4)


def test_manifest_says_what_the_library_holds(demo: Any) -> None:
    exe, _, path = demo
    with zipfile.ZipFile(path) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        names = set(zf.namelist())
    assert manifest["version"] == f"{VERSION[0]}.{VERSION[1]}"
    assert manifest["tilecraft_version"] == tc.__version__
    assert manifest["target"]["string"] == str(exe.target)
    assert manifest["target"]["features"] == list(exe.target.features)
    assert manifest["params_bound"] is True
    assert set(manifest["files"]) | {"manifest.json"} == names
    kernels = {k["name"]: k for k in manifest["kernels"]}
    assert set(kernels) == {n for n, _ in exe.mod.prim_funcs()}
    for name, k in kernels.items():
        assert k["scheduled_by"] == tc.ir.scheduled_by(exe.mod[name])
        assert k["structural_hash"] == tc.ir.structural_hash(exe.mod[name])
        assert k["binary_sha256"] == manifest["files"][k["binary"]]


def test_weights_are_stored_and_the_rest_deflated(demo: Any) -> None:
    # deflating float weights gains little and cost a 1B-model layer 41 s of a 45 s export
    with zipfile.ZipFile(demo[2]) as zf:
        kinds = {i.filename: i.compress_type for i in zf.infolist()}
    params = [n for n in kinds if n.startswith("params/")]
    assert params
    assert all(kinds[n] == zipfile.ZIP_STORED for n in params)
    assert all(kinds[n] == zipfile.ZIP_DEFLATED for n in kinds if n not in params)


def test_symbolic_batch_model_round_trips_in_a_fresh_process_without_a_compiler(
    mlp: Any, tmp_path: Path
) -> None:
    exe, params, path = mlp
    rng = np.random.default_rng(1)
    xs = {b: rng.standard_normal((b, 16)).astype(np.float32) for b in (1, 3, 17)}
    for b, x in xs.items():
        np.save(tmp_path / f"x{b}.npy", x)
    script = f"""
import numpy as np, tilecraft as tc
from tilecraft.runtime import backend, compiler
def forbidden(*a, **k):
    raise AssertionError("compiled or lowered")
for n in ("lower", "emit", "compile"):
    setattr(backend.CPUBackend, n, forbidden)
compiler.run_compiler = forbidden
exe = tc.runtime.load_module({str(path)!r})
for b in {list(xs)}:
    x = np.load({str(tmp_path)!r} + f"/x{{b}}.npy")
    np.save({str(tmp_path)!r} + f"/y{{b}}.npy", exe["forward"](x))
"""
    env = {"PATH": str(tmp_path), "PYTHONPATH": str(ROOT),
           "TILECRAFT_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path)}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    for b, x in xs.items():
        out = np.load(tmp_path / f"y{b}.npy")
        np.testing.assert_array_equal(out, exe["forward"](x))
        np.testing.assert_allclose(out, _np_mlp(x, params), rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module")
def unbound(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, np.ndarray], Path]:
    """The MLP compiled without its weights (they stay arguments), and its library."""
    mod, params = MLP().export({"forward": {"x": nn.spec.Tensor((2, 16), "float32")}})
    exe = tc.compile(mod, target="cpu")
    path = exe.export_library(tmp_path_factory.mktemp("unbound") / "unbound.tc")
    return exe, params, path


def test_unbound_weights_stay_arguments(unbound: Any, no_compiler: None) -> None:
    exe, params, path = unbound
    with zipfile.ZipFile(path) as zf:
        assert json.loads(zf.read("manifest.json"))["params_bound"] is False
    x = np.ones((2, 16), np.float32)
    out = load_module(path)["forward"](x, *params.values())
    np.testing.assert_array_equal(out, exe["forward"](x, *params.values()))


@pytest.mark.parametrize("minor", range(VERSION[1]))
def test_previous_minor_version_still_loads(mlp: Any, tmp_path: Path, minor: int) -> None:
    exe, _, path = mlp

    def older(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
        manifest["version"] = f"{VERSION[0]}.{minor}"
        if minor < 5:  # 1.4 did not record the C entries' BLAS routines
            del manifest["c_externs"]
        if minor < 2:  # 1.1 had no plain C interface
            del members[manifest.pop("c_header")]
            del manifest["files"]["include/tilecraft_model.h"]
            for f in manifest["functions"]:
                del f["c_entry"], f["c_refused"]
        if minor < 1:  # 1.0 had no kernel provenance
            for k in manifest["kernels"]:
                for key in ("structural_hash", "scheduled_by", "record"):
                    del k[key]

    x = np.full((4, 16), 0.5, np.float32)
    loaded = load_module(_rewrite(path, tmp_path / "old.tc", older))
    np.testing.assert_array_equal(loaded["forward"](x), exe["forward"](x))


@pytest.mark.parametrize(
    ("version", "match"),
    [("2.0", "reads versions 1.0"), (f"1.{VERSION[1] + 1}", "reads versions 1.0")],
)
def test_unreadable_format_versions_are_refused(
    mlp: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str, match: str
) -> None:
    def edit(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
        manifest["version"] = version

    _never_loads(monkeypatch)
    with pytest.raises(ExportError, match=rf"format version {version}.*{match}"):
        load_module(_rewrite(mlp[2], tmp_path / "v.tc", edit))


def test_another_architecture_is_refused(
    mlp: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = tc.Target("cpu").arch
    other = tc.Target("x86-64-v2" if host == "aarch64" else "aarch64")

    def edit(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
        manifest["target"] = manifest_module.target_entry(other)

    _never_loads(monkeypatch)
    with pytest.raises(
        ExportError, match=rf"built for {other} \({other.arch}\); this machine is {host}"
    ):
        load_module(_rewrite(mlp[2], tmp_path / "arch.tc", edit))


def test_missing_isa_features_are_refused(
    mlp: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    x86 = tc.Target("cpu").arch == "x86_64"
    avx512 = tc.Target("avx512" if x86 else "cpu -mcpu=armv8-a -mattr=+sve")
    older = ("sse4_2",) if x86 else ("neon",)  # an older machine of the host's family

    def edit(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
        manifest["target"] = manifest_module.target_entry(avx512)

    path = _rewrite(mlp[2], tmp_path / "avx512.tc", edit)
    monkeypatch.setattr(target_module, "_host_features", lambda: older)
    _never_loads(monkeypatch)
    with pytest.raises(ExportError, match=rf"built for {avx512}, which needs .*this machine lacks"):
        load_module(path)


def test_inconsistent_feature_list_is_refused(mlp: Any, tmp_path: Path) -> None:
    def edit(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
        manifest["target"]["features"] = [*manifest["target"]["features"], "sve"]

    with pytest.raises(ExportError, match=r"CPU features .* are not those of its target"):
        load_module(_rewrite(mlp[2], tmp_path / "feat.tc", edit))


def test_another_gpu_arch_is_refused(
    mlp: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def edit(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
        manifest["target"] = manifest_module.target_entry(tc.Target("cuda -arch=sm_90"))

    path = _rewrite(mlp[2], tmp_path / "gpu.tc", edit)
    _never_loads(monkeypatch)
    monkeypatch.setattr(manifest_module, "device_arch", lambda: "sm_80")
    with pytest.raises(ExportError, match="built for sm_90 GPUs; this machine's GPU is sm_80"):
        load_module(path)
    monkeypatch.setattr(manifest_module, "device_arch", lambda: None)
    with pytest.raises(ExportError, match="built for sm_90 GPUs; this machine has no CUDA device"):
        load_module(path)


def test_gpu_arch_compatibility_rule() -> None:
    check_gpu_arch("sm_80", "sm_86", "t")  # same major, newer minor: runs
    check_gpu_arch("sm_90a", "sm_90", "t")
    for built, device in (("sm_90", "sm_80"), ("sm_86", "sm_80"), ("sm_80", "sm_90"),
                          ("sm_90a", "sm_100")):  # fmt: skip
        with pytest.raises(ExportError, match=f"built for {built} GPUs; .* is {device}"):
            check_gpu_arch(built, device, "t")


def test_corrupted_members_are_refused(
    mlp: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _never_loads(monkeypatch)
    for member in ("kernels/library.so", "params/forward/0.npy", "graph/forward.json"):

        def edit(manifest: dict[str, Any], members: dict[str, bytes], m: str = member) -> None:
            data = bytearray(members[m])
            data[len(data) // 2] ^= 0xFF
            members[m] = bytes(data)

        with pytest.raises(ExportError, match=f"member '{member}' is corrupted: its sha256"):
            load_module(_rewrite(mlp[2], tmp_path / "bad.tc", edit))


def test_truncated_and_foreign_files_are_refused(mlp: Any, tmp_path: Path) -> None:
    data = mlp[2].read_bytes()
    cut = tmp_path / "cut.tc"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ExportError, match="not a tilecraft library, or a truncated"):
        load_module(cut)
    text = tmp_path / "text.tc"
    text.write_text("hello")
    with pytest.raises(ExportError, match="not a tilecraft library"):
        load_module(text)
    with pytest.raises(ExportError, match="no such file"):
        load_module(tmp_path / "missing.tc")
    plain = tmp_path / "plain.zip"
    with zipfile.ZipFile(plain, "w") as zf:
        zf.writestr("a.txt", "a")
    with pytest.raises(ExportError, match=r"no manifest\.json"):
        load_module(plain)
