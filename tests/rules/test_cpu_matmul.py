"""CPU Matmul rule: what it takes, what it declines, and that every schedule computes exactly
what the unscheduled function computes (odd, symbolic, batched, fused, conv, dtypes)."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft.ir import PrimFunc, Var
from tilecraft.rules.cpu import Matmul, MatmulConfig
from tilecraft.schedule.testing_utils import verify_trace_roundtrip

CPU = tc.Target("cpu")
AVX512 = tc.Target("avx512")  # for expectations that name AVX-512's register tile
T = tc.topi
te = tc.te


def _matmul(m: int | Var, n: int | Var, k: int, dtype: str = "float32") -> PrimFunc:
    a = te.placeholder((m, k), dtype, name="A")
    b = te.placeholder((k, n), dtype, name="B")
    return te.create_prim_func([a, b, T.matmul(a, b)])


def _linear(shape: tuple[int | Var, ...], n: int, bias: bool = False) -> PrimFunc:
    """``x @ W^T (+ b)`` with the weight stored (out, in)."""
    x = te.placeholder(shape, "float32", name="x")
    w = te.placeholder((n, shape[-1]), "float32", name="W")
    if not bias:
        return te.create_prim_func([x, w, T.dense(x, w)])
    b = te.placeholder((n,), "float32", name="b")
    return te.create_prim_func([x, w, b, T.dense(x, w, b)])


def _schedule(
    func: PrimFunc, config: MatmulConfig | None = None, target: tc.Target = CPU
) -> tc.Schedule:
    got = Matmul(config).apply(func, target, False)
    assert isinstance(got, tc.Schedule), got
    return got


def _scheduled_equal(func: PrimFunc, **kw: object) -> tc.Schedule:
    sch = _schedule(func)
    tc.testing.check_numeric(sch.func, func, rtol=1e-4, atol=1e-5, **kw)  # type: ignore[arg-type]
    return sch


SIZES = [1, 7, 13, 100]


ODD = [(7, 13, 100), (13, 100, 7), (100, 7, 13), (64, 64, 64), (100, 100, 1), (7, 1000, 13),
       (1000, 13, 7)]  # fmt: skip


@pytest.mark.parametrize(("m", "n", "k"), ODD)
def test_matmul_odd_sizes_scheduled_and_equal(m: int, n: int, k: int) -> None:
    sch = _scheduled_equal(_matmul(m, n, k))
    assert "T.parallel" in sch.func.script()
    assert "T.vectorized" in sch.func.script()


@pytest.mark.slow
@pytest.mark.parametrize(("m", "n", "k"), list(itertools.product(SIZES, SIZES, SIZES)))
def test_every_odd_size_is_taken_by_matmul_or_gemv(m: int, n: int, k: int) -> None:
    _every_size(m, n, k)


@pytest.mark.parametrize(("m", "n", "k"), [(1, 7, 13), (13, 1, 7), (1, 1, 100), (7, 7, 1)])
def test_odd_sizes_taken_by_matmul_or_gemv_sample(m: int, n: int, k: int) -> None:
    _every_size(m, n, k)


def _every_size(m: int, n: int, k: int) -> None:
    """A plain matmul is never declined by both rules, except a dot product (1 x 1 output)."""
    func = _matmul(m, n, k)
    outcome = dl.try_rules(func, [dl.cpu.Matmul(), dl.cpu.GEMV()], CPU, strict=True)
    if m == 1 and n == 1:
        assert outcome.rule is None
        assert all("dot product" in d.reason for _, d in outcome.declines)
        return
    assert outcome.rule == ("GEMV" if 1 in (m, n) else "Matmul")
    assert outcome.schedule is not None
    tc.testing.check_numeric(outcome.schedule.func, func, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_matmul_other_dtypes(dtype: str) -> None:
    func = _matmul(24, 40, 36, dtype)
    sch = _schedule(func)
    tol = 1e-2 if dtype == "float16" else 1e-10
    tc.testing.check_numeric(sch.func, func, rtol=tol, atol=tol)


def test_linear_weight_out_in_packs_a_transposed_panel() -> None:
    func = _linear((48, 160), 64)  # a 160 x 32 float32 panel: 20 KiB, over the stack limit
    sch = _schedule(func, target=AVX512)  # 32 columns: AVX-512's 2 x 16-lane register tile
    tc.testing.check_numeric(sch.func, func, rtol=1e-4, atol=1e-5)
    text = sch.func.script()
    # the panel of W, re-laid out with the output axis innermost, under the panel loop
    assert 'W_global = T.alloc_buffer((160, 64), "float32")' in text
    verify_trace_roundtrip(sch, func)


def test_a_contiguous_panel_small_enough_for_the_stack_is_read_in_place() -> None:
    sch = _scheduled_equal(_matmul(48, 64, 40))  # B (in, out): a 40 x 32 panel, 5 KiB
    assert "B_global" not in sch.func.script()


def test_a_small_strided_panel_is_transposed_before_the_nest() -> None:
    # W (out, in): the micro-kernel would gather W[j, k] along j, a stride of a whole row
    # (the TinyLlama prefill's attention scores: 250 ms read in place, 1 ms transposed)
    # laid out as panels of the register tile's 32 columns (AVX-512), each 40 x 32 contiguous
    func = _linear((48, 40), 64)
    sch = Matmul().apply(func, tc.Target("avx512"), False)
    assert isinstance(sch, tc.Schedule)
    tc.testing.check_numeric(sch.func, func, rtol=1e-4, atol=1e-5)
    text = sch.func.script()
    assert 'W_global = T.alloc_buffer((2, 40, 32), "float32")' in text
    loops = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("for ")]
    assert loops[:2] == ["for ax1 in T.parallel(40):", "for ax0 in T.vectorized(64):"]


@pytest.mark.parametrize("n", [72, 100])
def test_ragged_and_symbolic_tiles_are_padded_not_guarded(n: int) -> None:
    # a guard on the micro-kernel keeps the init in the K loop and a branch in the vector
    # loop; padded operands make every register tile whole (only the write-back is guarded)
    s = Var("seq", "int32")
    for func, block in ((_linear((1, s, 40), n), "dense"), (_matmul(13, n, 24), "matmul")):
        sch = _schedule(func)
        text = sch.func.script()
        assert "_pad = T.alloc_buffer" in text
        main = text[text.index(f'T.block("{block}")') :]
        assert "T.where" not in main[: main.index("T.reads")]
        assert f'T.block("{block}_init")' in text  # the init is out of the K loop
        assert f'T.block("{block}_unpad")' in text  # the guarded write-back
        for seq in (1, 5, 13):
            kw = {"shape_vars": {"seq": seq}} if "seq" in text else {}
            tc.testing.check_numeric(sch.func, func, rtol=1e-4, atol=1e-5, seed=seq, **kw)
        verify_trace_roundtrip(sch, func)


def test_symbolic_rows_linear_and_batch() -> None:
    s = Var("seq", "int32")
    func = _linear((1, s, 40), 48)
    for seq in (1, 5, 13):
        sch = _scheduled_equal(func, shape_vars={"seq": seq}, seed=seq)
    verify_trace_roundtrip(sch, func)
    b = Var("batch", "int32")
    a = te.placeholder((b, 12, 20), "float32", name="A")
    w = te.placeholder((b, 20, 36), "float32", name="B")
    bmm = te.create_prim_func([a, w, T.matmul(a, w)])
    for batch in (1, 3):
        _scheduled_equal(bmm, shape_vars={"batch": batch})


def test_batched_matmul_parallel_over_batch_and_panels() -> None:
    q = te.placeholder((2, 3, 16, 8), "float32", name="q")
    k = te.placeholder((2, 3, 24, 8), "float32", name="k")
    func = te.create_prim_func([q, k, T.matmul(q, k, transpose_b=True)])
    sch = _scheduled_equal(func)
    verify_trace_roundtrip(sch, func)


def _fused(m: int | Var, n: int, k: int, epilogue: str) -> PrimFunc:
    """A FuseTIR-like function: matmul then elementwise blocks, as the graph makes them."""
    a = te.placeholder((m, k), "float32", name="A")
    w = te.placeholder((k, n), "float32", name="W")
    bias = te.placeholder((n,), "float32", name="bias")
    res = te.placeholder((m, n), "float32", name="res")
    c = T.matmul(a, w)
    if epilogue == "bias_relu":
        return te.create_prim_func([a, w, bias, T.relu(T.add(c, bias))])
    if epilogue == "gelu":
        return te.create_prim_func([a, w, T.gelu(c)])
    if epilogue == "residual":
        return te.create_prim_func([a, w, res, T.add(res, c)])
    if epilogue == "silu_mul":
        return te.create_prim_func([a, w, res, T.multiply(T.silu(c), res)])
    raise AssertionError(epilogue)


@pytest.mark.parametrize("epilogue", ["bias_relu", "gelu", "residual", "silu_mul"])
def test_epilogue_fused_into_the_write_back(epilogue: str) -> None:
    func = _fused(40, 48, 24, epilogue)
    sch = _scheduled_equal(func)
    text = sch.func.script()
    # the matmul's intermediate is the local register tile, and no epilogue block is left
    # at the root reading the whole intermediate
    assert 'matmul = T.alloc_buffer((40, 48), "float32", scope="local")' in text
    loops_at_root = [ln for ln in text.splitlines() if ln.startswith("        for ")]
    assert len(loops_at_root) == 1, text
    verify_trace_roundtrip(sch, func)


def test_epilogue_with_symbolic_rows() -> None:
    s = Var("m", "int32")
    func = _fused(s, 32, 16, "bias_relu")
    for m in (3, 17):
        _scheduled_equal(func, shape_vars={"m": m})


def test_conv2d_as_implicit_gemm_with_padding_and_epilogue() -> None:
    x = te.placeholder((2, 6, 9, 11), "float32", name="x")
    w = te.placeholder((8, 6, 3, 3), "float32", name="w")
    b = te.placeholder((1, 8, 1, 1), "float32", name="b")
    conv = T.conv2d(x, w, padding=1)
    func = te.create_prim_func([x, w, b, T.relu(T.add(conv, b))])
    sch = _scheduled_equal(func)
    text = sch.func.script()
    assert "pad_temp_reindex" in text  # the im2col panel, padding folded in
    assert 'block("pad_temp")' not in text
    verify_trace_roundtrip(sch, func)
    strided = T.conv2d(x, w, stride=2, padding=(1, 0))
    _scheduled_equal(te.create_prim_func([x, w, strided]))


@pytest.mark.parametrize(("bits", "width", "tile"), [(512, 28, 32), (256, 20, 8), (256, 28, 16)])
def test_conv2d_row_not_a_whole_vector_is_padded_to_whole_vectors(
    bits: int, width: int, tile: int
) -> None:
    """A conv's output row longer than a vector but not a whole number of vectors (ResNet's
    28-wide rows) is padded to the register tile that pads it least, so the micro-kernel runs
    whole vectors (a 28-wide tile ran a vector and a partial one per row: 3.6x slower). The
    zero-filled copy of the im2col panel is the staging block itself, packed per tile."""
    x = te.placeholder((1, 4, width, width), "float32", name="x")
    w = te.placeholder((16, 4, 3, 3), "float32", name="w")
    func = te.create_prim_func([x, w, T.conv2d(x, w, padding=1)])
    cfg = dataclasses.replace(MatmulConfig.for_target(AVX512), vector_bits=bits, nr_vectors=2)
    sch = _schedule(func, cfg, AVX512)  # the rest of the config from one pinned preset
    tc.testing.check_numeric(sch.func, func, rtol=1e-4, atol=1e-5)
    loops: list[tc.ir.For] = []
    tc.ir.post_order_visit(
        sch.func.body, lambda n: loops.append(n) if isinstance(n, tc.ir.For) else None
    )
    vectorized = [
        lp.extent.value
        for lp in loops
        if lp.kind is tc.ir.ForKind.VECTORIZED and lp.loop_var.name.startswith("d_1")
    ]
    assert vectorized
    assert set(vectorized) == {tile}
    blocks = tc.schedule._tree.block_names(sch.func)
    assert "pad_temp_reindex_pad" in blocks
    assert "pad_temp_reindex" not in blocks
    verify_trace_roundtrip(sch, func)


def test_conv2d_nhwc() -> None:
    x = te.placeholder((1, 10, 10, 8), "float32", name="x")
    w = te.placeholder((3, 3, 8, 16), "float32", name="w")
    _scheduled_equal(te.create_prim_func([x, w, T.conv2d(x, w, padding=1, layout="NHWC")]))


def test_config_follows_the_target() -> None:
    cfg = MatmulConfig.for_target(CPU)
    assert cfg.num_cores == CPU.num_cores
    assert cfg.l2_bytes == CPU.l2_bytes
    assert cfg.vector_bits == max(CPU.simd_bits, 128)
    assert cfg.lanes(tc.ir.dtype("float32")) * 32 == cfg.vector_bits
    small = MatmulConfig(vector_bits=128, mr=4, nr_vectors=1, num_cores=3)
    func = _matmul(20, 24, 16)
    sch = _schedule(func, small)
    tc.testing.check_numeric(sch.func, func, rtol=1e-4, atol=1e-5)
    assert "T.unroll(4)" in sch.func.script()


def test_declines_say_why() -> None:
    x = te.placeholder((8, 16), "float32", name="x")
    cases = {
        "needs exactly one reduction block, found 0": te.create_prim_func([x, T.relu(x)]),
        "needs exactly one reduction block, found 2": te.create_prim_func([x, T.softmax(x)]),
        "not an einsum": te.create_prim_func([x, T.sum(x, axis=1)]),
        "a GEMV": _matmul(1, 16, 8),
        "a dot product": _matmul(1, 1, 8),
    }
    for reason, func in cases.items():
        got = Matmul().apply(func, CPU, False)
        assert isinstance(got, dl.Decline), reason
        assert reason in got.reason, (reason, got.reason)
    sch = tc.Schedule(_matmul(8, 8, 8))
    sch.split(sch.get_loops(sch.get_block("matmul"))[0], factors=[2, 4])
    got = Matmul().apply(sch.func, CPU, False)
    assert isinstance(got, dl.Decline)
    assert got.reason.startswith("the function is not normalized")


def test_schedule_runs_with_several_threads() -> None:
    func = _matmul(96, 128, 64)
    lib = tc.build(_schedule(func).mod, target="cpu")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((96, 64), dtype=np.float32)
    b = rng.standard_normal((64, 128), dtype=np.float32)
    c = np.empty((96, 128), np.float32)
    lib["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
