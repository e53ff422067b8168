"""Exported graph functions returning a tuple: load_module round trip and the plain C entry.

The function returns a computed value, a second one computed from the first, its input and a
repeat of the first (copies where a result is an input or a repeat). ``data/run_exported_tuple.c``
(the tuple sibling of ``data/run_exported.c``) runs it from C at two batch sizes, one output
per result; the results match the executable's and numpy's.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.graph import GraphBuilder
from tilecraft.runtime.export import extract_c

DRIVER = Path(__file__).parent / "data" / "run_exported_tuple.c"
GCC = shutil.which("gcc") or shutil.which("cc")


def _module() -> tc.IRModule:
    bb = GraphBuilder()
    x = bb.param("x", ("batch", 8), "float32")
    w = bb.param("w", (8, 8), "float32")
    h = bb.emit("relu", [bb.emit("matmul", [x, w])], name="h")
    e = bb.emit("add", [bb.emit("exp", [bb.emit("negative", [h])]), x], name="e")
    return tc.IRModule({"forward": bb.finish((h, e, x, h), "forward", {"num_input": 1})})


def _reference(x: np.ndarray, w: np.ndarray) -> list[np.ndarray]:
    h = np.maximum(x.astype(np.float64) @ w, 0)
    return [h, np.exp(-h) + x, x, h]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[tc.graph.Executable, Path, dict]:
    w = np.random.default_rng(5).standard_normal((8, 8)).astype(np.float32)
    exe = tc.compile(_module(), target="cpu", params={"w": w})
    path = exe.export_library(tmp_path_factory.mktemp("tuple") / "tuple.tc", require_c_entry=True)
    return exe, path, {"w": w}


def test_tuple_function_round_trips_through_export(exported, tmp_path: Path) -> None:
    exe, path, params = exported
    loaded = tc.runtime.load_module(path)
    assert loaded["forward"].program.ret_slots == exe["forward"].program.ret_slots
    x = np.random.default_rng(6).standard_normal((5, 8)).astype(np.float32)
    got = loaded["forward"](x)
    assert isinstance(got, tuple)
    assert len(got) == 4
    for a, b, r in zip(got, exe["forward"](x), _reference(x, params["w"]), strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, r, rtol=1e-5, atol=1e-5)
    assert loaded["forward"].native is not None


@pytest.mark.skipif(GCC is None, reason="needs a C compiler for the C program")
def test_tuple_function_runs_from_c_at_two_sizes(exported, tmp_path: Path) -> None:
    exe, path, params = exported
    unpacked = extract_c(path, tmp_path / "tuple")
    header = unpacked / "include" / "tilecraft_model.h"
    text = header.read_text()
    assert "graph function forward: 1 inputs, 4 outputs" in text
    assert " *   outputs[3]: float32[batch, 8] (TC_DTYPE_FLOAT32)" in text
    binary = tmp_path / "run_exported_tuple"
    cmd = [GCC, "-std=c11", "-O1", "-Wall", "-Werror", f"-I{header.parent}", str(DRIVER),
           "-o", str(binary), "-ldl"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    rng = np.random.default_rng(7)
    for batch in (3, 17):
        x = rng.standard_normal((batch, 8)).astype(np.float32)
        x.tofile(unpacked / "x.bin")
        args = [str(binary), str(unpacked), "forward", "2,2,2,2", str(unpacked / "y.bin"),
                str(unpacked / "x.bin"), f"{batch},8"]  # fmt: skip
        done = subprocess.run(args, capture_output=True, text=True, env={"PATH": ""})
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "shape " + " | ".join([f"{batch} 8"] * 4)
        raw = np.fromfile(unpacked / "y.bin", np.float32).reshape(4, batch, 8)
        for k, (want, ref) in enumerate(
            zip(exe["forward"](x), _reference(x, params["w"]), strict=True)
        ):
            np.testing.assert_array_equal(raw[k], want)
            np.testing.assert_allclose(raw[k], ref, rtol=1e-5, atol=1e-5)
