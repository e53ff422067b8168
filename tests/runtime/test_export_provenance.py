"""What an exported library says about where its kernels came from, and what it refuses.

A model compiled with ``tc.compile(..., database=db)`` after a two-trial tuning run records,
in the manifest, the database record that scheduled the tuned kernel (``<workload structural
hash>:<sha256 of the record's trace>``); an emulated build is refused; and the cache of shipped
libraries never loads a damaged file (regression: a file already present under its content's
name was used without checking it).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import tilecraft as tc
from tilecraft import tune as ms
from tilecraft.frontend import nn
from tilecraft.runtime import ExportError
from tilecraft.runtime.backend import Artifact
from tilecraft.runtime.backend.cpu import library_file

ROOT = Path(__file__).resolve().parents[2]
CPU = tc.Target("cpu -mcpu=x86-64-v2")


class MLP(nn.Module):
    """Linear 16->32, ReLU, Linear 32->8."""

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


def test_manifest_names_the_database_record_of_a_tuned_kernel(tmp_path: Path) -> None:
    mod, params = MLP().export({"forward": {"x": nn.spec.Tensor((4, 16), "float32")}})
    with CPU:
        lowered = tc.graph.get_pipeline("default", params=params)(mod)
    (first, *_) = ms.extract_tasks(lowered, CPU)
    db = ms.MemoryDatabase()
    # no library candidate: a BLAS call measured faster would replace the kernel under test
    ms.tune_tasks([first], CPU, database=db, max_trials_global=2, progress=False, libraries=[])
    exe = tc.compile(mod, CPU, params=params, database=db)
    path = exe.export_library(tmp_path / "tuned.tc")
    with zipfile.ZipFile(path) as zf:
        kernels = {k["name"]: k for k in json.loads(zf.read("manifest.json"))["kernels"]}

    tuned = kernels[first.task_name]
    assert tuned["scheduled_by"] == "database"
    found = db.lookup(first.func, CPU)
    assert found.record is not None
    trace = hashlib.sha256(found.record.trace.as_json().encode()).hexdigest()
    assert tuned["record"] == f"{found.record.workload.key.shash}:{trace}"
    others = [k for name, k in kernels.items() if name != first.task_name]
    assert others
    assert all(k["record"] is None and k["scheduled_by"].startswith("rule:") for k in others)
    x = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    out = tc.runtime.load_module(path)["forward"](x)
    np.testing.assert_allclose(out, _np_mlp(x, params), rtol=1e-4, atol=1e-4)


def test_an_emulated_build_is_refused(tmp_path: Path) -> None:
    mod, params = MLP().export({"forward": {"x": nn.spec.Tensor((4, 16), "float32")}})
    exe = tc.compile(mod, target="cuda -arch=sm_80", params=params, emulate=True)
    with pytest.raises(ExportError, match=r"built as 'EmulatedModule'.*emulated builds"):
        exe.export_library(tmp_path / "emulated.tc")
    assert not (tmp_path / "emulated.tc").exists()


def _artifact(data: bytes) -> Artifact:
    return Artifact(kind="c", target="cpu", source="", symbols={}, program="", lib_bytes=data)


def test_a_damaged_shipped_library_in_the_cache_is_written_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path / "cache"))
    data = b"\x7fELF" + bytes(range(256)) * 4
    path = library_file(_artifact(data))
    assert path.read_bytes() == data
    for damage in (data[:100], b"\x00" * len(data)):  # truncated, overwritten
        path.write_bytes(damage)
        assert library_file(_artifact(data)) == path
        assert path.read_bytes() == data
    path.unlink()
    assert library_file(_artifact(data)).read_bytes() == data


def test_loading_after_the_cached_library_was_damaged(tmp_path: Path) -> None:
    mod, params = MLP().export({"forward": {"x": nn.spec.Tensor(("batch", 16), "float32")}})
    path = tc.compile(mod, target="cpu", params=params).export_library(tmp_path / "mlp.tc")
    x = np.random.default_rng(2).standard_normal((3, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    script = f"""
import numpy as np, tilecraft as tc
exe = tc.runtime.load_module({str(path)!r})
np.save({str(tmp_path / "y.npy")!r}, exe["forward"](np.load({str(tmp_path / "x.npy")!r})))
"""
    env = {"PATH": str(tmp_path), "PYTHONPATH": str(ROOT), "HOME": str(tmp_path),
           "TILECRAFT_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    for attempt in range(2):
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True)
        assert done.returncode == 0, done.stderr.decode()
        np.testing.assert_allclose(np.load(tmp_path / "y.npy"), _np_mlp(x, params), rtol=1e-4)
        (shipped,) = (tmp_path / "cache" / "shipped").glob("*.so")
        if attempt == 0:
            shipped.write_bytes(shipped.read_bytes()[:4096])  # a crash halfway through a copy
