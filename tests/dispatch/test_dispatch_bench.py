"""``benchmarks/dispatch_bench.py``: rules, library, tuned and the tuner's choice in one run.

The default run builds the benchmark's rules-only and library-first paths of its small
products and checks them against numpy (and that it measures the issue's workloads: matmul
512^3 and 1024^3, the ViT batched matmul); the whole script on its small products, tuning
included, runs under the ``slow`` marker (about 50 s on a loaded 2-core machine).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from bench_import import benchmark_module

import tilecraft as tc

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
pytest.importorskip("scipy_openblas32")


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    """``dispatch_bench`` imported with this process's environment left as it was."""
    with benchmark_module("dispatch_bench") as module:
        yield module


def test_measures_the_issues_workloads(bench: ModuleType) -> None:
    assert bench.WORKLOADS == {
        "matmul 512^3": ((512, 512), (512, 512)),
        "matmul 1024^3": ((1024, 1024), (1024, 1024)),
        "ViT bmm 16x197x64x197": ((16, 197, 64), (16, 64, 197)),
    }


def test_rules_and_library_paths_match_numpy(bench: ModuleType) -> None:
    target = tc.Target("cpu -num-cores=1")
    rng = np.random.default_rng(0)
    for shapes in bench.SMALL.values():
        a, b = (rng.standard_normal(s).astype("float32") for s in shapes)
        rules, library = bench.build(shapes, target, False), bench.build(shapes, target, True)
        assert not any(s.is_extern for s in rules["forward"].program.steps)
        assert [s.func for s in library["forward"].program.steps] == ["blas.gemm"]
        for exe in (rules, library):
            np.testing.assert_allclose(exe(a, b), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_the_script_compares_the_four_paths_in_one_run() -> None:
    cmd = [sys.executable, str(BENCH / "dispatch_bench.py"), "--small", "--trials", "2",
           "--rounds", "1"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("workload"))
    assert lines[head].split()[1:6] == ["rules", "library", "tuned", "choice", "numpy"]
    rows = lines[head + 1 :]
    assert len(rows) == 2
    for row, name in zip(rows, ("matmul 48x40x32", "bmm 2x24x16x20"), strict=True):
        assert row.startswith(name)
        cells = row[len(name) :].split()
        times = [float(c) for c in cells[:6]]  # five medians (ms), then choice / best
        assert all(t >= 0 for t in times[:5])
        assert times[5] >= 1.0
        assert cells[6] in ("database", "dispatch:blas", "rules") or "," in cells[6]
