"""Tensor-core GEMMs in the truthful GPU emulator: ldmatrix, mma.sync, WMMA and cp.async.

The GEMMs of ``tensor_core_kernels.py`` (built through the Schedule API) run as their
GPU-lowered programs, every thread a fiber with its own fragment registers, warp operations
executed by the 32 lanes together (:mod:`tilecraft.codegen.emulate.tensor_core`), and are
compared with the unscheduled function. The negative tests edit the *lowered* program the
way a wrong lowering would (a missing or misplaced ``cp.async.wait_group``, a missing barrier,
B loaded without ``.trans``, an accumulator never filled) and show what the emulator says.

Tolerance: the products of 16-bit inputs are exact in fp32, so the emulated kernel and the
CPU reference differ only in the order of their fp32 sums (``K * 2^-24 * sum |a b|`` at
worst); 1e-4 relative (and 1e-4 x max |C| absolute) leaves room for that and none for a
wrong element, which is off by O(1).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pytest
from tensor_core_kernels import GemmConfig, make_gemm, schedule_mma_gemm, schedule_wmma_gemm

import tilecraft as tc
from tilecraft import ir
from tilecraft.errors import EmulationError, RaceCheckError, RaceKind
from tilecraft.ir import PrimFunc
from tilecraft.lower.gpu_nodes import ThreadSync
from tilecraft.lower.gpu_pipeline import lower_gpu_function
from tilecraft.testing import check_numeric
from tilecraft.testing.numeric import bf16_to_f32, f32_to_bf16

SM80 = tc.Target("cuda -arch=sm_80")
SM75 = tc.Target("cuda -arch=sm_75")
TOL = {"rtol": 1e-4, "atol": 1e-4}
GEMMS = [("mma", "float16", SM80), ("mma", "bfloat16", SM80), ("wmma", "float16", SM75)]
GEMM_IDS = ["mma-f16-sm80", "mma-bf16-sm80", "wmma-f16-sm75"]


def _schedule(kind: str, func: PrimFunc, cfg: GemmConfig | None = None) -> tc.Schedule:
    return (schedule_mma_gemm if kind == "mma" else schedule_wmma_gemm)(func, cfg)


# racecheck (which also checks the numbers) in the default run; plain emulation under -m slow
@pytest.mark.parametrize("mode", [pytest.param(True, marks=pytest.mark.slow), "racecheck"])
@pytest.mark.parametrize(("kind", "dt", "target"), GEMMS, ids=GEMM_IDS)
def test_gemm_equals_the_unscheduled_function(
    kind: str, dt: str, target: tc.Target, mode: object
) -> None:
    func = make_gemm(256, 128, 64, dt)  # two thread blocks, two pipelined k steps
    sch = _schedule(kind, func)
    check_numeric(sch.func, func, emulate_gpu=mode, target=target, **TOL)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kind", "dt", "target"),
    [GEMMS[0], *(pytest.param(*g, marks=pytest.mark.slow) for g in GEMMS[1:])],
    ids=GEMM_IDS,
)
def test_256_cubed_gemm_under_racecheck(kind: str, dt: str, target: tc.Target) -> None:
    func = make_gemm(256, 256, 256, dt)  # 2x2 blocks, 8 k steps through the pipeline
    check_numeric(_schedule(kind, func).func, func, emulate_gpu="racecheck", target=target, **TOL)


def test_unpipelined_mma_gemm_under_racecheck() -> None:
    func = make_gemm(256, 128, 64)
    sch = _schedule("mma", func, GemmConfig(pipeline=False))
    check_numeric(sch.func, func, emulate_gpu="racecheck", target=SM80, **TOL)


def test_wmma_gemm_with_cp_async_on_sm80() -> None:
    func = make_gemm(128, 128, 128)
    sch = _schedule("wmma", func, GemmConfig(block_m=64, block_n=64, block_k=64, warps_n=1))
    check_numeric(sch.func, func, emulate_gpu="racecheck", target=SM80, **TOL)


def test_the_emulated_gemm_uses_the_warp_and_async_intrinsics() -> None:
    lib = tc.build(_schedule("mma", make_gemm(256, 128, 64)).func, target=SM80, emulate=True)
    src = lib.source
    for needed in ("tc_emu_tc_ldmatrix", "tc_emu_tc_mma", "tc_emu_async_copy(tc_self",
                   "tc_emu_async_commit(tc_self)", "tc_emu_async_wait(tc_self, 1)",
                   "tc_emu_async_wait(tc_self, 0)"):  # fmt: skip
        assert needed in src
    wmma = tc.build(_schedule("wmma", make_gemm(256, 128, 64)).func, target=SM75, emulate=True)
    for needed in ("tc_emu_tc_wmma_copy", "tc_emu_tc_wmma_fill", "tc_emu_tc_wmma_mma"):
        assert needed in wmma.source
    assert "tc_emu_async_copy(tc_self" not in wmma.source  # sm_75: no cp.async


# ------------------------------------------------------------------------------------------
# negative tests on edited lowered programs
def _operands(m: int, n: int, k: int, dt: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flat device operands (fp16, or bf16 bit patterns) and the float64 product."""
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    if dt == "float16":
        a16, b16 = a.astype(np.float16), b.astype(np.float16)
        ref = a16.astype(np.float64) @ b16.astype(np.float64)
    else:
        a16, b16 = f32_to_bf16(a), f32_to_bf16(b)
        ref = bf16_to_f32(a16).astype(np.float64) @ bf16_to_f32(b16).astype(np.float64)
    return a16.reshape(-1), b16.reshape(-1), ref


def _run(low: PrimFunc, target: tc.Target, mode: object, shape: tuple[int, int, int],
         dt: str = "float16") -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Run a lowered GEMM; (result, float64 reference)."""
    m, n, k = shape
    a, b, ref = _operands(m, n, k, dt)
    c = np.full(m * n, np.nan, np.float32)
    tc.build(low, target=target, emulate=mode)["main"](a, b, c)  # type: ignore[arg-type]
    return c.reshape(m, n), ref


class _Edit(ir.Mutator):
    """Rewrite the statements of sequences: ``edit(stmts) -> stmts``."""

    def __init__(self, edit: Callable[[list[ir.Stmt]], list[ir.Stmt]]) -> None:
        super().__init__()
        self.edit = edit

    def visit_SeqStmt(self, s: ir.SeqStmt) -> ir.Stmt:
        stmts = [self.visit(c) for c in s.stmts]
        return ir.seq(*self.edit(stmts))


def _is_wait(s: ir.Stmt, pending: int | None = None) -> bool:
    if not (isinstance(s, ir.Evaluate) and isinstance(s.value, ir.Call)):
        return False
    call = s.value
    if call.op != "ptx_cp_async_wait":
        return False
    return pending is None or call.args[0].value == pending  # type: ignore[attr-defined]


def _edited(low: PrimFunc, edit: Callable[[list[ir.Stmt]], list[ir.Stmt]]) -> PrimFunc:
    new = low.update(body=_Edit(edit).visit(low.body))
    assert not ir.structural_equal(new, low), "the edit changed nothing"
    return new


def _pipelined_mma(shape: tuple[int, int, int] = (256, 128, 96)) -> PrimFunc:
    return lower_gpu_function(_schedule("mma", make_gemm(*shape)).func, SM80)


def test_the_correct_pipeline_passes_racecheck() -> None:
    low = _pipelined_mma()
    c, ref = _run(low, SM80, "racecheck", (256, 128, 96))
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("pending", [1, 0], ids=["steady-wait", "epilogue-wait"])
def test_a_missing_cp_async_wait_is_reported(pending: int) -> None:
    """Without its wait_group the copy has not landed when the consumers' ldmatrix reads it.

    The epilogue's stage already holds an older k step's tile: the read sees initialized,
    stale data, and only the in-flight marking of cp.async destinations catches it."""
    bad = _edited(_pipelined_mma(), lambda ss: [s for s in ss if not _is_wait(s, pending)])
    with pytest.raises(RaceCheckError, match=r"asynchronous copy \(cp\.async\) to it is in "
                       r"flight") as info:  # fmt: skip
        _run(bad, SM80, "racecheck", (256, 128, 96))
    assert info.value.kind is RaceKind.UNINITIALIZED
    assert info.value.buffer in ("A_shared", "B_shared")
    # without the checker: NaN (a stage never written) or stale numbers (a stage's old data)
    c, ref = _run(bad, SM80, True, (256, 128, 96))
    assert not np.allclose(c, ref, rtol=1e-2, atol=1e-2)


def _wait_after_barrier(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
    out = list(stmts)
    for i in range(len(out) - 1):
        if _is_wait(out[i]) and isinstance(out[i + 1], ThreadSync):
            out[i], out[i + 1] = out[i + 1], out[i]
    return out


def test_a_wait_after_the_barrier_is_reported() -> None:
    """Each thread's wait only completes its own copies: the barrier must follow the waits."""
    bad = _edited(_pipelined_mma(), _wait_after_barrier)
    with pytest.raises(RaceCheckError, match=r"cp\.async"):
        _run(bad, SM80, "racecheck", (256, 128, 96))


def _drop_barrier_after_wait(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
    return [s for i, s in enumerate(stmts)
            if not (isinstance(s, ThreadSync) and i and _is_wait(stmts[i - 1]))]  # fmt: skip


def _drop_trailing_barrier_of_loops(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
    def drop(s: ir.Stmt) -> ir.Stmt:
        if isinstance(s, ir.For) and isinstance(s.body, ir.SeqStmt):
            body = s.body.stmts
            if isinstance(body[-1], ThreadSync) and any(isinstance(x, ThreadSync) for x in body):
                return s.update(body=ir.seq(*body[:-1]))
        return s

    return [drop(s) for s in stmts]


# consumers read rows other threads' copies have not delivered: still in flight, or not issued
# yet where no barrier precedes the pipelined loop (the fibers run thread by thread)
_NOT_DELIVERED = (
    r"loads (shared )?[AB]_shared\[\d+\] in barrier phase \d+(, which the block never wrote| "
    r"while thread .*\(cp\.async\) to it is in flight)"
)


@pytest.mark.parametrize(
    ("kind", "target", "edit", "match"),
    [
        ("mma", SM80, _drop_barrier_after_wait, _NOT_DELIVERED),
        ("mma", SM80, _drop_trailing_barrier_of_loops, r"stores A_shared\[\d+\] .* loaded it"),
        ("wmma", SM75, _drop_trailing_barrier_of_loops, r"stores A_shared\[\d+\] .* loaded it"),
    ],
    ids=["mma-after-wait", "mma-after-consumers", "wmma-after-consumers"],
)
def test_each_pipeline_barrier_is_needed(kind: str, target: tc.Target, edit, match: str) -> None:  # type: ignore[no-untyped-def]
    """The pipeline's barriers, removed one kind at a time: the race checker sees the shared
    rows ldmatrix / load_matrix_sync read and the bytes cp.async writes."""
    low = lower_gpu_function(_schedule(kind, make_gemm(256, 128, 96)).func, target)
    with pytest.raises(RaceCheckError, match=match):
        _run(_edited(low, edit), target, "racecheck", (256, 128, 96))


class _NoTrans(ir.Mutator):
    def visit_Call(self, c: ir.Call) -> ir.Expr:
        if c.op == "ptx_ldmatrix_x2":  # load B without .trans: the wrong fragment layout
            return c.update(args=(ir.IntImm(ir.dtype("int32"), 0), *c.args[1:]))
        return c


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_b_loaded_without_trans_gives_wrong_numbers(dt: str) -> None:
    low = lower_gpu_function(_schedule("mma", make_gemm(128, 128, 64, dt)).func, SM80)
    bad = low.update(body=_NoTrans().visit(low.body))
    good, ref = _run(low, SM80, True, (128, 128, 64), dt)
    np.testing.assert_allclose(good, ref, rtol=1e-4, atol=1e-4)
    wrong, _ = _run(bad, SM80, "racecheck", (128, 128, 64), dt)  # race-free, but wrong
    assert not np.isnan(wrong).any()
    assert np.abs(wrong - ref).max() > 0.5


def test_an_accumulator_never_filled_is_an_uninitialized_read() -> None:
    """Fragments are per-lane registers to the race checker: mma_sync reading an accumulator
    nothing filled is reported (on a GPU it would add to garbage)."""
    low = lower_gpu_function(_schedule("wmma", make_gemm(128, 128, 64)).func, SM75)

    class _NoFill(ir.Mutator):
        def visit_Evaluate(self, s: ir.Evaluate) -> ir.Stmt:
            if isinstance(s.value, ir.Call) and s.value.op == "wmma_fill_fragment":
                return ir.Evaluate(ir.IntImm(ir.dtype("int32"), 0))
            return s

    bad = low.update(body=_NoFill().visit(low.body))
    with pytest.raises(RaceCheckError, match=r"loads wmma\.accumulator matmul_wmma_accumulator"):
        _run(bad, SM75, "racecheck", (128, 128, 64))


class _Skip(ir.Mutator):
    """Lane 31 skips the warp operations ``op`` (in its ``lane`` loop): a diverged warp."""

    def __init__(self, op: str) -> None:
        super().__init__()
        self.op = op

    def visit_For(self, s: ir.For) -> ir.Stmt:
        body = s.body
        if isinstance(body, ir.SeqStmt) and isinstance(body.stmts[-1], ir.Evaluate):
            body = body.stmts[-1]  # ldmatrix: its address computation, then the call
        call = body.value if isinstance(body, ir.Evaluate) else None
        if isinstance(call, ir.Call) and call.op == self.op:
            assert s.loop_var.name.startswith("lane"), s.loop_var.name
            return s.update(body=ir.IfThenElse(s.loop_var < 31, s.body))
        return self.generic_visit(s)  # type: ignore[no-any-return]


@pytest.mark.parametrize("mode", [True, pytest.param("racecheck", marks=pytest.mark.slow)])
@pytest.mark.parametrize(
    ("op", "match"),
    [("ptx_mma_m16n8k16", r"while thread \(\d+, 0, 0\) waits at warp collective "
      r"'tc_mma_m16n8k16'\) in warp 0"),
     ("ptx_ldmatrix_x4", r"waits at warp collective 'tc_ldmatrix' \(warp operation #1 of the "
      r"kernel\) while thread \(\d+, 0, 0\) waits at warp collective 'tc_ldmatrix' \(warp "
      r"operation #0 of the kernel\)\) in warp 0")],
    ids=["mma", "ldmatrix"],
)  # fmt: skip
def test_warp_operations_need_the_whole_warp(op: str, match: str, mode: object) -> None:
    """A warp operation that lane 31 skips is a fault naming the kernel, the warp and the
    operations, not a hang or a crash. Lane 31 reaches the next warp operation instead: the
    mma's lanes once ran the mma over the ldmatrix's operands (a segmentation fault), and an
    ldmatrix.x4 paired with the next ldmatrix.x2 silently (the kernel's ldmatrix statements
    shared one site)."""
    low = _pipelined_mma((128, 128, 64))
    bad = low.update(body=_Skip(op).visit(low.body))
    assert not ir.structural_equal(bad, low)
    diverged = r"main_kernel0 cannot proceed: lanes of one warp execute different warp collectives "
    with pytest.raises(EmulationError, match=diverged + r"\(thread \(31, 0, 0\) .*" + match):
        _run(bad, SM80, mode, (128, 128, 64))


# ------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(("kind", "dt", "target"), GEMMS, ids=GEMM_IDS)
def test_1024_cubed_gemm_under_racecheck(kind: str, dt: str, target: tc.Target) -> None:
    func = make_gemm(1024, 1024, 1024, dt)
    sch = _schedule(kind, func)
    lib = tc.build(sch.func, target=target, emulate="racecheck")
    a, b, ref = _operands(1024, 1024, 1024, dt)
    c = np.full(1024 * 1024, np.nan, np.float32)
    start = time.perf_counter()
    lib["main"](a.reshape(1024, 1024), b.reshape(1024, 1024), c.reshape(1024, 1024))
    took = time.perf_counter() - start
    np.testing.assert_allclose(c.reshape(1024, 1024), ref, rtol=1e-4, atol=1e-3)
    print(f"1024^3 {kind} {dt} under racecheck: {took:.2f} s")  # noqa: T201
