"""Bounds-checked builds: ``tc.build(..., bounds_check=True)`` (issue 10, item 4).

An out-of-range access becomes a BoundsCheckError naming the function, the buffer, the index
values and the extent, instead of a write past the caller's array; the process and the library
stay usable. Correct kernels give identical results with and without the check.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import tilecraft as tc
from tilecraft import te, topi
from tilecraft.errors import BuildError
from tilecraft.ir import Buffer, BufferStore, For, ForKind, PrimFunc, Var
from tilecraft.lower.bounds_check import BOUNDS_SITES_ATTR, InsertBoundsChecks
from tilecraft.runtime import BoundsCheckError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu"))
from kernels import make_matmul, make_scale_symbolic, make_softmax

GPU = tc.Target("cuda -arch=sm_90")


def shifted_copy(kind: ForKind = ForKind.SERIAL) -> PrimFunc:
    """``B[i + 1, j] = A[i, j] + 1`` for ``i < rows``: with 4 rows the last writes past B.

    The row count is a scalar argument, so the kernel is correct for ``rows <= 3`` and
    ``tc.ir.verify`` (which reports only accesses out of range at every size) lets it build:
    this is the size-dependent bug only a bounds-checked run catches.
    """
    A, B = Buffer("A", (4, 8), "float32"), Buffer("B", (4, 8), "float32")
    i, j, rows = Var("i"), Var("j"), Var("rows")
    store = BufferStore(B, A[i, j] + 1.0, (i + 1, j))
    body = For(i, 0, rows, kind, For(j, 0, 8, ForKind.SERIAL, store))
    return PrimFunc((A, B, rows), body, name="shift")


def guarded_output() -> tuple[np.ndarray, np.ndarray]:
    """A (4, 8) output that is a view of a larger array, so writes past it are observable."""
    backing = np.full(48, 7.0, dtype="float32")
    return backing, backing[:32].reshape(4, 8)


@pytest.mark.parametrize("kind", [ForKind.SERIAL, ForKind.PARALLEL])
def test_out_of_range_write_raises_and_writes_nothing_outside(kind: ForKind) -> None:
    lib = tc.build(shifted_copy(kind), bounds_check=True)
    assert lib.bounds_checked
    a = np.ones((4, 8), "float32")
    backing, b = guarded_output()
    lib["shift"](a, b, 3)  # in range
    np.testing.assert_array_equal(b[1:], 2.0)
    b[:] = 0.0
    with pytest.raises(BoundsCheckError) as err:
        lib["shift"](a, b, 4)
    msg = str(err.value)
    assert "shift" in msg
    assert "store B[4, " in msg
    assert "index 4 on dimension 0 is outside [0, 4)" in msg
    assert "shape (4, 8)" in msg
    assert "8 out-of-range accesses" in msg
    assert isinstance(err.value, IndexError)
    np.testing.assert_array_equal(backing[32:], 7.0)  # nothing written past the array
    np.testing.assert_array_equal(b[1:], 2.0)  # the in-range part ran
    with pytest.raises(BoundsCheckError):  # the library stays usable; the record was cleared
        lib["shift"](a, b, 4)


def test_the_unchecked_build_does_write_past_the_array() -> None:
    """What bounds checking prevents (the guard zone makes the stray write observable)."""
    lib = tc.build(shifted_copy())
    backing, b = guarded_output()
    lib["shift"](np.ones((4, 8), "float32"), b, 4)
    assert (backing[32:40] == 2.0).all()


def test_out_of_range_load_is_reported_and_reads_nothing() -> None:
    A, B = Buffer("A", (8,), "float32"), Buffer("B", (8,), "float32")
    i, step = Var("i"), Var("step")
    body = For(i, 0, 8, ForKind.SERIAL, BufferStore(B, A[i * step], (i,)))  # step 2: A[8..14]
    lib = tc.build(PrimFunc((A, B, step), body, name="stride2"), bounds_check=True)
    b = np.full(8, -1.0, "float32")
    with pytest.raises(BoundsCheckError, match=r"stride2: out-of-bounds load A\[8\]: index 8"):
        lib["stride2"](np.arange(8, dtype="float32"), b, 2)
    np.testing.assert_array_equal(b, [0, 2, 4, 6, 0, 0, 0, 0])  # out-of-range loads yield 0


def test_data_dependent_index_and_later_calls() -> None:
    table = te.placeholder((5, 3), "float32", name="table")
    ids = te.placeholder((4,), "int32", name="ids")
    out = te.compute((4, 3), lambda i, j: table[ids[i], j], name="gather")
    lib = tc.build(te.create_prim_func([table, ids, out]), bounds_check=True)
    t = np.arange(15, dtype="float32").reshape(5, 3)
    got = np.zeros((4, 3), "float32")
    with pytest.raises(BoundsCheckError, match=r"load table\[9, 0\]: index 9 on dimension 0"):
        lib["main"](t, np.array([0, 9, 2, 4], "int32"), got)
    lib["main"](t, np.array([0, 1, 2, 4], "int32"), got)  # a good call afterwards just works
    np.testing.assert_array_equal(got, t[[0, 1, 2, 4]])


def _scheduled_matmul() -> PrimFunc:
    n = te.size_var("n")
    a = te.placeholder((n, 48), "float32", name="A")
    b = te.placeholder((48, 40), "float32", name="B")
    sch = tc.Schedule(te.create_prim_func([a, b, topi.matmul(a, b)]))
    blk = sch.get_block("matmul")
    i, j, k = sch.get_loops(blk)
    io, ii = sch.split(i, factors=[None, 8])  # n need not divide: a guard keeps it in range
    jo, ji = sch.split(j, factors=[None, 8])
    sch.reorder(io, jo, k, ii, ji)
    sch.parallel(io)
    sch.vectorize(ji)
    return sch.func


def _operators() -> list[tuple[str, PrimFunc, dict[str, int]]]:
    x = te.placeholder((2, 3, 9, 9), "float32", name="x")
    w = te.placeholder((4, 3, 3, 3), "float32", name="w")
    s = te.placeholder((6, 17), "float32", name="s")
    t = te.placeholder((6, 5), "float32", name="t")
    return [
        ("matmul", _scheduled_matmul(), {"n": 13}),
        ("conv2d", te.create_prim_func([x, w, topi.conv2d(x, w, stride=2, padding=1)]), {}),
        ("softmax", te.create_prim_func([s, topi.softmax(s)]), {}),
        ("pool", te.create_prim_func([x, topi.max_pool2d(x, kernel=3, stride=2, padding=1)]), {}),
        ("concat", te.create_prim_func([s, t, topi.concat([s, t], axis=1)]), {}),
    ]


@pytest.mark.parametrize(
    ("name", "func", "shape_vars"), _operators(), ids=[o[0] for o in _operators()]
)
def test_correct_kernels_match_with_and_without_the_check(
    name: str, func: PrimFunc, shape_vars: dict[str, int]
) -> None:
    plain, checked = tc.build(func), tc.build(func, bounds_check=True)
    assert plain.path != checked.path  # the flag is part of the compiled unit, so of its key
    assert not plain.bounds_checked
    rng = np.random.default_rng(0)
    arrays = []
    for p in func.params:
        shape = tuple(
            shape_vars[str(d)] if not isinstance(d, tc.ir.IntImm) else d.value for d in p.shape
        )
        arrays.append(rng.standard_normal(shape).astype(str(p.dtype)))
    outs = [[a.copy() for a in arrays] for _ in range(2)]
    plain["main"](*outs[0])
    checked["main"](*outs[1])
    for got, want in zip(outs[1], outs[0], strict=True):
        np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("make", [make_matmul, make_softmax])
def test_emulated_gpu_schedules_under_bounds_check(make) -> None:  # type: ignore[no-untyped-def]
    func, ref = make()
    lib = tc.build(func, target=GPU, emulate=True, bounds_check=True)
    assert lib.bounds_checked
    rng = np.random.default_rng(1)
    ins = [rng.standard_normal([d.value for d in p.shape]).astype("float32") for p in func.params]
    lib[func.name](*ins)
    np.testing.assert_allclose(ins[-1], ref(*ins[:-1]), rtol=1e-4, atol=1e-5)


def test_emulated_gpu_out_of_range_thread_is_caught() -> None:
    func, _ = make_scale_symbolic()
    a, b = np.ones(300, "float32"), np.zeros(300, "float32")
    tc.build(func, target=GPU, emulate=True, bounds_check=True)[func.name](a, b)  # guarded
    lines = func.script().splitlines()
    unguarded = "\n".join(ln for ln in lines if "T.where" not in ln)  # drop the tail guard
    assert len(unguarded) < len(func.script())
    bad = tc.script.parse(unguarded)
    lib = tc.build(bad, target=GPU, emulate=True, bounds_check=True)
    first = r"scale: out-of-bounds (load A|store B)\[300\]: index 300"
    with pytest.raises(BoundsCheckError, match=first):
        lib[bad.name](a, b)


def test_cuda_builds_refuse_bounds_check_with_a_hint() -> None:
    func, _ = make_softmax()
    with pytest.raises(BuildError, match=r"emulate=True, bounds_check=True"):
        tc.build(func, target=GPU, bounds_check=True)


def test_bounds_check_must_be_a_bool() -> None:
    with pytest.raises(TypeError):
        tc.build(shifted_copy(), bounds_check="yes")  # type: ignore[arg-type]


def test_the_pass_is_pure_and_provably_in_range_accesses_lose_their_check() -> None:
    func = shifted_copy()
    checked = InsertBoundsChecks()(func)
    assert checked is not func
    assert tc.ir.structural_equal(func, shifted_copy())  # the input is untouched
    assert checked.attrs[BOUNDS_SITES_ATTR] == ("load A", "store B")
    text = tc.codegen.c_source(func, bounds_check=True)
    assert text.count('tc_bounds_fail("shift"') == 2  # any row count may be out of range
    # with a constant row count A's access is provably in range: only B's row index keeps a
    # check (codegen alone does not verify, so this provably wrong kernel still emits)
    static = PrimFunc(func.params[:2], func.body.update(extent=tc.ir.const(4)), name="shift")
    text = tc.codegen.c_source(static, bounds_check=True)
    assert text.count('tc_bounds_fail("shift"') == 1
    a = te.placeholder((16,), "float32", name="A")
    copy = te.create_prim_func([a, te.compute((16,), lambda i: a[i], name="B")])
    assert "tc_bounds_fail(" not in tc.codegen.c_source(copy, bounds_check=True)
    lib = tc.build(copy, bounds_check=True)
    assert lib.bounds_checked
    out = np.zeros(16, "float32")
    lib["main"](np.arange(16, dtype="float32"), out)
    np.testing.assert_array_equal(out, np.arange(16))
