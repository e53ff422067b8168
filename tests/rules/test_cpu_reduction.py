"""The CPU ``Reduction`` rule: vector forms, parallel threshold, epilogues, declines."""

from __future__ import annotations

import pytest
from cpu_rule_workloads import CPU, OPS, N, block_names, check_rule, loop_kinds, ph, unary

import tilecraft as tc
from tilecraft import te, topi
from tilecraft.rules import Decline
from tilecraft.rules.cpu import Reduction
from tilecraft.schedule.testing_utils import verify_trace_roundtrip

AVX2 = Reduction(Reduction.Config(vector_bits=256, num_cores=4))


def test_config_comes_from_the_target() -> None:
    cfg = Reduction.Config.for_target(CPU)
    assert cfg.vector_bits == max(128, CPU.simd_bits)
    assert cfg.num_cores == CPU.num_cores
    assert Reduction.Config(vector_bits=256).lanes(tc.ir.dtype("float32")) == 8
    assert Reduction.Config(vector_bits=512).lanes(tc.ir.dtype("float64")) == 8
    assert Reduction.Config(vector_bits=128).lanes(tc.ir.dtype("int8")) == 16


def test_row_sum_is_a_vector_of_partial_sums_under_a_parallel_row_loop() -> None:
    func = unary(topi.sum, (64, 1024), axis=1)()
    sch = AVX2.apply(func, CPU, False)
    assert isinstance(sch, tc.Schedule)
    # 2 vectors of 8 float32 partial sums, initialised and accumulated vectorized
    assert loop_kinds(sch, "T_sum_rf") == [("parallel", 64), ("serial", 64), ("vectorized", 16)]
    assert loop_kinds(sch, "T_sum_rf_init") == [("parallel", 64), ("vectorized", 16)]
    # the fold: a plain loop (an unroll pragma turns off gcc's if-conversion for the source)
    assert loop_kinds(sch, "T_sum") == [("parallel", 64), ("serial", 16)]
    check_rule(AVX2, func)
    verify_trace_roundtrip(sch, func)


def test_reduction_over_the_outer_axis_vectorizes_the_output_axis() -> None:
    func = unary(topi.sum, (300, 1000), axis=0)()
    sch = AVX2.apply(func, CPU, False)
    assert isinstance(sch, tc.Schedule)
    # the output's contiguous axis in pieces of 2 x 8; 1000 = 62.5 x 16, so 8 (no guard)
    kinds = loop_kinds(sch, "T_sum")
    assert kinds == [("parallel", 125), ("serial", 300), ("vectorized", 8)]
    assert loop_kinds(sch, "T_sum_init") == [("parallel", 125), ("vectorized", 8)]
    check_rule(AVX2, func)


def test_small_kernels_stay_on_one_thread_and_one_core_never_forks() -> None:
    small = unary(topi.sum, (7, 64), axis=1)()
    sch = AVX2.apply(small, CPU, False)
    assert isinstance(sch, tc.Schedule)
    assert "parallel" not in {k for k, _ in loop_kinds(sch, "T_sum")}
    single = Reduction(Reduction.Config(vector_bits=256, num_cores=1))
    big = unary(topi.sum, (4096, 1024), axis=1)()
    sch = single.apply(big, CPU, False)
    assert isinstance(sch, tc.Schedule)
    assert all(k != "parallel" for b in block_names(sch.func) for k, _ in loop_kinds(sch, b))


def test_mean_divides_under_the_same_row_loop() -> None:
    func = unary(topi.mean, (N, 256), axis=1)()
    sch = AVX2.apply(func, CPU, False)
    assert isinstance(sch, tc.Schedule)
    row = sch.get_loops(sch.get_block("T_mean_sum"))[0].var
    assert sch.get_loops(sch.get_block("T_mean"))[0].var is row
    assert loop_kinds(sch, "T_mean") == [("parallel", None)]
    check_rule(AVX2, func, (1, 5, 64))


def test_rms_norm_epilogue_is_vectorized_inside_the_row() -> None:
    build, _, sizes = OPS["rms_norm"]
    func = build()
    sch = AVX2.apply(func, CPU, False)
    assert isinstance(sch, tc.Schedule)
    assert loop_kinds(sch, "T_rms_norm") == [("parallel", None), ("vectorized", 100)]
    check_rule(AVX2, func, sizes)


@pytest.mark.parametrize(("length", "form"), [(13, "serial"), (1000, "vector"), (1, "serial")])
def test_odd_reduction_lengths(length: int, form: str) -> None:
    func = unary(topi.sum, (7, length), axis=1)()
    sch = AVX2.apply(func, CPU, False)
    assert isinstance(sch, tc.Schedule)
    assert ("T_sum_rf" in block_names(sch.func)) == (form == "vector")
    check_rule(AVX2, func)


def test_pooling_vectorizes_the_output_width() -> None:
    func = unary(topi.max_pool2d, (2, 8, 16, 16), kernel=2, stride=2)()
    sch = AVX2.apply(func, CPU, False)
    assert isinstance(sch, tc.Schedule)
    assert loop_kinds(sch, "max_pool2d")[-3:] == [("serial", 2), ("serial", 2), ("vectorized", 8)]
    check_rule(AVX2, func)


def test_declines_say_why() -> None:
    def reason(func: tc.ir.PrimFunc, target: tc.Target = CPU) -> str:
        got = Reduction().apply(func, target, False)
        assert isinstance(got, Decline)
        return got.reason

    assert "2 reduction blocks" in reason(OPS["softmax"][0]())
    assert "multiply-accumulate" in reason(OPS["matmul"][0]())
    assert "T_argmax" in reason(OPS["argmax"][0]())
    assert "no reduction block" in reason(OPS["relu"][0]())
    assert "cannot be inlined" in reason(OPS["add_rms_norm_two_outputs"][0]())
    assert "CPU rule" in reason(OPS["sum_last"][0](), tc.Target("cuda -arch=sm_90"))
    sch = tc.Schedule(OPS["sum_last"][0]())
    sch.split(sch.get_loops(sch.get_block("T_sum"))[1], factors=[None, 8])
    assert reason(sch.func).startswith("not normalized:")
    assert "not a PrimFunc" in reason(tc.IRModule({}))  # type: ignore[arg-type]


def test_elementwise_producer_is_inlined() -> None:
    x, y = ph((N, 64), "x"), ph((N, 64), "y")
    func = te.create_prim_func([x, y, topi.sum(topi.multiply(x, y), axis=1)])
    sch = AVX2.apply(func, CPU, False)
    assert isinstance(sch, tc.Schedule)
    assert "T_multiply" not in block_names(sch.func)
    check_rule(AVX2, func, (1, 9))


def test_batched_dot_product_is_a_plain_sum() -> None:
    # attention scores at sequence length 1: one query row against one key row per head;
    # Matmul and GEMV decline a dot product, so the rule takes it (no Fallback)
    q, k = ph((1, 12, 1, 64), "q"), ph((1, 12, 1, 64), "k")
    func = te.create_prim_func([q, k, topi.matmul(q, k, transpose_b=True)])
    sch = Reduction().apply(func, CPU, False)
    assert isinstance(sch, tc.Schedule), sch
    assert "T.vectorized" in sch.func.script()
    check_rule(Reduction(), func)
    # a real matmul is still declined
    a, b = ph((1, 12, 4, 64), "a"), ph((1, 12, 4, 64), "b")
    declined = Reduction().apply(te.create_prim_func([a, b, topi.matmul(a, b, transpose_b=True)]),
                                 CPU, False)  # fmt: skip
    assert isinstance(declined, Decline)
    assert "multiply-accumulate" in declined.reason


def test_symbolic_row_sum_gets_guarded_vector_partial_sums() -> None:
    func = unary(topi.sum, (8, N), axis=1)()
    sch = AVX2.apply(func, CPU, False)
    assert isinstance(sch, tc.Schedule)
    assert loop_kinds(sch, "T_sum_rf")[-1] == ("vectorized", 16)
    check_rule(AVX2, func, (1, 15, 16, 17, 100))
