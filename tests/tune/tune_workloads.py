"""Workloads, schedule functions and a failure-injecting builder shared by the tuning tests.

Also a small command line used by tests that need a separate tuning process:
``python tune_workloads.py tune WORK_DIR TRIALS PER_ITER`` tunes :func:`add_2d` into
``WORK_DIR``.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence

import tilecraft as tc
from tilecraft import tune as ms
from tilecraft.ir import PrimFunc
from tilecraft.runtime import compile_shared
from tilecraft.schedule import Schedule


def add_one(n: int = 1024) -> PrimFunc:
    """B[i] = A[i] + 1."""
    A = tc.te.placeholder((n,), "float32", name="A")
    B = tc.te.compute((n,), lambda i: A[i] + 1.0, name="B")
    return tc.te.create_prim_func([A, B])


def add_2d(m: int = 64, n: int = 64) -> PrimFunc:
    """C[i, j] = A[i, j] + B[i, j]."""
    A = tc.te.placeholder((m, n), "float32", name="A")
    B = tc.te.placeholder((m, n), "float32", name="B")
    C = tc.te.compute((m, n), lambda i, j: A[i, j] + B[i, j], name="C")
    return tc.te.create_prim_func([A, B, C])


def matmul(m: int = 32, n: int = 32, k: int = 32, relu: bool = False) -> PrimFunc:
    """C = A @ B (block "C"), optionally followed by a ReLU block "D"."""
    A = tc.te.placeholder((m, k), "float32", name="A")
    B = tc.te.placeholder((k, n), "float32", name="B")
    r = tc.te.reduce_axis((0, k), name="k")
    C = tc.te.compute((m, n), lambda i, j: tc.te.sum(A[i, r] * B[r, j], axis=r), name="C")
    if not relu:
        return tc.te.create_prim_func([A, B, C])
    D = tc.topi.relu(C, name="D")
    return tc.te.create_prim_func([A, B, D])


def tile_1d(sch: Schedule) -> None:
    """Split the only loop by a sampled factor."""
    (loop,) = sch.get_loops(sch.get_block("B"))
    factors = sch.sample_perfect_tile(loop, n=2, max_innermost_factor=1024)
    sch.split(loop, factors)


def tile_2d(sch: Schedule) -> None:
    """Split both loops of block "C" by sampled factors (49 candidates for 64 x 64)."""
    i, j = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=64))
    j0, j1 = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=64))
    sch.reorder(i0, j0, i1, j1)


def tile_matmul(sch: Schedule) -> None:
    """Tile the matmul block "C" (only it: a fused epilogue stays as it is)."""
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=16))
    j0, j1 = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=16))
    sch.reorder(i0, j0, k, i1, j1)


# -- failure injection ------------------------------------------------------------------------
POISONS = {
    "segfault": "*(volatile int*)0 = 0;",
    "hang": "for (volatile int tc_spin = 0;; ++tc_spin) {}",
    "exit": "exit(3);",
}


def poison_source(source: str, symbol: str, kind: str) -> str:
    """``source`` with the body of ``symbol`` made to crash, hang, exit or compute wrong values.

    "wrong" replaces the constant 1.0f of the add-one kernel by 1.5f.
    """
    if kind == "wrong":
        assert "+ 1.0f" in source, source
        return source.replace("+ 1.0f", "+ 1.5f")
    head = source.index(f" {symbol}(")
    brace = source.index("{\n", head) + 2
    return source[:brace] + "  " + POISONS[kind] + "\n" + source[brace:]


class PoisonBuilder(ms.Builder):
    """Builds with ``inner``, then replaces the library of chosen candidates by a poisoned one.

    ``choose(index)`` names the poison for the index-th candidate built (over all batches), or
    None to leave it alone. The runner then meets a real segfault, hang, exit or wrong value.
    """

    def __init__(self, inner: ms.Builder, choose: Callable[[int], str | None]) -> None:
        self.inner = inner
        self.choose = choose
        self.count = 0
        self.poisoned: dict[int, str] = {}

    def build(self, inputs: Sequence[ms.BuilderInput]) -> list[ms.BuilderResult]:
        out = []
        for res in self.inner.build(inputs):
            kind = self.choose(self.count)
            if kind is not None and res.artifact is not None:
                art = res.artifact
                text = poison_source(art.source, art.symbol, kind)
                art = dataclasses.replace(art, source=text, lib_path=str(compile_shared(text)))
                res = ms.BuilderResult(art, None, res.build_secs)
                self.poisoned[self.count] = kind
            out.append(res)
            self.count += 1
        return out

    def close(self) -> None:
        self.inner.close()


def _tune_cli(work_dir: str, trials: int, per_iter: int) -> None:
    ms.tune_tir(
        add_2d(),
        "cpu",
        work_dir=work_dir,
        max_trials_global=trials,
        num_trials_per_iter=per_iter,
        space=tile_2d,
        seed=0,
        builder=ms.LocalBuilder(max_workers=1),
        runner=ms.LocalRunner(num_threads=1, number=1, repeat=1),
    )


if __name__ == "__main__":
    if sys.argv[1] == "tune":
        _tune_cli(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
