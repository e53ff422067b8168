"""``benchmarks/tune_search_bench.py``: its workloads compute what they say, and the curve
figure (the trial that first reaches 95% of the final best speed) is read off correctly."""

from __future__ import annotations

import json
import math
from argparse import Namespace
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from bench_import import benchmark_module

import tilecraft as tc


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    """``tune_search_bench`` imported with this process's environment left as it was."""
    with benchmark_module("tune_search_bench") as module:
        yield module


def _run(func: tc.ir.PrimFunc, *args: np.ndarray) -> None:
    tc.build(tc.IRModule({"main": func}), target="cpu")["main"](*args)


def test_batch_matmul_is_q_times_k_transposed(bench: ModuleType) -> None:
    rng = np.random.default_rng(0)
    q, k = rng.random((2, 5, 3), dtype=np.float32), rng.random((2, 4, 3), dtype=np.float32)
    out = np.zeros((2, 5, 4), np.float32)
    _run(bench.batch_matmul(2, 5, 3, 4), q, k, out)
    np.testing.assert_allclose(out, q @ k.transpose(0, 2, 1), rtol=1e-5)


def test_conv2d_is_same_padded_nchw(bench: ModuleType) -> None:
    rng = np.random.default_rng(0)
    x, w = rng.random((1, 3, 6, 6), dtype=np.float32), rng.random((3, 3, 3, 3), dtype=np.float32)
    out = np.zeros((1, 3, 6, 6), np.float32)
    _run(bench.conv2d(3, 6, 3), x, w, out)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros_like(out)
    for i in range(6):
        for j in range(6):
            want[0, :, i, j] = np.einsum("chw,ochw->o", xp[0, :, i : i + 3, j : j + 3], w)
    np.testing.assert_allclose(out, want, rtol=1e-5)


def test_reached_is_the_first_trial_within_the_share(bench: ModuleType) -> None:
    curve = [math.inf, 10.0, 10.0, 5.2, 5.2, 5.0]  # 5.0 / 0.95 = 5.263: trial 4 reaches it
    assert bench.reached(curve) == 4
    assert bench.reached([math.inf, 3.0]) == 2
    assert bench.reached([1.0]) == 1


def test_curves_are_saved_and_merged_into_the_plot(bench: ModuleType, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"x replay-trace (64)": [math.inf, 2.0]}))
    opts = Namespace(save=str(tmp_path / "mine.json"), curves=str(tmp_path / "c.png"),
                     merge=str(other))  # fmt: skip
    bench._keep({"x evolutionary (512)": [3.0, 1.0]}, opts)
    assert json.loads((tmp_path / "mine.json").read_text()) == {"x evolutionary (512)": [3.0, 1.0]}
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
