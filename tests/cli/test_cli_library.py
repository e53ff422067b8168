"""``tilecraft compile``, ``inspect``, ``run``, ``bench``, ``explain``; help, errors, exit codes."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.cli import EXIT_ERROR, EXIT_OTHER_MACHINE, EXIT_USAGE, cli
from tilecraft.cli import output as cli_output

ROOT = Path(__file__).resolve().parents[2]


def _weights(model_file: Path) -> dict[str, np.ndarray]:
    import runpy

    return runpy.run_path(str(model_file))["model"].state_dict()


def test_python_m_tilecraft_help_lists_every_command() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tilecraft", "--help"],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    for command in ("compile", "tune", "explain", "run", "bench", "db", "inspect"):
        assert f"  {command}" in out.stdout
    assert "Exit codes: 0 success; 1 a tilecraft error" in " ".join(out.stdout.split())


@pytest.mark.parametrize(
    "command",
    [[], ["compile"], ["tune"], ["explain"], ["run"], ["bench"], ["inspect"], ["db"],
     ["db", "list"], ["db", "show"], ["db", "merge"], ["db", "prune"], ["db", "export"]],
)  # fmt: skip
def test_every_command_has_help(invoke, command: list[str]) -> None:
    result = invoke(*command, "--help")
    assert result.exit_code == 0
    assert result.stdout.startswith("Usage: ")
    group = cli
    for name in command:
        group = group.commands[name]  # type: ignore[attr-defined]
    first = (group.help or "").split("\n\n")[0]
    assert " ".join(first.split()) in " ".join(result.stdout.split())


def test_compile_writes_a_library_and_says_who_scheduled_each_kernel(
    invoke_json, model_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "m.tc"
    report = invoke_json("compile", model_file, "-o", out, "-q")
    assert report["output"] == str(out)
    assert out.is_file()
    assert report["target"]["kind"] == "cpu"
    assert [k["kernel"] for k in report["kernels"]] == ["fused_matmul_add_relu"]
    assert report["kernels"][0]["scheduled_by"].startswith("rule:")
    exe = tc.runtime.load_module(out)  # the file is a real exported library
    x = np.ones((2, 16), "float32")
    w = _weights(model_file)
    np.testing.assert_allclose(
        exe["forward"](x), np.maximum(x @ w["fc.weight"].T + w["fc.bias"], 0), rtol=1e-5
    )


def test_compile_prints_progress_on_stderr_and_the_table_on_stdout(
    invoke, model_file: Path, tmp_path: Path
) -> None:
    result = invoke("compile", model_file, "--input", "x:3,16:float32", "-o", tmp_path / "a.tc")
    assert result.exit_code == 0, result.output
    assert "[1/3] read" in result.stderr
    assert "[3/3] export" in result.stderr
    assert "fused_matmul_add_relu" in result.stdout
    assert "rule:Matmul" in result.stdout
    assert "[1/3]" not in result.stdout


def test_inspect_lists_target_functions_and_kernels(invoke_json, library: Path) -> None:
    info = invoke_json("inspect", library)
    assert info["format"] == "tilecraft.library"
    assert info["runs_here"] is True
    assert info["why_not"] is None
    assert info["params_bound"] is True
    (fn,) = info["functions"]
    assert fn["function"] == "forward"
    assert fn["inputs"] == [{"name": "x", "shape": "Tensor((2, 16), float32)"}]
    assert fn["result"] == "Tensor((2, 8), float32)"
    assert [k["kernel"] for k in info["kernels"]] == fn["steps"]
    assert all(k["scheduled_by"] == "rule:Matmul" for k in info["kernels"])


def test_inspect_says_which_blas_routines_the_c_entries_call(
    invoke, invoke_json, tmp_path: Path
) -> None:
    pytest.importorskip("scipy_openblas32")
    from tilecraft.dispatch import DispatchLibrary
    from tilecraft.frontend import nn
    from tilecraft.graph import get_pipeline

    mod, params = nn.Linear(16, 8).export({"forward": {"x": nn.spec.Tensor((2, 16), "float32")}})
    with tc.Target("cpu"):
        mod = DispatchLibrary()(get_pipeline("default", params=params)(mod))
    path = tc.build(mod, "cpu").export_library(tmp_path / "blas.tc")
    info = invoke_json("inspect", path)
    assert info["c_externs"]["routines"] == ["cblas_sgemm"]
    assert info["c_externs"]["loader"] == "tc_load_blas"
    result = invoke("inspect", path)
    assert result.exit_code == 0, result.output
    assert "C entries call cblas_sgemm: tc_load_blas(path) opens path, " in result.stdout
    assert "$TILECRAFT_BLAS_LIBRARY or libscipy_openblas.so" in result.stdout


def test_run_reads_npy_inputs_and_matches_numpy(
    invoke_json, library: Path, model_file: Path, tmp_path: Path
) -> None:
    x = np.random.default_rng(3).standard_normal((2, 16)).astype("float32")
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "y.npy"
    report = invoke_json("run", library, "--input", f"x={tmp_path / 'x.npy'}", "-o", out)
    w = _weights(model_file)
    want = np.maximum(x.astype(np.float64) @ w["fc.weight"].T + w["fc.bias"], 0)
    got = np.load(out)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert report["function"] == "forward"
    assert report["output"]["shape"] == [2, 8]
    assert report["output"]["file"] == str(out)
    assert report["output"]["max"] == pytest.approx(float(got.max()))


def test_run_without_output_prints_a_summary(invoke, library: Path, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.ones((2, 16), "float32"))
    result = invoke("run", library, "-i", f"x={tmp_path / 'x.npy'}")
    assert result.exit_code == 0, result.output
    assert "shape" in result.stdout
    assert "[2, 8]" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [([], "forward needs x"), (["-i", "y=a.npy"], "has no input 'y'"), (["-i", "x"], "NAME=VALUE"),
     (["-f", "nope"], "no graph function 'nope'")],
)  # fmt: skip
def test_run_usage_errors_exit_2(invoke, library: Path, args: list[str], message: str) -> None:
    result = invoke("run", library, *args)
    assert result.exit_code == EXIT_USAGE
    assert message in result.stderr


def test_bench_races_the_reference_and_checks_agreement(
    invoke_json, library: Path, model_file: Path
) -> None:
    report = invoke_json("bench", library, "--reference", model_file, "--number", 2, "--repeat", 2)
    ours, ref = report["results"]
    assert ours["name"] == "tilecraft"
    assert ours["median_s"] > 0
    assert ref["name"] == "numpy"
    assert ref["match"] is True
    assert ref["max_abs_err"] < 1e-4
    assert ref["ratio"] == pytest.approx(ref["median_s"] / ours["median_s"])


def test_bench_without_reference_prints_a_plain_table_without_rich(
    invoke, library: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_output, "_rich_console", lambda: None)
    result = invoke("bench", library, "--number", 1, "--repeat", 1)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[1].split() == ["median", "ratio", "max", "abs", "err"]
    assert lines[3].split()[0] == "tilecraft"


def test_explain_reports_the_rule_of_each_kernel(invoke, invoke_json, model_file: Path) -> None:
    report = invoke_json("explain", model_file, "--input", "x:4,16:float32")
    row = report["functions"]["fused_matmul_add_relu"]
    assert row["status"] == "scheduled"
    assert row["rule"] == "Matmul"
    text = invoke("explain", model_file).stdout
    assert "fused_matmul_add_relu" in text
    assert "Matmul" in text


@pytest.mark.parametrize(
    "spec",
    ["x", "x:1,a-b", "1x:2", "x:2,16:notadtype"],
)
def test_a_malformed_input_spec_is_a_usage_error(invoke, model_file: Path, spec: str) -> None:
    result = invoke("explain", model_file, "--input", spec)
    assert result.exit_code == EXIT_USAGE
    assert "--input" in result.stderr


def _error_line(result) -> str:
    """The one error line on stderr (progress lines, ``[1/3] ... failed``, aside)."""
    lines = [ln for ln in result.stderr.strip().splitlines() if not ln.startswith("[")]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def test_a_refused_model_file_is_one_line_and_exit_1(invoke, tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("model = 3\n")
    result = invoke("compile", bad, "-i", "x:1:float32", "-o", tmp_path / "o.tc")
    assert result.exit_code == EXIT_ERROR
    assert _error_line(result).startswith(f"error: {bad}: the file must define `model`")
    raising = tmp_path / "raises.py"
    raising.write_text("raise ValueError('boom')\n")
    result = invoke("explain", raising)
    assert result.exit_code == EXIT_ERROR
    assert "raised ValueError: boom" in _error_line(result)


def test_an_unknown_target_is_a_usage_error(invoke, model_file: Path) -> None:
    result = invoke("explain", model_file, "--target", "nosuchtarget")
    assert result.exit_code == EXIT_USAGE
    assert "--target" in result.stderr


def test_onnx_and_torch_files_are_refused_cleanly_without_their_importer(
    invoke, tmp_path: Path
) -> None:
    for suffix, module in (
        (".onnx", "tilecraft.frontend.onnx"),
        (".pt2", "tilecraft.frontend.torch"),
    ):
        path = tmp_path / f"m{suffix}"
        path.write_bytes(b"not a model")
        result = invoke("compile", path, "-o", tmp_path / "o.tc")
        assert result.exit_code == EXIT_ERROR
        line = _error_line(result)
        if importlib.util.find_spec(module) is None:
            assert "not supported yet" in line
            assert module in line
    result = invoke("compile", tmp_path / "m.onnx", "-i", "x:1:float32", "-o", tmp_path / "o.tc")
    assert result.exit_code == EXIT_ERROR
    assert "--input is for Python model files" in _error_line(result)


def _with_manifest(src: Path, dst: Path, change: dict) -> Path:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename == "manifest.json":
                manifest = json.loads(data)
                manifest["target"] |= change
                data = json.dumps(manifest).encode()
            zout.writestr(info.filename, data)
    return dst


def test_a_library_for_another_machine_exits_3(
    invoke, invoke_json, library: Path, tmp_path: Path
) -> None:
    arm = {"string": "cpu -mcpu=aarch64", "arch": "aarch64", "features": []}
    other = _with_manifest(library, tmp_path / "arm.tc", arm)
    np.save(tmp_path / "x.npy", np.ones((2, 16), "float32"))
    for command in (["run", other, "-i", f"x={tmp_path / 'x.npy'}"], ["bench", other]):
        result = invoke(*command)
        assert result.exit_code == EXIT_OTHER_MACHINE
        assert "built for cpu -mcpu=aarch64 (aarch64)" in _error_line(result)
    info = invoke_json("inspect", other)  # inspecting loads no code: it works anywhere
    assert info["runs_here"] is False
    assert "aarch64" in info["why_not"]


def test_a_damaged_library_exits_1(invoke, library: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.tc"
    cut.write_bytes(library.read_bytes()[:200])
    for command in ("run", "inspect", "bench"):
        result = invoke(command, cut)
        assert result.exit_code == EXIT_ERROR
        assert "not a tilecraft library" in _error_line(result)


def test_traceback_flag_shows_the_python_error(model_file: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    bad = tmp_path / "bad.py"
    bad.write_text("model = 3\n")
    result = CliRunner().invoke(cli, ["--traceback", "explain", str(bad), "-i", "x:1"])
    assert result.exit_code == 1
    assert type(result.exception).__name__ == "ModelError"


def test_bench_exits_1_when_the_reference_disagrees(invoke, library: Path, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.py"
    wrong.write_text("import numpy as np\n\ndef reference(x):\n    return np.full((2, 8), 5.0)\n")
    result = invoke("bench", library, "--reference", wrong, "--number", 1, "--repeat", 1)
    assert result.exit_code == EXIT_ERROR
    assert (
        _error_line(result)
        == "error: the results differ from the reference (rtol 0.001, atol 0.001)"
    )
    assert "numpy" in result.stdout  # the table is printed first


def test_compile_an_onnx_file_and_bench_it_against_onnxruntime(invoke_json, tmp_path: Path) -> None:
    pytest.importorskip("tilecraft.frontend.onnx")
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(0).standard_normal((16, 8)).astype("float32")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        initializer=[numpy_helper.from_array(w, "w")],
    )
    path = tmp_path / "tiny.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    report = invoke_json("compile", path, "-o", tmp_path / "tiny.tc", "-q")
    assert report["kernels"]
    bench = invoke_json("bench", tmp_path / "tiny.tc", "--reference", path, "--number", 1,
                        "--repeat", 1)  # fmt: skip
    assert bench["results"][1]["name"] == "onnxruntime"
    assert bench["results"][1]["match"] is True
