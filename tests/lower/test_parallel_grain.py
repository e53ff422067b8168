"""``ParallelGrain``: a parallel loop goes to threads only with the work to pay for them."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as tc
from tilecraft.codegen import c_source
from tilecraft.errors import LowerError
from tilecraft.ir import Buffer, BufferStore, For, ForKind, PrimFunc, Var, walk
from tilecraft.lower import (
    MIN_PARALLEL_WORK,
    PARALLEL_MIN_WORK_ATTR,
    ParallelGrain,
    lower,
    parallel_condition,
    parallel_work,
)


def _scale(rows: int | Var, cols: int) -> PrimFunc:
    """``B[i, j] = A[i, j] * 2`` with the row loop parallel."""
    a = Buffer("A", (rows, cols), "float32")
    b = Buffer("B", (rows, cols), "float32")
    i, j = Var("i"), Var("j")
    body = For(j, 0, cols, ForKind.SERIAL, BufferStore(b, a[i, j] * 2.0, (i, j)))
    return PrimFunc((a, b), For(i, 0, rows, ForKind.PARALLEL, body), name="scale")


def _holds_at(cond: tc.ir.Expr, n: Var) -> dict[int, bool]:
    """The condition's value at a few extents of ``n``."""
    out = {}
    for value in (1, 2, 511, 512, 600):
        folded = tc.arith.Analyzer().simplify(
            tc.ir.substitute(cond, {n: tc.ir.IntImm(n.dtype, value)})
        )
        assert isinstance(folded, tc.ir.IntImm), folded
        out[value] = bool(folded.value)
    return out


def _loops(func: PrimFunc) -> list[For]:
    return [n for n in walk(func.body) if isinstance(n, For)]


@pytest.mark.parametrize(("rows", "parallel"), [(4, False), (512, True)])
def test_static_work_decides_at_compile_time(rows: int, parallel: bool) -> None:
    low = lower(_scale(rows, 64))
    outer = _loops(low)[0]
    assert outer.kind is (ForKind.PARALLEL if parallel else ForKind.SERIAL)
    assert PARALLEL_MIN_WORK_ATTR not in outer.annotations
    assert ("#pragma omp parallel for" in c_source(_scale(rows, 64))) is parallel


def test_symbolic_work_decides_at_run_time() -> None:
    n = Var("n")
    func = _scale(n, 64)
    low = lower(func)
    outer = _loops(low)[0]
    assert outer.kind is ForKind.PARALLEL
    assert outer.annotations[PARALLEL_MIN_WORK_ATTR] == MIN_PARALLEL_WORK
    work = parallel_work(outer)
    assert str(work.dtype) == "int64"
    # n * 64 statements >= 32768 and n >= 2 iterations: n >= 512
    assert _holds_at(parallel_condition(outer, MIN_PARALLEL_WORK), n) == {
        1: False, 2: False, 511: False, 512: True, 600: True,
    }  # fmt: skip
    src = c_source(func)
    assert "#pragma omp parallel for if(" in src
    lib = tc.build(func, "cpu")
    for rows in (1, 3, 700):  # serial below the grain, threads above it: same values
        x = np.random.default_rng(rows).standard_normal((rows, 64)).astype("float32")
        out = np.zeros_like(x)
        lib["scale"](x, out)
        np.testing.assert_array_equal(out, x * 2)


def test_a_single_iteration_has_nothing_to_share() -> None:
    func = _scale(1, 1 << 16)  # work enough, one iteration: the other threads would only wait
    assert _loops(lower(func))[0].kind is ForKind.SERIAL
    n = Var("n")
    cond = parallel_condition(_loops(lower(_scale(n, 1 << 16)))[0], MIN_PARALLEL_WORK)
    assert _holds_at(cond, n) == {1: False, 2: True, 511: True, 512: True, 600: True}


def test_work_counts_loops_branches_and_statements() -> None:
    a = Buffer("A", (8, 8), "float32")
    i, j = Var("i"), Var("j")
    store = BufferStore(a, tc.ir.FloatImm("float32", 0.0), (i, j))
    inner = For(j, 0, 8, ForKind.SERIAL, tc.ir.seq(store, store))
    guarded = tc.ir.IfThenElse(i < 4, inner, store)
    loop = For(i, 0, 8, ForKind.PARALLEL, guarded)
    assert parallel_work(loop).value == 8 * (8 * 2 + 1)


def test_min_work_zero_keeps_every_parallel_loop_and_bad_values_are_refused() -> None:
    func = _scale(4, 4)
    assert ParallelGrain(0)(tc.IRModule({"scale": func}))["scale"] is func
    small = ParallelGrain(17)(tc.IRModule({"scale": func}))["scale"]
    assert _loops(small)[0].kind is ForKind.SERIAL
    assert _loops(ParallelGrain(16)(tc.IRModule({"scale": func}))["scale"])[0].kind is (
        ForKind.PARALLEL
    )
    for bad in (-1, 1.5, True, "32"):
        with pytest.raises(LowerError, match="min_work"):
            ParallelGrain(bad)  # type: ignore[arg-type]
