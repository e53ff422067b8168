"""Shared helpers of the loop/annotate/sampling/trace schedule tests (not a test module)."""

from __future__ import annotations

import tilecraft as tc
from tilecraft.ir import PrimFunc


def same_result(before: PrimFunc, after: PrimFunc, **kw: object) -> None:
    """The scheduled function computes what the unscheduled one does (random inputs)."""
    tc.testing.check_numeric(after, before, **kw)  # type: ignore[arg-type]


def matmul(n: int = 64, m: int = 64, k: int = 64) -> PrimFunc:
    """C[i, j] = sum_k A[i, k] * B[k, j] built with te."""
    A = tc.te.placeholder((n, k), "float32", name="A")
    B = tc.te.placeholder((k, m), "float32", name="B")
    r = tc.te.reduce_axis((0, k), name="k")
    C = tc.te.compute((n, m), lambda i, j: tc.te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return tc.te.create_prim_func([A, B, C])


def elementwise(n: int = 128) -> PrimFunc:
    """B[i] = A[i] * 2."""
    A = tc.te.placeholder((n,), "float32", name="A")
    B = tc.te.compute((n,), lambda i: A[i] * 2.0, name="B")
    return tc.te.create_prim_func([A, B])


def two_stage(n: int = 64) -> PrimFunc:
    """B = A + 1; C = B * 2 (two blocks)."""
    A = tc.te.placeholder((n, n), "float32", name="A")
    B = tc.te.compute((n, n), lambda i, j: A[i, j] + 1.0, name="B")
    C = tc.te.compute((n, n), lambda i, j: B[i, j] * 2.0, name="C")
    return tc.te.create_prim_func([A, C])
