"""The CPU ``Fallback`` rule: any function gets a schedule; what it does where."""

from __future__ import annotations

from cpu_rule_workloads import CPU, OPS, N, check_rule, loop_kinds, ph

import tilecraft as tc
from tilecraft import te, topi
from tilecraft.rules import Decline
from tilecraft.rules.cpu import Fallback
from tilecraft.schedule.testing_utils import verify_trace_roundtrip

AVX2 = Fallback(Fallback.Config(vector_bits=256, num_cores=4))


def test_matmul_vectorizes_the_output_columns() -> None:
    a, b = ph((N, 64), "A"), ph((64, 96), "B")
    func = te.create_prim_func([a, b, topi.matmul(a, b)])
    sch = AVX2.apply(func, CPU, False)
    assert isinstance(sch, tc.Schedule)
    # B[k, j] is contiguous along j: vectorize j inside k (not partial sums along k)
    assert loop_kinds(sch, "matmul") == [("parallel", None), ("serial", 64), ("vectorized", 16)]
    check_rule(AVX2, func, (1, 7))
    verify_trace_roundtrip(sch, func)


def test_opaque_blocks_only_get_parallel_rows() -> None:
    func = te.create_prim_func([x := ph((4096, 13), "x"), topi.argmax(x, axis=1)])
    sch = AVX2.apply(func, CPU, False)
    assert isinstance(sch, tc.Schedule)
    assert loop_kinds(sch, "T_argmax") == [("parallel", 4096), ("serial", 13)]
    check_rule(AVX2, func)


def test_conv2d_is_parallel_and_vectorized() -> None:
    build, _, sizes = OPS["conv2d"]
    func = build()
    sch = AVX2.apply(func, CPU, False)
    assert isinstance(sch, tc.Schedule)
    kinds = [k for k, _ in loop_kinds(sch, "conv2d")]
    assert kinds[0] == "parallel"
    assert kinds[-1] == "vectorized"
    check_rule(AVX2, func, sizes)


def test_a_function_it_cannot_normalize_is_returned_unchanged() -> None:
    func = OPS["softmax"][0]()
    sch = tc.Schedule(func)
    sch.split(sch.get_loops(sch.get_block("T_softmax_norm"))[1], factors=[None, 8])
    split = sch.func
    got = AVX2.apply(split, CPU, False)
    assert isinstance(got, tc.Schedule)
    assert tc.ir.structural_equal(got.func, split)
    assert len(got.trace) == 0


def test_it_declines_only_other_targets_and_non_functions() -> None:
    gpu = AVX2.apply(OPS["relu"][0](), tc.Target("cuda -arch=sm_80"), False)
    assert isinstance(gpu, Decline)
    assert "CPU rule" in gpu.reason
    assert isinstance(AVX2.apply("main", CPU, False), Decline)  # type: ignore[arg-type]
    assert not AVX2.is_target_available(tc.Target("cuda -arch=sm_80"))
