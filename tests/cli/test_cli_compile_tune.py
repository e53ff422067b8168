"""``tilecraft --help`` loads no compiler layer; ``compile`` of a ``.pt2`` program end to end;
``tune --trials 16`` with BLAS as a candidate; the tuner's live table on a terminal only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import numpy as np
import pytest

from tilecraft.cli import app, cli
from tilecraft.cli import commands_model as model_cmds

ROOT = Path(__file__).resolve().parents[2]
COMPILER_LAYERS = ("driver", "tune", "rules", "graph", "frontend", "runtime", "dispatch", "lower")


def test_help_imports_no_compiler_layer() -> None:
    code = (
        "import json, sys\n"
        "from click.testing import CliRunner\n"
        "from tilecraft.cli import cli\n"
        "r = CliRunner().invoke(cli, ['--help'])\n"
        "assert r.exit_code == 0, r.output\n"
        "print(json.dumps(sorted({m.split('.')[1] for m in sys.modules "
        "if m.startswith('tilecraft.')})))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    loaded = json.loads(out.stdout)
    assert not set(loaded) & set(COMPILER_LAYERS), loaded


def test_help_lists_every_command_with_its_own_summary(invoke) -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    ctx = click.Context(cli)
    for name, (_, summary) in app.COMMANDS.items():
        cmd = cli.get_command(ctx, name)  # loads the command
        assert cmd is not None
        assert cmd.get_short_help_str(200) == summary, name  # the table matches the docstring
        assert f"{name} " in result.stdout
    assert set(cli.list_commands(ctx)) == set(app.COMMANDS)


torch = pytest.importorskip("torch")


class _TorchMLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(12, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def test_pt2_compile_run_matches_torch(invoke_json, tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = _TorchMLP().eval()
    x = torch.randn(3, 12)
    program = torch.export.export(model, (x,))
    pt2 = tmp_path / "mlp.pt2"
    torch.export.save(program, str(pt2))
    lib = tmp_path / "mlp.tc"
    report = invoke_json("compile", pt2, "-o", lib, "-q")
    assert report["output"] == str(lib)
    assert report["kernels"]
    info = invoke_json("inspect", lib)
    (fn,) = info["functions"]
    (param,) = fn["inputs"]
    np.save(tmp_path / "x.npy", x.numpy())
    out = tmp_path / "y.npy"
    ran = invoke_json("run", lib, "-i", f"{param['name']}={tmp_path / 'x.npy'}", "-o", out)
    assert ran["output"]["shape"] == [3, 4]
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(np.load(out), want, rtol=1e-4, atol=1e-5)


def test_tune_16_trials_measures_blas_as_one_candidate(
    invoke_json, model_file: Path, tmp_path: Path
) -> None:
    pytest.importorskip("scipy_openblas32")
    report = invoke_json("tune", model_file, "--trials", 16, "-w", tmp_path / "w", "-q")
    (task,) = report["tasks"]
    assert task["trials"] == 16  # the library's measurement is one of them
    assert task["library"] == "blas"
    assert task["library_s"] > 0
    assert task["best_s"] <= task["library_s"]


def test_tune_without_library_records_no_library(
    invoke_json, model_file: Path, tmp_path: Path
) -> None:
    report = invoke_json(
        "tune", model_file, "--trials", 2, "-w", tmp_path / "w", "--no-library", "-q"
    )
    (task,) = report["tasks"]
    assert task["trials"] == 2
    assert task["library"] is None


def test_live_table_only_for_people(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_cmds, "should_show", lambda progress: True)  # "a terminal"
    assert model_cmds.show_tuning_table(as_json=False, quiet=False)
    assert not model_cmds.show_tuning_table(as_json=True, quiet=False)
    assert not model_cmds.show_tuning_table(as_json=False, quiet=True)
    monkeypatch.setattr(model_cmds, "should_show", lambda progress: False)  # a pipe, or CI
    assert not model_cmds.show_tuning_table(as_json=False, quiet=False)


def test_tune_on_a_terminal_draws_the_tuners_table(
    invoke, model_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(model_cmds, "should_show", lambda progress: True)
    result = invoke("tune", model_file, "--trials", 2, "-w", tmp_path / "w", "--no-library")
    assert result.exit_code == 0, result.output
    assert "Tuning summary" in result.stdout  # the tuner's table, printed at the end
    assert "GFLOP/s" in result.stdout
    assert "task fused_matmul_add_relu:" not in result.stderr  # no per-round lines as well
