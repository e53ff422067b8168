"""Workloads and checks shared by the compute-location/cache/reduction tests (not a test module).

Numerical checks go through :func:`tilecraft.testing.check_numeric`: the scheduled and the
unscheduled function are both built with the C backend and run on the same random inputs.
"""

from __future__ import annotations

import tilecraft as tc
from tilecraft import ir
from tilecraft.testing import assert_ir_equal, check_numeric


def assert_same_result(before: ir.PrimFunc, after: ir.PrimFunc, seed: int = 0) -> None:
    """``after`` computes what ``before`` does on the same random inputs."""
    check_numeric(after, before, seed=seed)


def assert_script(func: ir.PrimFunc, expected: str) -> None:
    """``func`` is structurally equal to the parsed ``expected`` script."""
    parsed = tc.script.parse(expected)
    assert isinstance(parsed, ir.PrimFunc)
    assert_ir_equal(func, parsed)


def matmul(n: int = 8, relu: bool = False) -> ir.PrimFunc:
    """C = A @ B (and D = max(C, 0) when ``relu``)."""
    A = tc.te.placeholder((n, n), "float32", name="A")
    B = tc.te.placeholder((n, n), "float32", name="B")
    k = tc.te.reduce_axis((0, n), name="k")
    C = tc.te.compute((n, n), lambda i, j: tc.te.sum(A[i, k] * B[k, j], axis=k), name="C")
    if not relu:
        return tc.te.create_prim_func([A, B, C])
    zero = ir.const(0.0, "float32")
    D = tc.te.compute((n, n), lambda i, j: ir.op.max(C[i, j], zero), name="D")
    return tc.te.create_prim_func([A, B, D])


def elementwise_chain(n: int = 8) -> ir.PrimFunc:
    """B = A + 1; C = transpose(B) * 2."""
    A = tc.te.placeholder((n, n), "float32", name="A")
    B = tc.te.compute((n, n), lambda i, j: A[i, j] + ir.const(1.0, "float32"), name="B")
    C = tc.te.compute((n, n), lambda i, j: B[j, i] * ir.const(2.0, "float32"), name="C")
    return tc.te.create_prim_func([A, C])


def row_sum_scale(n: int = 8) -> ir.PrimFunc:
    """S[i] = sum_k exp(A[i, k]); Y[i, j] = exp(A[i, j]) / S[i] (softmax-like, two stages)."""
    A = tc.te.placeholder((n, n), "float32", name="A")
    k = tc.te.reduce_axis((0, n), name="k")
    S = tc.te.compute((n,), lambda i: tc.te.sum(ir.op.exp(A[i, k]), axis=k), name="S")
    Y = tc.te.compute((n, n), lambda i, j: ir.op.exp(A[i, j]) / S[i], name="Y")
    return tc.te.create_prim_func([A, Y])


def layer_norm(rows: int = 8, cols: int = 16) -> ir.PrimFunc:
    """topi.layer_norm over the last axis, with gamma and beta."""
    x = tc.te.placeholder((rows, cols), "float32", name="x")
    g = tc.te.placeholder((cols,), "float32", name="g")
    b = tc.te.placeholder((cols,), "float32", name="b")
    return tc.te.create_prim_func([x, g, b, tc.topi.layer_norm(x, g, b)])


def conv2d(channels: int = 4, size: int = 6) -> ir.PrimFunc:
    """topi.conv2d NCHW, 3x3 kernel, padding 1 (a pad block and a conv block)."""
    x = tc.te.placeholder((1, channels, size, size), "float32", name="X")
    w = tc.te.placeholder((8, channels, 3, 3), "float32", name="W")
    return tc.te.create_prim_func([x, w, tc.topi.conv2d(x, w, padding=1)])
