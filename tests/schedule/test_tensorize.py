"""tensorize and the tensor intrinsic registry: expected IR, numerics, trace round trip, the
built-in CUDA intrinsics, and one failure per requirement."""

from __future__ import annotations

import pytest
from compute_workloads import assert_script, matmul

import tilecraft as tc
from tilecraft.errors import ScheduleError
from tilecraft.ir import PrimFunc
from tilecraft.schedule import (
    Schedule,
    get_tensor_intrin,
    list_tensor_intrins,
    register_tensor_intrin,
)
from tilecraft.testing import assert_fails_unchanged, check_numeric, verify_trace_roundtrip

te = tc.te


def _parse(text: str) -> PrimFunc:
    func = tc.script.parse(text)
    assert isinstance(func, PrimFunc)
    return func


# A toy intrinsic: C[0:4] = A[0:4] + B[0:4], implemented as four stores.
ADD4_DESC = """\
@T.prim_func
def desc(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")):
    with T.block("root"):
        T.reads(A[0:4], B[0:4])
        T.writes(C[0:4])
        for i in range(4):
            with T.block("add"):
                vi = T.axis.spatial(4, i)
                T.reads(A[vi], B[vi])
                T.writes(C[vi])
                C[vi] = A[vi] + B[vi]
"""
ADD4_IMPL = """\
@T.prim_func
def impl(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")):
    with T.block("root"):
        T.reads(A[0:4], B[0:4])
        T.writes(C[0:4])
        for h in range(2):
            C[h * 2] = B[h * 2] + A[h * 2]
            C[h * 2 + 1] = B[h * 2 + 1] + A[h * 2 + 1]
"""
register_tensor_intrin("test_add4", _parse(ADD4_DESC), _parse(ADD4_IMPL), override=True)


def _vector(n: int = 16, rhs: str = "b[i]") -> PrimFunc:
    a = te.placeholder((n,), "float32", name="a")
    b = te.placeholder((n,), "float32", name="b")
    if rhs == "b[i]":
        out = te.compute((n,), lambda i: a[i] + b[i], name="c")
    elif rhs == "b[n-1-i]":
        out = te.compute((n,), lambda i: a[i] + b[n - 1 - i], name="c")
    elif rhs == "a[i]":
        out = te.compute((n,), lambda i: a[i] + a[i], name="c")
    else:
        out = te.compute((n,), lambda i: a[i] * b[i], name="c")
    return te.create_prim_func([a, b, out])


TENSORIZED = """\
@T.prim_func
def main(a: T.Buffer((16,), "float32"), b: T.Buffer((16,), "float32"), c: T.Buffer((16,), "float32")):
    with T.block("root"):
        for i_0 in range(4):
            with T.block("c_o"):
                vi_o = T.axis.spatial(4, i_0)
                T.reads(a[vi_o * 4:vi_o * 4 + 4], b[vi_o * 4:vi_o * 4 + 4])
                T.writes(c[vi_o * 4:vi_o * 4 + 4])
                T.block_attr({"tc.tensor_intrin": "test_add4"})
                for h in range(2):
                    c[vi_o * 4 + h * 2] = b[vi_o * 4 + h * 2] + a[vi_o * 4 + h * 2]
                    c[vi_o * 4 + h * 2 + 1] = b[vi_o * 4 + h * 2 + 1] + a[vi_o * 4 + h * 2 + 1]
"""  # noqa: E501


def _split4(func: PrimFunc, factor: int = 4) -> tuple[Schedule, tc.schedule.LoopRV]:
    sch = Schedule(func)
    (i,) = sch.get_loops(sch.get_block("c"))
    _, inner = sch.split(i, [None, factor])
    return sch, inner


def test_tensorize_a_loop_substitutes_the_implementation_at_the_tiles() -> None:
    before = _vector()
    sch, inner = _split4(before)
    sch.tensorize(inner, "test_add4")
    assert_script(sch.func, TENSORIZED)
    check_numeric(before, sch.func)
    verify_trace_roundtrip(sch, before)
    assert 'sch.tensorize(l3, intrin="test_add4")' in sch.trace.as_python()


def test_tensorize_a_block_and_fresh_loop_variables_per_instance() -> None:
    before = _vector(32)
    sch = Schedule(before)
    (i,) = sch.get_loops(sch.get_block("c"))
    *_, i2 = sch.split(i, [2, None, 4])
    sch.tensorize(sch.blockize(i2), "test_add4")
    loops = [n for n, _ in tc.schedule._tree.walk(sch.func.body) if isinstance(n, tc.ir.For)]
    assert len({id(lp.loop_var) for lp in loops}) == len(loops)  # the impl's h is fresh
    check_numeric(before, sch.func)
    verify_trace_roundtrip(sch, before)


COPY2X2 = (
    """\
@T.prim_func
def desc(S: T.Buffer((2, 2), "float32"), D: T.Buffer((2, 2), "float32")):
    with T.block("root"):
        T.reads(S[0:2, 0:2])
        T.writes(D[0:2, 0:2])
        for i, j in T.grid(2, 2):
            with T.block("copy"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(S[vi, vj])
                T.writes(D[vi, vj])
                D[vi, vj] = S[vi, vj]
""",
    """\
@T.prim_func
def impl(S: T.Buffer((2, 2), "float32"), D: T.Buffer((2, 2), "float32")):
    with T.block("root"):
        T.reads(S[0:2, 0:2])
        T.writes(D[0:2, 0:2])
        D[0, 0] = S[0, 0]
        D[0, 1] = S[0, 1]
        D[1, 0] = S[1, 0]
        D[1, 1] = S[1, 1]
""",
)
register_tensor_intrin("test_copy2x2", *(_parse(t) for t in COPY2X2), override=True)


def test_tensorize_a_tile_of_a_higher_rank_buffer() -> None:
    x = te.placeholder((3, 4, 4), "float32", name="X")
    before = te.create_prim_func([x, te.compute(x.shape, lambda b, i, j: x[b, i, j], name="Y")])
    sch = Schedule(before)
    b, i, j = sch.get_loops(sch.get_block("Y"))
    i0, i1 = sch.split(i, [None, 2])
    j0, j1 = sch.split(j, [None, 2])
    sch.reorder(b, i0, j0, i1, j1)
    sch.tensorize(i1, "test_copy2x2")
    text = sch.func.script()
    assert "Y[vb_o, vi_o * 2 + 1, vj_o * 2] = X[vb_o, vi_o * 2 + 1, vj_o * 2]" in text
    check_numeric(before, sch.func)
    verify_trace_roundtrip(sch, before)


def test_builtin_cuda_intrinsics_are_registered_and_well_formed() -> None:
    names = list_tensor_intrins()
    for want in ("mma_m16n8k16_f16f16f32", "mma_m16n8k16_bf16bf16f32", "mma_load_a_16x16_f16",
                 "mma_load_b_16x8_bf16", "mma_fill_16x8_f32", "mma_store_16x8_f32_global",
                 "wmma_16x16x16_f16f16f32", "wmma_load_b_16x16_f16", "wmma_fill_16x16_f32",
                 "wmma_store_16x16_f32_shared"):  # fmt: skip
        assert want in names
        intrin = get_tensor_intrin(want)
        for f in (intrin.desc, intrin.impl):
            assert tc.ir.structural_equal(tc.script.parse(f.script()), f)
    impl = get_tensor_intrin("mma_m16n8k16_f16f16f32").impl.script()
    assert "T.mma_sync_m16n8k16(C[0, 0], A[0, 0], B[0, 0])" in impl


def _mma_block() -> tuple[Schedule, tc.schedule.LoopRV, PrimFunc]:
    """A 32x16x32 fp16 GEMM with fragment caches: the 16x8x16 inner block is mma-shaped."""
    a = te.placeholder((32, 32), "float16", name="A")
    b = te.placeholder((32, 16), "float16", name="B")
    before = te.create_prim_func([a, b, tc.topi.matmul(a, b, out_dtype="float32")])
    sch = Schedule(before)
    c = sch.get_block("matmul")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 16])
    j0, j1 = sch.split(j, [None, 8])
    k0, k1 = sch.split(k, [None, 16])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    sch.cache_write(c, 0, "m16n8k16.accumulator")
    sch.cache_read(c, 0, "m16n8k16.matrixA")
    sch.cache_read(c, 1, "m16n8k16.matrixB")
    sch.decompose_reduction(c, k0)
    return sch, i1, before


def test_tensorize_mma_block_reads_and_writes_the_fragment_tiles() -> None:
    sch, i1, before = _mma_block()
    sch.tensorize(i1, "mma_m16n8k16_f16f16f32")
    text = sch.func.script()
    assert (
        "T.mma_sync_m16n8k16(matmul_m16n8k16_accumulator[vi0_o * 16, vi1_o * 8], "
        "A_m16n8k16_matrixA[vi0_o * 16, vk_o * 16], B_m16n8k16_matrixB[vk_o * 16, vi1_o * 8])"
    ) in text
    check_numeric(before, sch.func, emulate_gpu=True)  # serial meaning of the tile operation
    verify_trace_roundtrip(sch, before)


# ------------------------------------------------------------------------------------------
# one failure per requirement
def test_tensorize_requires_a_registered_intrinsic() -> None:
    sch, inner = _split4(_vector())
    err = assert_fails_unchanged(sch, "tensorize", inner, "no_such", match="argument 'intrin'")
    assert "test_add4" in str(err)  # the message lists the registered names


def test_tensorize_of_a_loop_requires_blockize_to_succeed() -> None:
    sch = Schedule(matmul(8, relu=True))
    i = sch.get_loops(sch.get_block("C"))[0]
    sch.reverse_compute_at(sch.get_block("D"), i)
    assert_fails_unchanged(sch, "tensorize", i, "test_add4", match="tensorize: blockize:")


@pytest.mark.parametrize(
    ("factor", "rhs", "match"),
    [
        (8, "b[i]", "has extent 8, the intrinsic 4"),
        (4, "a*b", "where the intrinsic computes"),
        (4, "b[n-1-i]", "is indexed at"),
        (4, "a[i]", "stands for two intrinsic buffers"),
    ],
    ids=["loop-extent", "computation", "tile-offset", "one-buffer-twice"],
)
def test_tensorize_requires_the_description_form(factor: int, rhs: str, match: str) -> None:
    sch, inner = _split4(_vector(16, rhs), factor)
    assert_fails_unchanged(sch, "tensorize", inner, "test_add4", match=match)


def test_tensorize_requires_the_intrinsic_storage_scopes() -> None:
    a = te.placeholder((16, 16), "float16", name="A")
    b = te.placeholder((16, 8), "float16", name="B")
    sch = Schedule(te.create_prim_func([a, b, tc.topi.matmul(a, b, out_dtype="float32")]))
    c = sch.get_block("matmul")
    sch.decompose_reduction(c, sch.get_loops(c)[0])
    i = sch.get_loops(c)[0]
    assert_fails_unchanged(
        sch, "tensorize", i, "mma_m16n8k16_f16f16f32", match='in scope "global", the intrinsic'
    )


def test_tensorize_requires_the_intrinsic_dtypes() -> None:
    sch, i1, _ = _mma_block()
    assert_fails_unchanged(sch, "tensorize", i1, "mma_m16n8k16_bf16bf16f32", match="is float16")


def test_tensorize_requires_no_init() -> None:
    a = te.placeholder((32, 32), "float16", name="A")
    b = te.placeholder((32, 16), "float16", name="B")
    sch = Schedule(te.create_prim_func([a, b, tc.topi.matmul(a, b, out_dtype="float32")]))
    c = sch.get_block("matmul")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 16])
    j0, j1 = sch.split(j, [None, 8])
    k0, k1 = sch.split(k, [None, 16])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    sch.cache_write(c, 0, "m16n8k16.accumulator")
    sch.cache_read(c, 0, "m16n8k16.matrixA")
    sch.cache_read(c, 1, "m16n8k16.matrixB")
    assert_fails_unchanged(sch, "tensorize", i1, "mma_m16n8k16_f16f16f32", match="has an init")


def test_tensorize_requires_tile_shaped_regions() -> None:
    # b is read with stride 2: 7 elements span each 4-wide tile
    a = te.placeholder((32,), "float32", name="a")
    b = te.placeholder((32,), "float32", name="b")
    out = te.compute((16,), lambda i: a[i] + b[i * 2], name="c")
    sch = Schedule(te.create_prim_func([a, b, out]))
    (i,) = sch.get_loops(sch.get_block("c"))
    _, inner = sch.split(i, [None, 4])
    assert_fails_unchanged(sch, "tensorize", inner, "test_add4", match="has extent 7, the tile 4")


# ------------------------------------------------------------------------------------------
# the registry
NO_ROOT = """\
@T.prim_func
def desc(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("add"):
            vi = T.axis.spatial(4, i)
            T.reads(A[vi], B[vi])
            T.writes(C[vi])
            C[vi] = A[vi] + B[vi]
"""


def test_register_tensor_intrin_rejects_malformed_pairs() -> None:
    desc, impl = _parse(ADD4_DESC), _parse(ADD4_IMPL)
    with pytest.raises(ScheduleError, match="already registered"):
        register_tensor_intrin("test_add4", desc, impl)
    copy_desc, _ = (_parse(t) for t in COPY2X2)
    with pytest.raises(ScheduleError, match="desc has 2 buffers, impl 3"):
        register_tensor_intrin("test_bad", copy_desc, impl)
    no_root = _parse(NO_ROOT)
    with pytest.raises(ScheduleError, match="need a root block"):
        register_tensor_intrin("test_bad", no_root, impl)
    undeclared = _parse(ADD4_DESC.replace("T.reads(A[0:4], B[0:4])", "T.reads(A[0:4])", 1))
    with pytest.raises(ScheduleError, match="does not declare every buffer"):
        register_tensor_intrin("test_bad", undeclared, impl)
    with pytest.raises(ScheduleError, match="impl body holds blocks"):
        register_tensor_intrin("test_bad", desc, desc)
    assert "test_bad" not in list_tensor_intrins()
    with pytest.raises(ScheduleError, match="no tensor intrinsic named"):
        get_tensor_intrin("test_bad")
