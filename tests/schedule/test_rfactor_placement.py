"""rfactor keeps both nests where the reduction was (regression: after ``compute_at`` the
write-back block used to land at the root, after its consumer), and its nest requirements."""

from __future__ import annotations

import numpy as np
from compute_workloads import assert_same_result, assert_script, matmul

import tilecraft as tc
from tilecraft.testing import assert_fails_unchanged, check_numeric, verify_trace_roundtrip

EXPECTED = """
def main(X: T.Buffer((4, 32), "float32"), T_softmax_norm: T.Buffer((4, 32), "float32")):
    with T.block("root"):
        T_softmax_maxelem = T.alloc_buffer((4,), "float32")
        T_softmax_exp = T.alloc_buffer((4, 32), "float32")
        T_softmax_expsum = T.alloc_buffer((4,), "float32")
        T_softmax_expsum_rf = T.alloc_buffer((4, 8), "float32")
        for i0, k0 in T.grid(4, 32):
            with T.block("T_softmax_maxelem"):
                vi0 = T.axis.spatial(4, i0)
                vk0 = T.axis.reduce(32, k0)
                T.reads(X[vi0, vk0], T_softmax_maxelem[vi0])
                T.writes(T_softmax_maxelem[vi0])
                with T.init():
                    T_softmax_maxelem[vi0] = T.float32("-inf")
                T_softmax_maxelem[vi0] = T.max(T_softmax_maxelem[vi0], X[vi0, vk0])
        for i0, i1 in T.grid(4, 32):
            with T.block("T_softmax_exp"):
                vi0 = T.axis.spatial(4, i0)
                vi1 = T.axis.spatial(32, i1)
                T.reads(X[vi0, vi1], T_softmax_maxelem[vi0])
                T.writes(T_softmax_exp[vi0, vi1])
                T_softmax_exp[vi0, vi1] = T.exp(X[vi0, vi1] - T_softmax_maxelem[vi0])
        for i0 in range(4):
            for ax1_0, ax1_1 in T.grid(4, 8):
                with T.block("T_softmax_expsum_rf"):
                    vi0 = T.axis.spatial(4, i0)
                    vax1_0 = T.axis.reduce(4, ax1_0)
                    vax1_1 = T.axis.spatial(8, ax1_1)
                    T.reads(T_softmax_exp[vi0, vax1_0 * 8 + vax1_1], T_softmax_expsum_rf[vi0, vax1_1])
                    T.writes(T_softmax_expsum_rf[vi0, vax1_1])
                    with T.init():
                        T_softmax_expsum_rf[vi0, vax1_1] = T.float32(0.0)
                    T_softmax_expsum_rf[vi0, vax1_1] = T_softmax_expsum_rf[vi0, vax1_1] + T_softmax_exp[vi0, vax1_0 * 8 + vax1_1]
            for ax1_1 in range(8):
                with T.block("T_softmax_expsum"):
                    vi0 = T.axis.spatial(4, i0)
                    vax1_1 = T.axis.reduce(8, ax1_1)
                    T.reads(T_softmax_expsum_rf[vi0, vax1_1], T_softmax_expsum[vi0])
                    T.writes(T_softmax_expsum[vi0])
                    with T.init():
                        T_softmax_expsum[vi0] = T.float32(0.0)
                    T_softmax_expsum[vi0] = T_softmax_expsum[vi0] + T_softmax_expsum_rf[vi0, vax1_1]
            for i1 in range(32):
                with T.block("T_softmax_norm"):
                    vi0 = T.axis.spatial(4, i0)
                    vi1 = T.axis.spatial(32, i1)
                    T.reads(T_softmax_exp[vi0, vi1], T_softmax_expsum[vi0])
                    T.writes(T_softmax_norm[vi0, vi1])
                    T_softmax_norm[vi0, vi1] = T_softmax_exp[vi0, vi1] * (T.float32(1.0) / T_softmax_expsum[vi0])
"""  # noqa: E501


def _softmax_ref(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)  # type: ignore[no-any-return]


def test_rfactor_after_compute_at_stays_under_the_shared_loop() -> None:
    x = tc.te.placeholder((4, 32), "float32", name="X")
    before = tc.te.create_prim_func([x, tc.topi.softmax(x)])
    sch = tc.Schedule(before)
    row, _ = sch.get_loops(sch.get_block("T_softmax_norm"))
    expsum = sch.get_block("T_softmax_expsum")
    sch.compute_at(expsum, row)
    _, ki = sch.split(sch.get_loops(expsum)[-1], [None, 8])
    rf = sch.rfactor(ki, 1)
    assert rf.name == "T_softmax_expsum_rf"
    assert_script(sch.func, EXPECTED)
    check_numeric(sch.func, _softmax_ref)
    assert_same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)
    # the partial sums can still be vectorized and their init hoisted, as the examples do
    sch.decompose_reduction(rf, sch.get_loops(rf)[-2])
    sch.vectorize(sch.get_loops(rf)[-1])
    check_numeric(sch.func, _softmax_ref)


def test_rfactor_under_reduction_loop_shared_with_a_producer() -> None:
    """The producer computed under the outer reduction loop stays in the rf nest."""
    a = tc.te.placeholder((8, 16), "float32", name="A")
    b = tc.te.compute((8, 16), lambda i, j: a[i, j] * 2.0, name="B")
    k = tc.te.reduce_axis((0, 16), name="k")
    c = tc.te.compute((8,), lambda i: tc.te.sum(b[i, k], axis=k), name="C")
    before = tc.te.create_prim_func([a, c])
    sch = tc.Schedule(before)
    blk = sch.get_block("C")
    _, k_loop = sch.get_loops(blk)
    ko, ki = sch.split(k_loop, [None, 4])
    sch.compute_at(sch.get_block("B"), ko)
    sch.rfactor(ki, 0)
    assert_same_result(before, sch.func)
    verify_trace_roundtrip(sch, before)


def test_rfactor_rejects_a_loop_binding_both_kinds() -> None:
    sch = tc.Schedule(matmul(8))
    _i, j, k = sch.get_loops(sch.get_block("C"))
    ko, ki = sch.split(k, [None, 4])
    sch.fuse(j, ko)
    assert_fails_unchanged(sch, "rfactor", ki, match="bind both spatial and reduce")


PREFIX = """
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), S: T.Buffer((8,), "float32"), P: T.Buffer((8, 8), "float32")):
    with T.block("root"):
        for i, k in T.grid(8, 8):
            with T.block("S"):
                vi = T.axis.spatial(8, i)
                vk = T.axis.reduce(8, k)
                T.reads(A[vi, vk], S[vi])
                T.writes(S[vi])
                with T.init():
                    S[vi] = T.float32(0.0)
                S[vi] = S[vi] + A[vi, vk]
            with T.block("P"):
                vi = T.axis.spatial(8, i)
                vk = T.axis.spatial(8, k)
                T.reads(S[vi])
                T.writes(P[vi, vk])
                P[vi, vk] = S[vi]
"""  # noqa: E501


def test_rfactor_rejects_another_block_reading_partial_results() -> None:
    func = tc.script.parse(PREFIX)
    assert isinstance(func, tc.ir.PrimFunc)
    sch = tc.Schedule(func)
    _, k = sch.get_loops(sch.get_block("S"))
    assert_fails_unchanged(sch, "rfactor", k, match='access "S"')


DEPENDENT = """
@T.prim_func
def main(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4,), "float32")):
    with T.block("root"):
        for i, ko in T.grid(4, 2):
            for ki in range({ki_range}):
                for u in range({u_range}):
                    with T.block("C"):
                        vi = T.axis.spatial(4, i)
                        vk = T.axis.reduce(8, {vk})
                        T.reads(A[vi, vk], C[vi])
                        T.writes(C[vi])
                        with T.init():
                            C[vi] = T.float32(0.0)
                        C[vi] = C[vi] + A[vi, vk]
"""


def _dependent(ki_range: str, u_range: str, vk: str) -> tc.Schedule:
    text = DEPENDENT.format(ki_range=ki_range, u_range=u_range, vk=vk)
    func = tc.script.parse(text)
    assert isinstance(func, tc.ir.PrimFunc)
    sch = tc.Schedule(func)
    # both variants compute row sums: the scheduled-but-rejected function is still valid
    check_numeric(func, lambda a: a.sum(-1))
    return sch


def test_rfactor_rejects_a_factored_loop_with_a_dependent_range() -> None:
    sch = _dependent("ko * 4, ko * 4 + 4", "1", "ki")
    _, _, ki, _ = sch.get_loops(sch.get_block("C"))
    assert_fails_unchanged(sch, "rfactor", ki, match='range of loop "ki" depends')


def test_rfactor_rejects_a_kept_loop_ranging_over_a_dropped_one() -> None:
    sch = _dependent("4", "ko, ko + 1", "ko * 4 + ki")
    _, _, ki, _ = sch.get_loops(sch.get_block("C"))
    assert_fails_unchanged(sch, "rfactor", ki, match='range of loop "u" depends')
