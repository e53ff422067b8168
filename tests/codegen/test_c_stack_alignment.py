"""Stack arrays of generated C are 64-byte aligned.

gcc 12 vectorizes the stores into a small local array of an OpenMP outlined function with
aligned vector moves without realigning that function's stack; the GEMV rule's float16
schedule on four or more cores (a local accumulator under a parallel loop) then crashed
about every other call. The array carries its alignment explicitly now.
"""

from __future__ import annotations

import re

import numpy as np

import tilecraft as tc
from tilecraft import te, topi
from tilecraft.rules.cpu import GEMV
from tilecraft.testing import check_numeric


def test_a_local_array_under_a_parallel_loop_is_aligned_and_runs() -> None:
    target = tc.Target("cpu -num-cores=4")  # the host's ISA: the kernel runs here
    x = te.placeholder((1, 80), "float16", name="x")
    w = te.placeholder((80, 48), "float16", name="W")  # (K, N): the transposed layout
    func = te.create_prim_func([x, w, topi.matmul(x, w)])
    sch = GEMV().apply(func, target, False)
    assert isinstance(sch, tc.Schedule)
    lib = tc.build(sch.func, target=target)
    stack_arrays = re.findall(r"^\s*\w+ \w+\[\d+\][^;]*;", lib.source, flags=re.M)
    assert stack_arrays, "the schedule is expected to hold a local array"
    assert all("__attribute__((aligned(64)))" in line for line in stack_arrays)
    rng = np.random.default_rng(0)
    params = sch.func.buffer_params
    args = [
        rng.random([int(d.value) for d in p.shape]).astype(p.dtype.numpy_name()) for p in params
    ]
    for _ in range(100):  # crashed within a few calls before
        lib[sch.func.name](*args)
    check_numeric(sch.func, func, rtol=1e-2, atol=1e-2, target=target)
