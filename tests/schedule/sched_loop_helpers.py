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


def add_one_script(*loops: str, vi: str = "i", vj: str = "j") -> str:
    """Script text of ``B[vi, vj] = A[vi, vj] + 1`` on 4 x 8 buffers, under nested ``loops``.

    Each entry of ``loops`` is one loop header without its colon (``"for i, j in T.grid(4,
    8)"``), the first outermost; ``vi`` and ``vj`` are the block iterators' bindings.
    """
    lines = [
        "@T.prim_func",
        'def main(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):',
        '    with T.block("root"):',
    ]
    pad = "        "
    for loop in loops:
        lines.append(f"{pad}{loop}:")
        pad += "    "
    block = [
        'with T.block("B"):',
        f"    vi = T.axis.spatial(4, {vi})",
        f"    vj = T.axis.spatial(8, {vj})",
        "    T.reads(A[vi, vj])",
        "    T.writes(B[vi, vj])",
        "    B[vi, vj] = A[vi, vj] + T.float32(1.0)",
    ]
    lines += [pad + line for line in block]
    return "\n" + "\n".join(lines) + "\n"


ADD_ONE_BEFORE = add_one_script("for i, j in T.grid(4, 8)")
