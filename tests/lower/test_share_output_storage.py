"""ShareOutputStorage: an intermediate buffer lives in the storage of the buffer its last stage
writes element-wise, only where that provably keeps the meaning."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import tilecraft as tc
from tilecraft import te, topi
from tilecraft.ir import Allocate, PrimFunc, walk
from tilecraft.lower import PassContext, lower
from tilecraft.lower.pipeline import cpu_pipeline
from tilecraft.lower.share_output_storage import ShareOutputStorage
from tilecraft.rules.cpu import GeneralReduction
from tilecraft.script import parse
from tilecraft.testing import assert_ir_equal, check_numeric

# B holds a row's exponentials, read by the row sum and by the scaled write into y
ROW = """
@T.prim_func
def main(x: T.Buffer((8, 16), "float32"), y: T.Buffer((8, 16), "float32")):
    for i in T.parallel(8):
        B = T.allocate((1, 16), "float32")
        s = T.allocate((1,), "float32")
        s[0] = T.float32(0.0)
        for j in T.vectorized(16):
            B[0, j] = T.exp(x[i, j])
        for j in range(16):
            s[0] = s[0] + B[0, j]
        {last}
"""
SCALE = """for j in T.vectorized(16):
            y[i, j] = B[0, j] / s[0]"""

ROW_SHARED = """
@T.prim_func
def main(x: T.Buffer((8, 16), "float32"), y: T.Buffer((8, 16), "float32")):
    for i in T.parallel(8):
        s = T.allocate((1,), "float32")
        s[0] = T.float32(0.0)
        for j in T.vectorized(16):
            y[i, j] = T.exp(x[i, j])
        for j in range(16):
            s[0] = s[0] + y[i, j]
        for j in T.vectorized(16):
            y[i, j] = y[i, j] / s[0]
"""


def share(func: PrimFunc) -> PrimFunc:
    return ShareOutputStorage()(func)


def allocated(func: PrimFunc) -> set[str]:
    return {n.buffer.name for n in walk(func.body) if isinstance(n, Allocate)}


def sharing_off() -> PassContext:
    """Lower without the pass (the function as it was before it)."""
    return PassContext(config={"lower.share_output_storage": False})


def unshared(func: PrimFunc) -> Callable[..., np.ndarray]:
    """A reference running ``func`` built without the pass; the output is shaped like the
    first input."""
    with sharing_off():
        lib = tc.build(func, target="cpu")

    def run(*inputs: np.ndarray) -> np.ndarray:
        out = np.empty_like(inputs[0])
        lib["main"](*inputs, out)
        return out

    return run


def check_same(func: PrimFunc, rtol: float = 1e-6, atol: float = 1e-7, **kw: object) -> None:
    """``func`` built with the pass equals ``func`` built without it."""
    check_numeric(func, unshared(func), rtol=rtol, atol=atol, **kw)  # type: ignore[arg-type]


def test_row_buffer_moves_into_the_output_row() -> None:
    func = parse(ROW.format(last=SCALE))
    assert_ir_equal(share(func), parse(ROW_SHARED))
    check_same(func)


def test_pass_is_in_the_cpu_pipeline_and_not_in_gpu_emulation() -> None:
    assert any(isinstance(p, ShareOutputStorage) for p in cpu_pipeline())
    assert not any(isinstance(p, ShareOutputStorage) for p in cpu_pipeline(emulate_gpu=True))
    assert "B" not in allocated(lower(parse(ROW.format(last=SCALE))))


@pytest.mark.parametrize(
    "last",
    [
        # B read again after the stage that writes y
        SCALE + "\n        for j in range(16):\n            s[0] = s[0] + B[0, j]",
        # transposed: y[i, j] reads B at another element than the one it writes
        "for j in range(16):\n            y[i, j] = B[0, 15 - j] / s[0]",
        # y covers half of B's row
        "for j in range(8):\n            y[i, j] = B[0, j] / s[0]",
        # a reduction into y: several iterations write one element
        "for j, k in T.grid(16, 2):\n            y[i, j] = B[0, j] + T.float32(1.0)",
        # two different elements of B in the stored value
        "for j in range(15):\n            y[i, j] = B[0, j] + B[0, j + 1]",
        # the stage reads y (an in-out buffer)
        "for j in range(16):\n            y[i, j] = y[i, j] + B[0, j]",
        # the index of y depends on data
        "for j in range(16):\n            y[i, T.Cast('int32', s[0]) % 16] = B[0, j]",
    ],
    ids=["reader_after", "reversed", "partial", "reduction", "two_reads", "reads_out", "gather"],
)
def test_declines_when_unproven(last: str) -> None:
    func = parse(ROW.format(last=last))
    assert "B" in allocated(share(func))


def test_declines_when_the_output_is_touched_in_between() -> None:
    sums = "s[0] = s[0] + B[0, j]"
    for stmt in ("s[0] = s[0] + B[0, j] + y[i, j]", "y[i, j] = s[0] + B[0, j]"):
        func = parse(ROW.format(last=SCALE).replace(sums, stmt))
        assert "B" in allocated(share(func))


def test_declines_into_an_input() -> None:
    """``x`` is read, so it is an input (or in-out) buffer: its storage is never borrowed."""
    src = ROW.format(last="for j in T.vectorized(16):\n            x[i, j] = B[0, j] / s[0]")
    func = parse(src)
    assert "B" in allocated(share(func))


def test_declines_across_dtypes() -> None:
    src = ROW.format(last=SCALE).replace(
        'y: T.Buffer((8, 16), "float32")', 'y: T.Buffer((8, 16), "float64")'
    )
    src = src.replace("y[i, j] = B[0, j] / s[0]", "y[i, j] = T.Cast('float64', B[0, j] / s[0])")
    func = parse(src)
    assert "B" in allocated(share(func))


def test_declines_a_transposed_whole_buffer() -> None:
    func = parse("""
@T.prim_func
def main(x: T.Buffer((16, 16), "float32"), y: T.Buffer((16, 16), "float32")):
    B = T.allocate((16, 16), "float32")
    for i, j in T.grid(16, 16):
        B[i, j] = x[i, j] * T.float32(2.0)
    for i, j in T.grid(16, 16):
        y[i, j] = B[j, i]
""")
    assert "B" in allocated(share(func))


ENCLOSING = """
@T.prim_func
def main(x: T.Buffer((8, 16), "float32"), y: T.Buffer((8, 16), "float32")):
    for i in range(8):
        O = T.allocate((1, 16), "float32")
        for j in range(16):
            O[0, j] = x[i, j]
        B = T.allocate((1, 16), "float32")
        for j in range(16):
            B[0, j] = x[i, j] * T.float32(3.0)
        {between}
        for j in range(16):
            O[0, j] = B[0, j] + T.float32(1.0)
        for j in range(16):
            y[i, j] = y[i, j] + O[0, j]
"""


def test_shares_an_enclosing_allocation_unless_read_in_between() -> None:
    fine = parse(ENCLOSING.format(between="y[i, 0] = T.float32(0.0)"))
    got = share(fine)
    assert allocated(got) == {"O"}
    assert "O[0, j] = x[i, j] * T.float32(3.0)" in got.script()
    bad = parse(ENCLOSING.format(between="y[i, 0] = O[0, 3]"))
    assert allocated(share(bad)) == {"O", "B"}


def test_symbolic_row_length() -> None:
    func = parse("""
@T.prim_func
def main(x: T.Buffer((4, n), "float32"), y: T.Buffer((4, n), "float32")):
    n = T.int32()
    for i in range(4):
        B = T.allocate((1, n), "float32")
        for j in range(n):
            B[0, j] = T.exp(x[i, j])
        for j in range(n):
            y[i, j] = B[0, j] * x[i, j]
""")
    assert "B" not in allocated(share(func))
    check_same(func, shape_vars={"n": 37})


def schedule(func: PrimFunc, preset: str = "avx512") -> PrimFunc:
    sch = GeneralReduction().apply(func, tc.Target(preset), False)
    assert isinstance(sch, tc.Schedule), sch
    return sch.func


N = tc.ir.Var("n", "int32")


@pytest.mark.parametrize(
    ("op", "shape", "sizes"),
    [
        (topi.softmax, (13, 1000), ()),
        (topi.softmax, (33, 5000), ()),
        (topi.softmax, (N, 64), (1, 7, 33)),
        (topi.softmax, (3, N), (1, 7, 100)),
        (topi.softmax, (3, 13, 20), ()),
        (topi.log_softmax, (7, 130), ()),
        (topi.log_softmax, (N, 40), (1, 9)),
    ],
)
def test_row_kernels_equal_before_and_after(
    op: Callable[..., te.Tensor], shape: tuple[object, ...], sizes: tuple[int, ...]
) -> None:
    x = te.placeholder(shape, "float32", name="x")
    func = schedule(te.create_prim_func([x, op(x)]))
    for n in sizes or (None,):
        check_same(func, shape_vars=None if n is None else {"n": n})


def test_attention_equals_before_and_after() -> None:
    q, k, v = (te.placeholder((2, 13, 8), "float32", name=n) for n in "qkv")
    func = schedule(te.create_prim_func([q, k, v, topi.causal_attention(q, k, v)]))
    with sharing_off():
        before = allocated(lower(func))
    after = allocated(lower(func))
    assert before - after == {"attention_softmax_exp"}
    check_same(func)


@pytest.mark.parametrize("preset", ["avx2", "avx512"])
def test_softmax_writes_exp_into_the_output_row(preset: str) -> None:
    """No row-sized buffer (stack or heap) is left: the exponentials go to the output row,
    which the last loop scales in place."""
    for rows, cols in ((64, 1024), (33, 5000)):
        x = te.placeholder((rows, cols), "float32", name="x")
        func = schedule(te.create_prim_func([x, topi.softmax(x)]), preset)
        target = tc.Target(preset)
        kernel = tc.codegen.c_source(func, target).split("TC_EXPORT void")[1]
        assert "T_softmax_exp[" not in kernel
        assert f"[{cols}]" not in kernel
        assert "malloc" not in kernel
        row = f"T_softmax_norm[((i0 * {cols}) + i1)]"
        assert f"{row} = ({row} * (1.0f / T_softmax_expsum[0]));" in kernel


def test_config_turns_the_pass_off() -> None:
    func = parse(ROW.format(last=SCALE))
    with sharing_off():
        assert "B" in allocated(lower(func))
        assert "float B[16]" in tc.codegen.c_source(func)
    assert "float B[16]" not in tc.codegen.c_source(func)


def test_keeps_a_local_register_tile() -> None:
    """A ``local`` buffer is a tile the schedule keeps in registers (here a matmul's
    accumulators, copied out element-wise): it stays."""
    a, b = (te.placeholder((32, 32), "float32", name=n) for n in "AB")
    sch = tc.Schedule(te.create_prim_func([a, b, topi.matmul(a, b)]))
    mm = sch.get_block("matmul")
    i, j, k = sch.get_loops(mm)
    io, ii = sch.split(i, [None, 4])
    jo, ji = sch.split(j, [None, 16])
    sch.reorder(io, jo, k, ii, ji)
    sch.reverse_compute_at(sch.cache_write(mm, 0, "local"), jo)
    assert "matmul_local" in allocated(lower(sch.func))


def test_declines_a_tile_that_is_not_a_contiguous_run_of_the_output() -> None:
    func = parse("""
@T.prim_func
def main(x: T.Buffer((16, 16), "float32"), y: T.Buffer((16, 16), "float32")):
    for io, jo in T.grid(4, 4):
        B = T.allocate((4, 4), "float32")
        for i, j in T.grid(4, 4):
            B[i, j] = x[io * 4 + i, jo * 4 + j] * T.float32(2.0)
        for i, j in T.grid(4, 4):
            y[io * 4 + i, jo * 4 + j] = B[i, j] + T.float32(1.0)
""")
    assert "B" in allocated(share(func))
    whole_rows = parse("""
@T.prim_func
def main(x: T.Buffer((16, 16), "float32"), y: T.Buffer((16, 16), "float32")):
    for io in range(4):
        B = T.allocate((4, 16), "float32")
        for i, j in T.grid(4, 16):
            B[i, j] = x[io * 4 + i, j] * T.float32(2.0)
        for i, j in T.grid(4, 16):
            y[io * 4 + i, j] = B[i, j] + T.float32(1.0)
""")
    assert "B" not in allocated(share(whole_rows))
    check_same(whole_rows)


def test_keeps_a_one_element_accumulator() -> None:
    """A row's sum accumulated in a one-element buffer stays there (a register), not in the
    output's memory."""
    func = parse("""
@T.prim_func
def main(x: T.Buffer((8, 16), "float32"), y: T.Buffer((8, 1), "float32")):
    for i in range(8):
        s = T.allocate((1, 1), "float32")
        s[0, 0] = T.float32(0.0)
        for j in range(16):
            s[0, 0] = s[0, 0] + x[i, j]
        y[i, 0] = s[0, 0] * T.float32(0.0625)
""")
    assert "s" in allocated(share(func))


def test_softmax_row_of_symbolic_length_lives_in_the_output_row() -> None:
    # the exponentials of a row of symbolic length are written into the output row and
    # scaled there, as for a static row (no per-row heap buffer)
    s = tc.ir.Var("s", "int32")
    x = tc.te.placeholder((1, 12, s, s), "float32", name="x")
    func = tc.te.create_prim_func([x, tc.topi.softmax(x, axis=-1)])
    sch = tc.rules.cpu.GeneralReduction().apply(func, tc.Target("avx2 -num-cores=2"), False)
    assert isinstance(sch, tc.Schedule)
    lib = tc.build(sch.func, "cpu")
    assert "T_softmax_exp[" not in lib.source
    for n in (1, 5, 40):
        a = np.random.default_rng(n).standard_normal((1, 12, n, n)).astype(np.float32)
        out = np.zeros_like(a)
        lib["main"](a, out)
        e = np.exp(a - a.max(-1, keepdims=True))
        np.testing.assert_allclose(out, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
