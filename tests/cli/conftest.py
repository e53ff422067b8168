"""A tiny model file, its compiled library and a tuned database, shared by the CLI tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tilecraft.cli import cli

MODEL = """
import numpy as np
from tilecraft.frontend import nn


class Tiny(nn.Module):
    def __init__(self):
        self.fc = nn.Linear(16, 8)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.fc(x))


model = Tiny()
inputs = {"x": nn.spec.Tensor((2, 16), "float32")}
_weights = model.state_dict()


def reference(x):
    return np.maximum(x @ _weights["fc.weight"].T + _weights["fc.bias"], 0)
"""


def _invoke(*args: object) -> Result:
    """Run ``tilecraft *args`` in this process (stdout and stderr kept apart)."""
    args_text = [str(a) for a in args]
    return CliRunner().invoke(cli, args_text, prog_name="tilecraft", catch_exceptions=False)


def _invoke_json(*args: object) -> object:
    """Run ``tilecraft *args --json``, check it succeeded, and parse its stdout."""
    result = _invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def invoke() -> Callable[..., Result]:
    """``invoke(*args)``: run ``tilecraft *args`` in this process; returns click's Result."""
    return _invoke


@pytest.fixture
def invoke_json() -> Callable[..., object]:
    """``invoke_json(*args)``: run ``tilecraft *args --json``, check success, parse stdout."""
    return _invoke_json


@pytest.fixture(scope="session")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("model") / "tiny.py"
    path.write_text(MODEL)
    return path


@pytest.fixture(scope="session")
def library(model_file: Path) -> Path:
    out = model_file.parent / "tiny.tc"
    result = _invoke("compile", model_file, "-o", out, "-q")
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="session")
def tuned(model_file: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A work_dir tuned with 4 trials of our kernels (no library record: which of a tiny GEMM's
    paths is faster depends on the machine's load), and the command's JSON report."""
    work_dir = tmp_path_factory.mktemp("tune") / "work"
    report = _invoke_json("tune", model_file, "--trials", 4, "-w", work_dir, "--no-library", "-q")
    assert isinstance(report, dict)
    return work_dir, report
