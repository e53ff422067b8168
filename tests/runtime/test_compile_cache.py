"""The compile cache verifies entries, rebuilds corrupt ones and survives unusable locations.

Issue 10, 6f: a truncated entry killed the process (SIGBUS in dlopen), an empty or garbage
entry gave a raw OSError on every later build, another kernel's library under the key gave
wrong results, and a read-only or non-directory cache location gave a raw OSError. Builds that
load a possibly corrupt entry run in a child process, so a crash fails the test instead of
killing pytest.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.runtime import cache
from tilecraft.runtime import compiler as compiler_mod

ROOT = Path(tc.__file__).resolve().parents[1]

_CHILD = textwrap.dedent(
    """
    import json, logging, sys
    import numpy as np
    import tilecraft as tc
    from tilecraft import te

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    scale, shift = float(sys.argv[1]), float(sys.argv[2])
    A = te.placeholder((64,), "float32", name="A")
    B = te.compute((64,), lambda i: A[i] * scale + shift, name="B")
    func = te.create_prim_func([A, B])
    lib = tc.build(func)
    a = np.arange(64, dtype="float32")
    b = np.zeros(64, "float32")
    lib["main"](a, b)
    ok = bool(np.array_equal(b, a * np.float32(scale) + np.float32(shift)))
    print(json.dumps({"path": str(lib.path), "ok": ok}))
    """
)


def build_in_child(cache_dir: Path | str, scale: float = 2.0, shift: float = 0.0) -> dict:
    """Build and run ``B = A * scale + shift`` in a fresh process using ``cache_dir``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TILECRAFT_CACHE_DIR": str(cache_dir)}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(scale), str(shift)],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, f"child died (status {proc.returncode}):\n{proc.stderr[-3000:]}"
    out = json.loads(proc.stdout.splitlines()[-1])
    out["stderr"] = proc.stderr
    return out  # type: ignore[no-any-return]


def _sidecar(lib: Path) -> Path:
    return lib.with_suffix(".json")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A cache holding the two kernels the tests build, and their entries' relative paths."""
    root = tmp_path_factory.mktemp("pristine-cache")
    mine, other = build_in_child(root, 2.0, 0.0), build_in_child(root, 1.0, 100.0)
    assert mine["ok"]
    assert other["ok"]
    return root, Path(mine["path"]).relative_to(root), Path(other["path"]).relative_to(root)


@pytest.fixture
def entries(pristine: tuple[Path, Path, Path], tmp_path: Path) -> tuple[Path, Path, Path]:
    """A private copy of the pristine cache: (cache dir, my entry, the other kernel's)."""
    root, mine, other = pristine
    copy = tmp_path / "cache"
    shutil.copytree(root, copy)
    return copy, copy / mine, copy / other


@pytest.mark.parametrize(
    "corrupt",
    ["truncated", "empty", "garbage", "no_sidecar", "bad_sidecar"],
)
def test_corrupt_entry_is_rebuilt(entries: tuple[Path, Path, Path], corrupt: str) -> None:
    cache_dir, lib, _ = entries
    data = lib.read_bytes()
    if corrupt == "truncated":
        lib.write_bytes(data[: len(data) // 2])
    elif corrupt == "empty":
        lib.write_bytes(b"")
    elif corrupt == "garbage":
        lib.write_bytes(np.random.default_rng(0).bytes(len(data)))
    elif corrupt == "no_sidecar":
        lib.write_bytes(data[:4096])
        _sidecar(lib).unlink()
    else:
        _sidecar(lib).write_text("{not json")
    again = build_in_child(cache_dir)
    assert again["ok"], again
    assert again["path"] == str(lib)
    if corrupt != "no_sidecar":  # (that one may be an older tilecraft's entry: logged at INFO)
        assert "corrupt" in again["stderr"]
    assert cache._check_entry(lib, _sidecar(lib), lib.stem) is None  # rebuilt and recorded
    third = build_in_child(cache_dir)  # ... and then used as it is
    assert third["ok"]
    assert "corrupt" not in third["stderr"]


@pytest.mark.parametrize("with_sidecar", [False, True])
def test_foreign_library_under_the_key_is_not_used(
    entries: tuple[Path, Path, Path], with_sidecar: bool
) -> None:
    cache_dir, lib, foreign = entries
    shutil.copyfile(foreign, lib)
    if with_sidecar:  # a whole entry copied under the wrong key
        shutil.copyfile(_sidecar(foreign), _sidecar(lib))
    again = build_in_child(cache_dir, scale=2.0, shift=0.0)
    assert again["ok"], "the other kernel's library was loaded"
    assert "corrupt" in again["stderr"]


def test_cache_location_that_is_a_file_falls_back(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "cache-file"
    not_a_dir.write_text("I am a file")
    out = build_in_child(not_a_dir)
    assert out["ok"]
    assert not Path(out["path"]).is_relative_to(not_a_dir)
    assert "not usable" in out["stderr"]
    assert str(not_a_dir) in out["stderr"]


def test_read_only_cache_location_falls_back(tmp_path: Path) -> None:
    if os.geteuid() == 0:  # root writes through permission bits: use a location nobody can
        location = Path("/proc/self/tilecraft-cache")
    else:
        location = tmp_path / "ro"
        location.mkdir()
        location.chmod(0o555)
    try:
        out = build_in_child(location)
    finally:
        if location.is_relative_to(tmp_path):
            location.chmod(0o755)
    assert out["ok"]
    assert "not usable" in out["stderr"]


def test_read_only_location_in_process_warns_through_the_logger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(not_a_dir))
    monkeypatch.setattr(cache, "_fallback", {})
    with caplog.at_level(logging.WARNING, logger="tilecraft"):
        path = compiler_mod.compile_shared("int tc_fallback_probe(void) { return 7; }\n")
        again = compiler_mod.compile_shared("int tc_fallback_probe(void) { return 7; }\n")
    assert path == again
    assert not path.is_relative_to(not_a_dir)
    warnings = [r for r in caplog.records if "not usable" in r.getMessage()]
    assert len(warnings) == 1, "the fallback is announced once per process"
    assert warnings[0].name.startswith("tilecraft.")


def test_key_includes_host_cpu_under_march_native(monkeypatch: pytest.MonkeyPatch) -> None:
    native = ("-O3", "-march=native")
    monkeypatch.setattr(compiler_mod, "_host_cache", {"cc": "cpu-A"})
    key_a = compiler_mod.cache_key("src", "cc", native)
    plain_a = compiler_mod.cache_key("src", "cc", ("-O3",))
    monkeypatch.setattr(compiler_mod, "_host_cache", {"cc": "cpu-B"})
    assert compiler_mod.cache_key("src", "cc", native) != key_a
    assert compiler_mod.cache_key("src", "cc", ("-O3",)) == plain_a


def test_host_cpu_is_stable_and_specific() -> None:
    cc = compiler_mod.find_compiler()
    monkey_free = compiler_mod.host_cpu(cc)
    compiler_mod._host_cache.pop(cc, None)
    assert compiler_mod.host_cpu(cc) == monkey_free
    assert len(monkey_free) == 64
