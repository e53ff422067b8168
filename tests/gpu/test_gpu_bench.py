"""benchmarks/gpu_bench.py runs end to end without a GPU (its dry modes)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_bench.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_bench", BENCH)
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_every_benchmark_kernel_emulates_correctly(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench()
    assert bench.main(["--emulate"]) == 0
    out = capsys.readouterr().out
    assert out.count(" ok") == len(bench.CASES) + len(bench.HAND)
    assert "MISMATCH" not in out


@pytest.mark.nvcc
def test_ptxas_report_covers_the_scheduled_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench()
    assert bench.main(["--ptxas", "--only", "transpose"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:2] == ["transpose_4096", "sm_90"]
    assert lines[1].split()[4] == "0/0"  # no spills
