"""compute_inline and reverse_compute_inline: expected IR, numerics and one failure per rule."""

from __future__ import annotations

import pytest
from compute_workloads import (
    assert_same_result,
    assert_script,
    elementwise_chain,
    matmul,
    row_sum_scale,
)
from named_calls import compute_inline, reverse_compute_inline

import tilecraft as tc
from tilecraft.errors import ScheduleError
from tilecraft.schedule import Schedule
from tilecraft.testing import check_numeric, verify_trace_roundtrip

INLINED = """\
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    with T.block("root"):
        for i, j in T.grid(8, 8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                vj = T.axis.spatial(8, j)
                T.reads(A[vj, vi])
                T.writes(C[vi, vj])
                C[vi, vj] = (A[vj, vi] + T.float32(1.0)) * T.float32(2.0)"""

REVERSE_INLINED = """\
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    with T.block("root"):
        for i, j in T.grid(8, 8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                vj = T.axis.spatial(8, j)
                T.reads(A[vi, vj])
                T.writes(C[vj, vi])
                C[vj, vi] = (A[vi, vj] + T.float32(1.0)) * T.float32(2.0)"""


def test_compute_inline_elementwise() -> None:
    before = elementwise_chain()
    after = compute_inline(before, "B")
    assert_script(after, INLINED)
    assert_same_result(before, after)


def test_compute_inline_leaves_input_untouched() -> None:
    before = elementwise_chain()
    text = before.script()
    compute_inline(before, "B")
    assert before.script() == text


def test_compute_inline_rejects_block_with_init() -> None:
    with pytest.raises(ScheduleError, match=r'compute_inline: block "S" is not a single store'):
        compute_inline(row_sum_scale(), "S")


def test_reverse_compute_inline() -> None:
    before = elementwise_chain()
    after = reverse_compute_inline(before, "C")
    assert_script(after, REVERSE_INLINED)
    assert_same_result(before, after)


def test_compute_inline_rejects_output() -> None:
    with pytest.raises(ScheduleError, match=r'compute_inline: .*function output "C"'):
        compute_inline(elementwise_chain(), "C")


def test_compute_inline_rejects_reduction() -> None:
    with pytest.raises(ScheduleError, match=r"compute_inline: .*not a single store"):
        compute_inline(matmul(4, relu=True), "C")


def test_compute_inline_rejects_missing_block() -> None:
    with pytest.raises(ScheduleError, match=r'get_block: no block named "X"'):
        compute_inline(elementwise_chain(), "X")
    sch = Schedule(elementwise_chain())
    b = sch.get_block("B")
    sch.compute_inline(b)
    func = sch.func
    with pytest.raises(ScheduleError, match=r'compute_inline: block handle "B" is stale'):
        sch.compute_inline(b)
    assert sch.func is func


def test_compute_inline_rejects_root() -> None:
    with pytest.raises(ScheduleError, match=r"root block"):
        compute_inline(elementwise_chain(), "root")


def test_reverse_compute_inline_rejects_reduction_producer() -> None:
    with pytest.raises(ScheduleError, match=r"reverse_compute_inline: .*not a single elementwise"):
        reverse_compute_inline(matmul(4, relu=True), "D")


def test_reverse_compute_inline_rejects_two_produced_reads() -> None:
    # Y reads A (a parameter) and S; only S is produced, but Y reads S at [vi] only.
    with pytest.raises(ScheduleError, match=r"reverse_compute_inline: .*at its iterators"):
        reverse_compute_inline(row_sum_scale(), "Y")


def test_reverse_compute_inline_rejects_no_producer() -> None:
    with pytest.raises(ScheduleError, match=r"reverse_compute_inline: .*0 produced"):
        reverse_compute_inline(elementwise_chain(), "B")


def test_inlining_a_symbolic_reshape_reads_through_the_consumer_indices() -> None:
    """Regression: when the producer's read could not be bounded (a symbolic floordiv), the
    consumer was given the producer's region verbatim, over the producer's own iterators,
    which are undefined in the consumer (the verifier rejects such IR)."""
    import tilecraft as tc
    from tilecraft.testing import check_numeric

    n = tc.ir.Var("n", "int32")
    x = tc.te.placeholder((1, n, 64), "float32", name="x")
    y = tc.topi.transpose(tc.topi.reshape(x, (1, n, 4, 16)), (0, 2, 1, 3))
    func = tc.te.create_prim_func([x, y])
    sch = tc.Schedule(func, verify=True)
    sch.compute_inline(sch.get_block("T_reshape"))
    (consumer,) = [b for b in tc.schedule._tree.block_names(sch.func) if b != "root"]
    reads = sch.get(sch.get_block(consumer)).reads
    defined = {id(iv.var) for iv in sch.get(sch.get_block(consumer)).iter_vars} | {id(n)}
    used = [v for r in reads for v in tc.ir.collect_vars(r)]
    assert used
    assert all(id(v) in defined for v in used)
    for size in (1, 3):
        check_numeric(func, sch.func, shape_vars={"n": size})


def test_compute_inline_into_a_blockized_consumer_rewrites_both_blocks() -> None:
    """The consumer was blockized: its outer block and its inner block both declare reads of
    the inlined buffer, and both must read the producer's input instead (before, the inner
    block still named the removed buffer)."""
    x = tc.te.placeholder((16, 8), "float32", name="x")
    y = tc.topi.transpose(x, (1, 0))
    before = tc.te.create_prim_func([x, tc.te.compute((8, 16), lambda i, j: y[i, j] * 2.0)])
    sch = Schedule(before)
    (consumer,) = sch.get_consumers(sch.get_block("T_transpose"))
    _, j = sch.get_loops(consumer)
    outer = sch.blockize(j)
    sch.compute_inline(sch.get_block("T_transpose"))
    tc.ir.verify(sch.func)
    for blk in (sch.get(outer), sch.get(consumer)):
        assert [r.buffer.name for r in blk.reads] == ["x"]
    check_numeric(before, sch.func)
    verify_trace_roundtrip(sch, before)
