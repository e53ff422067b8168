"""A process forked after tilecraft ran a parallel kernel can still run parallel kernels.

libgomp's worker threads live in the parent only: without the fork guard of
``tilecraft.runtime.openmp_fork`` the child's first parallel region waits for them forever.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.frontend import nn
from tilecraft.testing import run_forked

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


def _parallel_double(n: int = 1 << 16) -> tc.runtime.Module:
    x = tc.te.placeholder((n,), "float32", name="x")
    func = tc.te.create_prim_func([x, tc.te.compute(x.shape, lambda i: x[i] * 2.0, name="y")])
    sch = tc.Schedule(func)
    (loop,) = sch.get_loops(sch.get_block("y"))
    sch.parallel(loop)
    return tc.build(sch.func, target="cpu")


def _run_in_fork(fn: Callable[[], float]) -> float | str:
    got = run_forked(fn, timeout=60.0)
    return got.value if got.failure is None and got.value is not None else str(got.failure)


def test_a_forked_child_runs_a_parallel_kernel() -> None:
    lib = _parallel_double()
    a = np.arange(1 << 16, dtype=np.float32)
    b = np.empty_like(a)
    lib["main"](a, b)  # the parent's OpenMP threads now exist

    def child() -> float:
        c = np.empty_like(a)
        lib["main"](a, c)
        return float(np.abs(c - 2 * a).max())

    assert _run_in_fork(child) == 0.0
    lib["main"](a, b)  # the parent keeps its threads
    np.testing.assert_array_equal(b, 2 * a)


def test_a_forked_child_runs_a_compiled_model() -> None:
    class Net(nn.Module):
        def __init__(self) -> None:
            self.fc = nn.Linear(64, 64)

        def forward(self, x: nn.Tensor) -> nn.Tensor:
            return nn.functional.relu(self.fc(x))

    mod, params = Net().export({"forward": {"x": nn.spec.Tensor((32, 64), "float32")}})
    exe = tc.compile(mod, target="cpu", params=params)
    x = np.random.default_rng(0).standard_normal((32, 64), dtype=np.float32)
    want = exe["forward"](x)
    assert _run_in_fork(lambda: float(np.abs(exe["forward"](x) - want).max())) == 0.0
