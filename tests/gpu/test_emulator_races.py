"""``emulate="racecheck"``: each kind of fault on small kernels, barriers, and issue 11's bugs.

Small kernels here are written in lowered form (``tc.lowered``: the GPU lowering keeps them as
they are, barriers included or not) to test the checker itself; the barrier-semantics kernel
and the two bug patterns come from the Schedule API. The bug patterns are also kept as
fixtures (``fixtures/*.json``, the lowered programs the schedules produced when the lowering
had the bugs) so detection stays proven after the lowering is fixed.
"""

from __future__ import annotations

import numpy as np
import pytest
from emulator_schedules import (
    FIXTURES,
    GPU,
    make_reverse_rows,
    make_rotate_through_shared,
    make_stencil_cooperative,
)

import tilecraft as tc
from tilecraft.errors import EmulationError, RaceCheckError, RaceKind
from tilecraft.ir import Evaluate, For, IntImm, Mutator, PrimFunc, SeqStmt, Stmt, seq
from tilecraft.lower.gpu_nodes import ThreadSync
from tilecraft.lower.gpu_pipeline import lower_gpu_function
from tilecraft.runtime import BoundsCheckError
from tilecraft.testing import check_numeric

BARRIER = "T.evaluate(7)"  # a marker replaced by a ThreadSync (barriers have no script form)


class _Barriers(Mutator):
    def visit_Evaluate(self, s: Evaluate) -> Stmt:
        value = s.value
        return ThreadSync() if isinstance(value, IntImm) and value.value == 7 else s


def lowered(body: str, params: str = 'A: T.Buffer((64,), "float32"), B: T.Buffer((64,), '
            '"float32")', threads: int = 64) -> PrimFunc:  # fmt: skip
    """A one-block kernel in lowered form; ``body`` runs under ``tx`` (threadIdx.x)."""
    lines = "\n".join("            " + ln for ln in body.strip().splitlines())
    text = f"""
@T.prim_func
def k({params}):
    T.func_attr({{"tc.lowered": True}})
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        S = T.allocate((64,), "float32", scope="shared")
        for tx in T.thread_binding({threads}, thread="threadIdx.x"):
{lines}
"""
    func = tc.script.parse(text)
    return func.update(body=_Barriers().visit(func.body))


def run(func: PrimFunc, mode: object = "racecheck") -> list[np.ndarray]:
    args = [np.arange(64, dtype="float32") + 1, np.zeros(64, "float32")]
    tc.build(func, target=GPU, emulate=mode)[func.name](*args)
    return args


def test_read_after_write_in_one_phase_is_a_conflict() -> None:
    func = lowered("S[tx] = A[tx]\nB[tx] = S[T.max(tx - 1, 0)]")
    with pytest.raises(RaceCheckError) as info:
        run(func)
    e = info.value
    assert (e.kind, e.buffer, e.index, e.phase, e.block) == (RaceKind.CONFLICT, "S", 0, 0,
                                                             (0, 0, 0))  # fmt: skip
    assert e.threads == ((1, 0, 0), (0, 0, 0))
    assert "thread (1, 0, 0) loads S[0] in barrier phase 0, where thread (0, 0, 0) stored it" in (
        str(e)
    )
    assert "a barrier (__syncthreads) is missing" in str(e)


def test_the_same_kernel_with_its_barrier_is_clean() -> None:
    func = lowered(f"S[tx] = A[tx]\n{BARRIER}\nB[tx] = S[T.max(tx - 1, 0)]")
    _, b = run(func)
    np.testing.assert_array_equal(b, np.maximum(np.arange(64) - 1, 0) + 1)


def test_write_after_read_in_one_phase_is_a_conflict() -> None:
    func = lowered(f"S[tx] = A[tx]\n{BARRIER}\nB[tx] = S[(tx + 1) % 64]\nS[tx] = T.float32(0)")
    with pytest.raises(RaceCheckError, match=r"thread \(1, 0, 0\) stores S\[1\] in barrier phase "
                       r"1, where thread \(0, 0, 0\) loaded it") as info:  # fmt: skip
        run(func)
    assert info.value.phase == 1


def test_write_after_write_of_different_values_is_a_conflict() -> None:
    func = lowered("S[0] = A[tx]\nB[tx] = A[tx]")
    with pytest.raises(RaceCheckError, match=r"stores S\[0\] .* thread \(0, 0, 0\) stored it") as i:
        run(func)
    assert "same value" not in str(i.value)


def test_uninitialized_shared_read() -> None:
    func = lowered("B[tx] = S[tx]")
    with pytest.raises(RaceCheckError, match=r"loads shared S\[0\] .* which the block never wrote"
                       ) as info:  # fmt: skip
        run(func)
    assert info.value.kind is RaceKind.UNINITIALIZED


def test_uninitialized_local_read() -> None:
    func = lowered(
        'L = T.allocate((4,), "float32", scope="local")\nL[0] = A[tx]\nB[tx] = L[tx % 4]'
    )
    with pytest.raises(RaceCheckError, match=r"thread \(1, 0, 0\) loads local L\[1\]"):
        run(func)


@pytest.mark.parametrize(
    ("body", "what"),
    [("B[tx] = A[I[tx]]", r"load A\[64\]"), ("B[I[tx]] = A[tx]", r"store B\[64\]"),
     ("S[I[tx]] = A[tx]", r"store S\[64\]")],
)  # fmt: skip
def test_out_of_bounds_accesses_are_skipped_and_reported(body: str, what: str) -> None:
    params = ('A: T.Buffer((64,), "float32"), I: T.Buffer((64,), "int32"), '
              'B: T.Buffer((64,), "float32")')  # fmt: skip
    func = lowered(body, params)
    lib = tc.build(func, target=GPU, emulate="racecheck")
    index = np.arange(64, dtype="int32")
    index[63] = 64  # data-dependent: no static check can see it
    b = np.zeros(64, "float32")
    with pytest.raises(RaceCheckError, match=rf"k: out-of-bounds {what}: index 64 .* \[0, 64\)"
                       ) as info:  # fmt: skip
        lib["k"](np.ones(64, "float32"), index, b)
    assert info.value.kind is RaceKind.OUT_OF_BOUNDS
    assert isinstance(info.value, BoundsCheckError)
    assert info.value.threads == ((63, 0, 0),)
    index[63] = 63
    lib["k"](np.ones(64, "float32"), index, b)  # the library stays usable


def test_plain_emulation_poisons_what_nothing_wrote() -> None:
    """Without the checker an uninitialized read is still visible: memory starts as NaN."""
    _, b = run(lowered("B[tx] = S[tx]"), mode=True)
    assert np.isnan(b).all()


def test_barrier_makes_the_scheduled_kernel_correct() -> None:
    """The Schedule-API rotation is right only with the barrier the lowering inserts: removing
    it breaks the emulated result and the race checker names the read, while the serial mode
    (which ignores barriers) still passes."""
    func, sch, ref = make_rotate_through_shared()
    low = lower_gpu_function(sch.func, GPU)
    assert "tc_emu_barrier" in tc.build(low, target=GPU, emulate=True).source
    check_numeric(low, ref, emulate_gpu="racecheck", target=GPU)

    class Drop(Mutator):
        def visit_SeqStmt(self, s: SeqStmt) -> Stmt:
            s = self.generic_visit(s)
            return seq(*(c for c in s.stmts if not isinstance(c, ThreadSync)))

    broken = low.update(body=Drop().visit(low.body))
    with pytest.raises(AssertionError, match="out of tolerance"):
        check_numeric(broken, ref, emulate_gpu=True, target=GPU)
    with pytest.raises(RaceCheckError, match=r"uninitialized read .* loads shared"):
        check_numeric(broken, ref, emulate_gpu="racecheck", target=GPU)
    check_numeric(func, sch.func, emulate_gpu="serial", target=GPU)  # blind to barriers


def test_divergent_barrier_is_reported_in_every_mode() -> None:
    func = lowered(f"S[tx] = A[tx]\nif tx < 32:\n    {BARRIER}\nB[tx] = S[tx]")
    for mode in (True, "racecheck"):
        with pytest.raises(EmulationError, match=r"k: threads of block \(0, 0, 0\) in kernel "
                           r"k_kernel0 cannot proceed: a thread exited while others wait "
                           r"\(thread \(0, 0, 0\) waits at barrier #0 while thread \(32, 0, 0\) "
                           r"has exited\)"):  # fmt: skip
            run(func, mode)


# -- issue 11's two lowering bugs -------------------------------------------------------------
def _fixture(name: str) -> PrimFunc:
    return tc.ir.from_json((FIXTURES / f"{name}.json").read_text(), verify=False)


def _inputs(func: PrimFunc, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, [d.value for d in p.shape]).astype("float32") for p in func.params]


def test_missing_barrier_fixture_is_reported() -> None:
    """Issue 11: "a missing barrier in a cross-iteration reuse of shared memory". Thread 1
    stores A_shared[1] in tap 0 while thread 0 stores (and loads) it in tap 1, in one barrier
    phase: the barrier pass took the equal index expressions for thread-private."""
    func = _fixture("missing_barrier_stencil")
    lib = tc.build(func, target=GPU, emulate="racecheck")
    with pytest.raises(RaceCheckError) as info:
        lib["main"](*_inputs(func))
    e = info.value
    assert (e.kind, e.kernel, e.buffer, e.index, e.phase) == (
        RaceKind.CONFLICT, "main_kernel0", "A_shared", 1, 0)  # fmt: skip
    assert e.threads == ((1, 0, 0), (0, 0, 0))
    assert e.block == (0, 0, 0)


def test_missing_barrier_fixture_with_the_barrier_is_clean() -> None:
    """The same program with a barrier closing each tap iteration passes the checker, so the
    report is about the missing barrier, not the access pattern."""
    func = _fixture("missing_barrier_stencil")

    class Close(Mutator):
        def visit_For(self, s: For) -> Stmt:
            s = self.generic_visit(s)
            return s.update(body=seq(s.body, ThreadSync())) if s.loop_var.name == "k" else s

    fixed = func.update(body=Close().visit(func.body))
    args = _inputs(fixed)
    tc.build(fixed, target=GPU, emulate="racecheck")["main"](*args)
    a, w, b = args
    np.testing.assert_allclose(b, [a[j : j + 3] @ w for j in range(256)], rtol=1e-5, atol=1e-6)


def test_local_staging_fixture_is_reported() -> None:
    """Issue 11: "a 'local' staging buffer that threads read from each other". Thread 0 loads
    element 31 of its own A_local, which only thread 31 stored (into its own copy)."""
    func = _fixture("local_staging_reverse")
    lib = tc.build(func, target=GPU, emulate="racecheck")
    with pytest.raises(RaceCheckError, match=r"'local' memory is private") as info:
        lib["main"](*_inputs(func))
    e = info.value
    assert (e.kind, e.buffer, e.index, e.threads) == (
        RaceKind.UNINITIALIZED, "A_local", 31, ((0, 0, 0),))  # fmt: skip
    out = _inputs(func)
    tc.build(func, target=GPU, emulate=True)["main"](*out)
    assert np.isnan(out[1]).all()  # what every thread read: its own unwritten elements


@pytest.mark.parametrize(
    ("make", "fixture"),
    [
        (make_stencil_cooperative, "missing_barrier_stencil"),
        (make_reverse_rows, "local_staging_reverse"),
    ],
)
def test_schedule_api_reproduces_the_bug_until_the_lowering_is_fixed(make, fixture) -> None:  # type: ignore[no-untyped-def]
    """The schedules lower to the buggy fixture programs while the lowering has the bugs; the
    serial mode passes them regardless. Once the lowering is fixed (a barrier in the stencil, a
    refused or per-thread-correct staging buffer) this test checks the fixed program instead:
    it must then pass the race checker."""
    func, sch, ref = make()
    check_numeric(func, ref, emulate_gpu="serial", target=GPU)
    try:
        low = lower_gpu_function(sch.func, GPU)
    except tc.errors.LowerError:
        return  # a fixed lowering may refuse the schedule instead
    if tc.ir.structural_equal(low, _fixture(fixture)):
        with pytest.raises(RaceCheckError):
            check_numeric(sch.func, ref, emulate_gpu="racecheck", target=GPU)
    else:
        check_numeric(sch.func, ref, emulate_gpu="racecheck", target=GPU)
