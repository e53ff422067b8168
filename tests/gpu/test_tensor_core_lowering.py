"""Lowering of tensor-core schedules: per-warp fragments, software pipelining, CUDA emission,
and the numerics of the lowered programs.

Numerics are checked two ways without a GPU: the serial meaning of a tensorized schedule
(``check_numeric(..., emulate_gpu=True)``: warp tile operations expanded to their loops) and
the lowered program itself, run in lockstep with the C reference semantics of ``ldmatrix``,
``mma.sync`` and WMMA (``lockstep.py``; it proves the values the lowered code computes under
those semantics, not race freedom or barrier placement, which lockstep order hides).
"""

from __future__ import annotations

import numpy as np
import pytest
from lockstep import _bf16_round, run_lockstep
from tensor_core_kernels import GemmConfig, make_gemm, schedule_mma_gemm, schedule_wmma_gemm

import tilecraft as tc
from tilecraft import ir
from tilecraft.codegen.cuda_tensor_core import emit_async_copy
from tilecraft.errors import LowerError
from tilecraft.ir import PrimFunc
from tilecraft.lower.gpu_nodes import ThreadSync
from tilecraft.lower.gpu_pipeline import get_gpu_pipeline, lower_gpu
from tilecraft.lower.software_pipeline import ASYNC_COPY_ATTR, InjectSoftwarePipeline
from tilecraft.runtime import cuda_source
from tilecraft.testing import check_numeric

SM80 = tc.Target("cuda -arch=sm_80")
SM75 = tc.Target("cuda -arch=sm_75")


def _lower_until(func: PrimFunc, target: tc.Target, last: type) -> PrimFunc:
    for p in get_gpu_pipeline(target):
        func = p(func)
        if isinstance(p, last):
            return func
    raise AssertionError(f"{last.__name__} is not in the GPU pipeline")


def _nodes(func: PrimFunc, cls: type) -> list[ir.Node]:
    found: list[ir.Node] = []
    ir.post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, cls) else None)
    return found


def _nodes_of(body: ir.Stmt, cls: type) -> list:  # type: ignore[type-arg]
    found: list[ir.Node] = []
    ir.post_order_visit(body, lambda n: found.append(n) if isinstance(n, cls) else None)
    return found


def _calls(func: PrimFunc, op: str) -> list[ir.Call]:
    return [c for c in _nodes(func, ir.Call) if c.op == op]  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------------
# LowerWarpFragments
WARP_OPS = """
@T.prim_func
def main(A: T.Buffer((16, 16), "float16"), B: T.Buffer((16, 8), "float16"), C: T.Buffer((WARPS16, 8), "float32")):
    with T.block("root"):
        A_sh = T.alloc_buffer((16, 16), "float16", scope="shared")
        B_sh = T.alloc_buffer((16, 8), "float16", scope="shared")
        a = T.alloc_buffer((16, 16), "float16", scope="m16n8k16.matrixA")
        b = T.alloc_buffer((16, 8), "float16", scope="m16n8k16.matrixB")
        acc = T.alloc_buffer((ACC16, 8), "float32", scope="m16n8k16.accumulator")
        for bx in T.thread_binding(1, thread="blockIdx.x"):
            for tx in T.thread_binding(32, thread="threadIdx.x"):
                with T.block("stage"):
                    T.reads(A[0:16, 0:16], B[0:16, 0:8])
                    T.writes(A_sh[0:16, 0:16], B_sh[0:16, 0:8])
                    for r in range(8):
                        A_sh[tx // 2, tx % 2 * 8 + r] = A[tx // 2, tx % 2 * 8 + r]
                    for r in range(4):
                        B_sh[tx // 2, tx % 2 * 4 + r] = B[tx // 2, tx % 2 * 4 + r]
            for ty in T.thread_binding(WARPS, thread="threadIdx.y"):
                with T.block("ops"):
                    v = T.axis.spatial(WARPS, ty)
                    T.reads(A_sh[0:16, 0:16], B_sh[0:16, 0:8], acc[0:ACC16, 0:8])
                    T.writes(a[0:16, 0:16], b[0:16, 0:8], acc[0:ACC16, 0:8])
                    T.evaluate(T.mma_load_matrix(a[0, 0], A_sh[0, 0]))
                    T.evaluate(T.mma_load_matrix(b[0, 0], B_sh[0, 0]))
                    T.evaluate(T.mma_fill(acc[FILL, 0], T.float32(0.0)))
                    T.evaluate(T.mma_sync_m16n8k16(acc[MMA, 0], a[0, 0], b[0, 0]))
            for ty in T.thread_binding(WARPS, thread="threadIdx.y"):
                with T.block("store"):
                    v = T.axis.spatial(WARPS, ty)
                    T.reads(acc[0:ACC16, 0:8])
                    T.writes(C[v * 16:v * 16 + 16, 0:8])
                    T.evaluate(T.mma_store(C[v * 16, 0], acc[STORE, 0]))
"""  # noqa: E501


def _warp_ops(warps: int = 2, fill: str = "v * 16", mma: str = "v * 16", store: str = "v * 16",
              acc_rows: int | None = None) -> PrimFunc:  # fmt: skip
    text = WARP_OPS
    for key, value in (("WARPS16", str(16 * warps)), ("ACC16", str(acc_rows or 16 * warps)),
                       ("WARPS", str(warps)), ("FILL", fill), ("MMA", mma),
                       ("STORE", store)):  # fmt: skip
        text = text.replace(key, value)
    func = tc.script.parse(text)
    assert isinstance(func, PrimFunc)
    return func


def _a16_b16_ref(a: np.ndarray, b: np.ndarray, warps: int) -> np.ndarray:
    one = a.astype(np.float64) @ b.astype(np.float64)
    return np.concatenate([one] * warps)


def test_each_warp_gets_its_own_fragment_registers_and_lane_loops() -> None:
    func = _warp_ops()
    low = _lower_until(func, SM80, tc.lower.lower_warp_fragments.LowerWarpFragments)
    allocs = {a.buffer.name: a.buffer for a in _nodes(low, ir.Allocate)}  # type: ignore[attr-defined]
    # one 16x8 accumulator tile per warp: 4 floats per lane, not the 32x8 logical buffer
    assert [s.value for s in allocs["acc"].shape] == [1, 1, 4]
    assert allocs["acc"].scope == "local"
    assert [s.value for s in allocs["a"].shape] == [1, 1, 8]
    lane_loops = [f for f in _nodes(low, ir.For) if f.thread == "threadIdx.x"]  # type: ignore[attr-defined]
    assert sum(f.loop_var.name == "lane" for f in lane_loops) == 5  # type: ignore[attr-defined]
    assert len(_calls(low, "ptx_ldmatrix_x4")) == 1
    assert len(_calls(low, "ptx_ldmatrix_x2")) == 1
    (mma,) = _calls(low, "ptx_mma_m16n8k16")
    assert len(mma.args) == 16
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 8)).astype(np.float16)
    c = np.full((32, 8), np.nan, np.float32)
    run_lockstep(lower_gpu(func, SM80), {"A": a, "B": b, "C": c})
    np.testing.assert_allclose(c, _a16_b16_ref(a, b, 2), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mma": "0", "fill": "0", "store": "0", "acc_rows": 16}, "two warps accumulate"),
        ({"store": "(1 - v) * 16"}, "that it does not write itself"),
        ({"mma": "v * 16 + 8", "acc_rows": 48}, "not a constant multiple of 16"),
    ],
    ids=["shared-accumulator", "reads-other-warp", "off-grid"],
)
def test_warp_fragment_requirements(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(LowerError, match=match):
        lower_gpu(_warp_ops(**kwargs), SM80)  # type: ignore[arg-type]


def test_fragment_accessed_by_ordinary_code_is_rejected() -> None:
    text = WARP_OPS.replace(
        "T.evaluate(T.mma_fill(acc[FILL, 0], T.float32(0.0)))", "acc[v * 16, 0] = T.float32(0.0)"
    )
    text = text.replace("WARPS16", "32").replace("ACC16", "32").replace("WARPS", "2")
    text = text.replace("MMA", "v * 16").replace("STORE", "v * 16")
    with pytest.raises(LowerError, match="accessed outside warp tile operations"):
        lower_gpu(tc.script.parse(text), SM80)


def test_warp_operation_under_a_lane_loop_is_rejected() -> None:
    head = 'T.thread_binding(WARPS, thread="threadIdx.{}"):\n                with T.block("ops")'
    text = WARP_OPS.replace(head.format("y"), head.format("x"))
    text = text.replace("WARPS16", "32").replace("ACC16", "32").replace("WARPS", "2")
    text = text.replace("FILL", "v * 16").replace("MMA", "v * 16").replace("STORE", "v * 16")
    with pytest.raises(LowerError, match=r"inside a loop bound to threadIdx\.x"):
        lower_gpu(tc.script.parse(text), SM80)


# ------------------------------------------------------------------------------------------
# InjectSoftwarePipeline
def _gemm_pipelined(target: tc.Target, k: int = 128) -> PrimFunc:
    sch = schedule_mma_gemm(make_gemm(128, 128, k)) if target is SM80 else None
    if sch is None:
        sch = schedule_wmma_gemm(make_gemm(128, 128, k))
    return _lower_until(sch.func, target, InjectSoftwarePipeline)


def test_two_stage_pipeline_with_cp_async() -> None:
    low = _gemm_pipelined(SM80)  # 4 k steps of 32
    allocs = {a.buffer.name: a.buffer for a in _nodes(low, ir.Allocate)}  # type: ignore[attr-defined]
    assert [s.value for s in allocs["A_shared"].shape] == [2, 128, 32]  # two versions
    assert [s.value for s in allocs["B_shared"].shape] == [2, 32, 128]
    ko = [f for f in _nodes(low, ir.For) if f.loop_var.name == "k_0"]  # type: ignore[attr-defined]
    assert [f.extent.value for f in ko] == [3]  # type: ignore[attr-defined]  # steady state
    assert len(_calls(low, "ptx_cp_async_commit")) == 2  # prologue + steady step
    waits = [c.args[0].value for c in _calls(low, "ptx_cp_async_wait")]  # type: ignore[attr-defined]
    assert waits == [1, 0]  # steady: the newest group may stay in flight; epilogue: none
    marked = [f for f in _nodes(low, ir.For) if f.annotations.get(ASYNC_COPY_ATTR)]  # type: ignore[attr-defined]
    assert len(marked) == 4  # A and B copies in the prologue and the steady step
    assert len(_nodes(low, ThreadSync)) == 4  # before / after the consumers, steady + epilogue
    src = cuda_source(schedule_mma_gemm(make_gemm(128, 128, 128)).mod, SM80)
    assert src.count("cp.async.cg.shared.global [%0], [%1], 16;") == 4
    assert "cp.async.wait_group 1;" in src
    assert "cp.async.wait_group 0;" in src


def test_pipeline_without_async_copies_before_sm80() -> None:
    low = _gemm_pipelined(SM75)
    assert not _calls(low, "ptx_cp_async_commit")
    assert not [f for f in _nodes(low, ir.For) if f.annotations.get(ASYNC_COPY_ATTR)]  # type: ignore[attr-defined]
    allocs = {a.buffer.name: a.buffer for a in _nodes(low, ir.Allocate)}  # type: ignore[attr-defined]
    assert allocs["A_shared"].shape[0].value == 2
    assert "cp.async" not in cuda_source(schedule_wmma_gemm(make_gemm(128, 128, 64)).mod, SM75)


@pytest.mark.parametrize(
    ("stage", "order", "k", "match"),
    [
        ([0, 1], [0, 1, 2], 128, "needs one int per statement"),
        ([0, 1, 2], [0, 1, 2], 128, "stages must be 0"),
        ([0, 0, 1], [0, 0, 1], 128, "must be a permutation"),
        ([0, 0, 1], [0, 1, 2], 32, "1 iterations for 2 stages"),
    ],
    ids=["stage-count", "stage-values", "order", "too-few-iterations"],
)
def test_pipeline_annotation_requirements(
    stage: list[int], order: list[int], k: int, match: str
) -> None:
    sch = schedule_mma_gemm(make_gemm(128, 128, k), GemmConfig(pipeline=False))
    ko = sch.get(sch.get_loops(sch.get_block("A_shared"))[2])
    # set on the IR: annotate refuses the malformed values itself, the pass checks them again
    attrs = {"software_pipeline_stage": tuple(stage), "software_pipeline_order": tuple(order)}
    func = _SetLoopAnnotations(ko, attrs).visit_function(sch.func)
    with pytest.raises(LowerError, match=match):
        lower_gpu(func, SM80)


class _SetLoopAnnotations(ir.Mutator):
    def __init__(self, loop: ir.For, attrs: dict[str, object]) -> None:
        super().__init__()
        self.loop, self.attrs = loop, attrs

    def visit_function(self, func: PrimFunc) -> PrimFunc:
        return func.update(body=self.visit(func.body))

    def visit_For(self, loop: ir.For) -> ir.Stmt:
        new: ir.For = self.generic_visit(loop)
        if loop is not self.loop:
            return new
        anns = new.annotations
        for key, value in self.attrs.items():
            anns = anns.with_item(key, value)
        return new.update(annotations=anns)


def test_copies_that_are_not_16_bytes_stay_synchronous() -> None:
    sch = schedule_mma_gemm(make_gemm(128, 128, 128), GemmConfig(vector=4))  # 8-byte copies
    low = lower_gpu(sch.func, SM80)
    body = low.kernels[0].body
    assert not [f for f in _nodes_of(body, ir.For) if f.annotations.get(ASYNC_COPY_ATTR)]
    assert not [c for c in _nodes_of(body, ir.Call) if c.op.startswith("ptx_cp_async")]
    assert len(_nodes_of(body, ThreadSync)) >= 4  # the barriers alone order the copies
    assert "cp.async" not in cuda_source(sch.mod, SM80)


def test_cuda_falls_back_to_plain_copies_for_an_unaligned_async_loop() -> None:
    sh = ir.decl_buffer((64,), "float16", "S", scope="shared")
    g = ir.decl_buffer((64,), "float16", "G")
    v = ir.Var("v")
    store = ir.BufferStore(sh, g[v + 4], (v + 4,))  # starts 8 bytes into a 16-byte vector
    loop = ir.For(v, 0, 8, ir.ForKind.VECTORIZED, store, annotations={ASYNC_COPY_ATTR: True})

    class _Em:
        features: set[str] = set()

        def line(self, text: str) -> None:
            raise AssertionError(f"emitted {text}")

        def expr(self, e: ir.Expr) -> str:
            return repr(e)

        def buf(self, b: ir.Buffer) -> str:
            return b.name

    assert emit_async_copy(_Em(), loop) is False  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------
# CUDA emission
def test_cuda_emits_ldmatrix_mma_and_wmma() -> None:
    mma = cuda_source(schedule_mma_gemm(make_gemm(128, 128, 64)).mod, SM80)
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];" in mma
    assert "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];" in mma
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in mma
    assert "tc_pack_f16(" in mma
    assert "__cvta_generic_to_shared" in mma
    bf16 = cuda_source(schedule_mma_gemm(make_gemm(128, 128, 64, "bfloat16")).mod, SM80)
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in bf16
    assert "tc_pack_bf16(" in bf16
    assert "#include <cuda_bf16.h>" in bf16
    wmma = cuda_source(schedule_wmma_gemm(make_gemm(128, 128, 64)).mod, SM75)
    assert "#include <mma.h>" in wmma
    frag = "nvcuda::wmma::fragment<nvcuda::wmma::{}, 16, 16, 16, {}>"
    assert frag.format("matrix_a", "__half, nvcuda::wmma::row_major") in wmma
    assert frag.format("accumulator", "float") in wmma
    assert "nvcuda::wmma::load_matrix_sync(" in wmma
    assert ", 40);" in wmma  # the padded leading dimension of the A tile
    assert "nvcuda::wmma::mem_row_major" in wmma
    assert "float* __restrict__ matmul" in wmma  # written through store_matrix_sync: not const


# ------------------------------------------------------------------------------------------
# numerics
def _inputs(m: int, n: int, k: int, dt: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    if dt == "float16":
        return a.astype(np.float16), b.astype(np.float16)
    return _bf16_round(a), _bf16_round(b)


@pytest.mark.parametrize(
    ("kind", "dt", "target", "pipeline"),
    [
        ("mma", "float16", SM80, True),
        pytest.param("mma", "bfloat16", SM80, True, marks=pytest.mark.slow),
        pytest.param("mma", "float16", SM80, False, marks=pytest.mark.slow),
        ("wmma", "float16", SM75, True),
    ],
    ids=["mma-f16", "mma-bf16", "mma-f16-unpipelined", "wmma-f16-sm75"],
)
def test_lowered_gemm_matches_numpy_in_lockstep(kind: str, dt: str, target: tc.Target,
                                                pipeline: bool) -> None:  # fmt: skip
    m, n, k = 256, 128, 64  # two thread blocks, two pipelined k steps
    schedule = schedule_mma_gemm if kind == "mma" else schedule_wmma_gemm
    sch = schedule(make_gemm(m, n, k, dt), GemmConfig(pipeline=pipeline))
    a, b = _inputs(m, n, k, dt)
    c = np.full((m, n), np.nan, np.float32)
    run_lockstep(lower_gpu(sch.func, target), {"A": a, "B": b, "matmul": c})
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4)


def test_lockstep_check_detects_a_wrong_fragment_layout() -> None:
    sch = schedule_mma_gemm(make_gemm(128, 128, 64))
    prog = lower_gpu(sch.func, SM80)

    class _NoTrans(ir.Mutator):
        def visit_Call(self, c: ir.Call) -> ir.Expr:
            if c.op == "ptx_ldmatrix_x2":  # load B without .trans: the wrong layout
                return c.update(args=(ir.IntImm(ir.dtype("int32"), 0), *c.args[1:]))
            return c

    k0 = prog.kernels[0]
    broken = type(prog)(
        prog.func, (type(k0)(**{**k0.__dict__, "body": _NoTrans().visit(k0.body)}),), prog.steps
    )
    a, b = _inputs(128, 128, 64, "float16")
    c = np.zeros((128, 128), np.float32)
    run_lockstep(broken, {"A": a, "B": b, "matmul": c})
    assert not np.allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("kind", ["mma", "wmma"])
def test_tensorized_schedule_has_the_serial_meaning_of_the_gemm(kind: str) -> None:
    func = make_gemm(256, 128, 64)
    sch = (schedule_mma_gemm if kind == "mma" else schedule_wmma_gemm)(func)
    check_numeric(func, sch.func, emulate_gpu="serial", target=SM80)


@pytest.mark.parametrize(
    ("kind", "target", "match"),
    [
        ("mma", SM80, "ldmatrix row address .* is not provably 16-byte aligned"),
        ("wmma", SM75, "WMMA leading dimension 36 is not a multiple of 16 bytes"),
    ],
)
def test_cuda_rejects_misaligned_tensor_core_tiles(
    kind: str, target: tc.Target, match: str
) -> None:
    schedule = schedule_mma_gemm if kind == "mma" else schedule_wmma_gemm
    sch = schedule(make_gemm(128, 128, 64), GemmConfig(pad=4))  # rows of 36 halves: 72 bytes
    with pytest.raises(tc.errors.CodegenError, match=match):
        cuda_source(sch.mod, target)


def test_warp_operations_need_a_threadidx_x_extent_multiple_of_32() -> None:
    text = WARP_OPS.replace(
        'T.thread_binding(32, thread="threadIdx.x")', 'T.thread_binding(48, thread="threadIdx.x")'
    )
    text = text.replace("tx // 2, tx % 2", "tx % 32 // 2, tx % 2")
    text = text.replace("WARPS16", "32").replace("ACC16", "32").replace("WARPS", "2")
    text = text.replace("FILL", "v * 16").replace("MMA", "v * 16").replace("STORE", "v * 16")
    with pytest.raises(LowerError, match=r"threadIdx\.x runs over 48 threads"):
        lower_gpu(tc.script.parse(text), SM80)


def test_warp_tile_operations_on_the_wrong_scopes_are_lowering_errors() -> None:
    text = WARP_OPS.replace(
        "T.mma_load_matrix(b[0, 0], B_sh[0, 0])", "T.mma_load_matrix(b[0, 0], B[0, 0])"
    )
    text = text.replace(
        "T.reads(A_sh[0:16, 0:16], B_sh[0:16, 0:8], acc",
        "T.reads(A_sh[0:16, 0:16], B[0:16, 0:8], acc",
    )
    text = text.replace("WARPS16", "32").replace("ACC16", "32").replace("WARPS", "2")
    text = text.replace("FILL", "v * 16").replace("MMA", "v * 16").replace("STORE", "v * 16")
    func = tc.script.parse(text)
    match = r"mma_load_matrix: operand 1 is in scope 'global'"
    with pytest.raises(LowerError, match=match):
        lower_gpu(func, SM80)
    with pytest.raises(LowerError, match=match):
        tc.lower.lower(func, SM80, emulate_gpu=True)
