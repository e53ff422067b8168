"""CPU GEMV rule: both matrix layouts, batched, symbolic, fused, dtypes; declines."""

from __future__ import annotations

import pytest

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft.ir import PrimFunc, Var
from tilecraft.rules.cpu import GEMV, GEMVConfig
from tilecraft.schedule.testing_utils import verify_trace_roundtrip

CPU = tc.Target("avx512 -num-cores=2")  # the schedules depend on the ISA and the cores
T = tc.topi
te = tc.te


def _gemv(n: int | Var, k: int, transposed: bool, dtype: str = "float32",
          batch: int | Var | None = None) -> PrimFunc:  # fmt: skip
    """``y = W x``: W stored (N, K) (rows contiguous along K) or (K, N) (``transposed``)."""
    lead = () if batch is None else (batch,)
    x = te.placeholder((*lead, 1, k), dtype, name="x")
    w = te.placeholder((*lead, k, n) if transposed else (*lead, n, k), dtype, name="W")
    return te.create_prim_func([x, w, T.matmul(x, w, transpose_b=not transposed)])


def _scheduled_equal(
    func: PrimFunc, rtol: float = 1e-4, target: tc.Target = CPU, **kw: object
) -> tc.Schedule:
    sch = GEMV().apply(func, target, False)
    assert isinstance(sch, tc.Schedule), sch
    tc.testing.check_numeric(sch.func, func, rtol=rtol, atol=rtol, **kw)  # type: ignore[arg-type]
    return sch


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize(("n", "k"), [(1000, 100), (100, 1000), (7, 13), (13, 7), (64, 1),
                                      (256, 64)])  # fmt: skip
def test_gemv_both_layouts_scheduled_and_equal(n: int, k: int, transposed: bool) -> None:
    sch = _scheduled_equal(_gemv(n, k, transposed))
    assert "T.parallel" in sch.func.script()


def test_rows_layout_splits_the_reduction_into_vector_partial_sums() -> None:
    func = _gemv(64, 256, transposed=False)
    sch = _scheduled_equal(func)
    text = sch.func.script()
    assert "matmul_rf" in text
    assert 'scope="local"' in text
    verify_trace_roundtrip(sch, func)


def test_columns_layout_streams_blocks_of_rows_when_k_splits_evenly() -> None:
    func = _gemv(512, 256, transposed=True)
    sch = _scheduled_equal(func)
    text = sch.func.script()
    # one partial row per chunk of K, in parallel; the partial rows added after
    assert "matmul_rf = T.alloc_buffer((" in text
    assert "for k_0 in T.parallel(" in text
    verify_trace_roundtrip(sch, func)


@pytest.mark.parametrize(("preset", "lanes"), [("x86-64-v2", 8), ("avx2", 16), ("avx512", 32)])
def test_columns_layout_tiles_the_output_axis_otherwise(preset: str, lanes: int) -> None:
    func = _gemv(4096, 13, transposed=True)
    sch = _scheduled_equal(func, target=tc.Target(f"{preset} -num-cores=2"))
    text = sch.func.script()
    assert "_rf" not in text
    # tiles of two SIMD registers of float32 along the output: 2 x 128/256/512 bits
    assert text.count(f"T.vectorized({lanes})") == 3
    assert "T.vectorized(" not in text.replace(f"T.vectorized({lanes})", "")
    verify_trace_roundtrip(sch, func)


@pytest.mark.parametrize("dtype", ["float64", "float16"])
@pytest.mark.parametrize("transposed", [False, True])
def test_gemv_other_dtypes(dtype: str, transposed: bool) -> None:
    _scheduled_equal(_gemv(48, 80, transposed, dtype), rtol=1e-2 if dtype == "float16" else 1e-10)


@pytest.mark.parametrize("transposed", [False, True])
def test_batched_and_symbolic_gemv(transposed: bool) -> None:
    _scheduled_equal(_gemv(24, 40, transposed, batch=3))
    b = Var("b", "int32")
    func = _gemv(24, 40, transposed, batch=b)
    for batch in (1, 4):
        _scheduled_equal(func, shape_vars={"b": batch})
    rows = Var("n", "int32")  # a KV-cache length: symbolic rows
    func = _gemv(rows, 32, transposed)
    for n in (1, 9):
        _scheduled_equal(func, shape_vars={"n": n})


@pytest.mark.parametrize("transposed", [False, True])
def test_fused_bias_relu_epilogue(transposed: bool) -> None:
    x = te.placeholder((1, 96), "float32", name="x")
    w = te.placeholder((96, 80) if transposed else (80, 96), "float32", name="W")
    bias = te.placeholder((80,), "float32", name="bias")
    y = T.relu(T.add(T.matmul(x, w, transpose_b=not transposed), bias))
    func = te.create_prim_func([x, w, bias, y])
    text = _scheduled_equal(func).func.script()
    assert 'block("T_add")' not in text  # bias and relu in one block
    if not transposed:  # ... computed per row tile from a local accumulator
        assert 'matmul = T.alloc_buffer((1, 80), "float32", scope="local")' in text


def test_config_numbers_are_used() -> None:
    cfg = GEMVConfig(vector_bits=128, rows=2, k_vectors=1, col_vectors=2, num_cores=1)
    func = _gemv(10, 12, transposed=False)
    sch = GEMV(cfg).apply(func, CPU, False)
    assert isinstance(sch, tc.Schedule)
    assert "T.unroll(2)" in sch.func.script()
    tc.testing.check_numeric(sch.func, func, rtol=1e-4, atol=1e-4)
    assert GEMVConfig.for_target(CPU).num_cores == CPU.num_cores


def test_declines_say_why() -> None:
    a = te.placeholder((8, 16), "float32", name="A")
    b = te.placeholder((16, 8), "float32", name="B")
    cases = {
        "a matmul": te.create_prim_func([a, b, T.matmul(a, b)]),
        "dot product": _gemv(1, 16, False),
        "needs exactly one reduction block, found 0": te.create_prim_func([a, T.relu(a)]),
    }
    for reason, func in cases.items():
        got = GEMV().apply(func, CPU, False)
        assert isinstance(got, dl.Decline), reason
        assert reason in got.reason, (reason, got.reason)


@pytest.mark.parametrize("preset", ["avx512", "avx2"])
def test_columns_no_vector_tile_divides_keep_the_whole_row_unguarded(preset: str) -> None:
    # 333 columns: a guard inside the vectorized loop cost 5-8x; the whole row (1.3 KB)
    # is one accumulator, its tail masked by the C compiler
    target = tc.Target(f"{preset} -num-cores=2")
    func = _gemv(333, 300, transposed=True)
    sch = _scheduled_equal(func, target=target)
    text = sch.func.script()
    assert "T.where" not in text
    assert "T.vectorized(333)" in text
    # a row over the budget keeps guarded tiles of whole vectors
    wide = GEMV(GEMVConfig.for_target(target)).apply(_gemv(5001, 300, True), target, False)
    assert isinstance(wide, tc.Schedule)
    assert "T.where" in wide.func.script()
    assert GEMVConfig.for_target(target).row_bytes == target.l1d_bytes // 2
