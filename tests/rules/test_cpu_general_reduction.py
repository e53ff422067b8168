"""The CPU ``GeneralReduction`` rule: one pass per row, vectorized stages, declines."""

from __future__ import annotations

from cpu_rule_workloads import CPU, OPS, N, block_names, check_rule, loop_kinds, ph, unary

import tilecraft as tc
from tilecraft import te, topi
from tilecraft.rules import Decline
from tilecraft.rules.cpu import GeneralReduction
from tilecraft.schedule.testing_utils import verify_trace_roundtrip

AVX2 = GeneralReduction(GeneralReduction.Config(vector_bits=256, num_cores=4))


def schedule(func: tc.ir.PrimFunc) -> tc.Schedule:
    sch = AVX2.apply(func, CPU, False)
    assert isinstance(sch, tc.Schedule), sch
    return sch


def one_row_loop(sch: tc.Schedule) -> tuple[str, int | None]:
    """Assert every block sits under one outer loop; return that loop's (kind, extent)."""
    names = block_names(sch.func)
    outer = {sch.get_loops(sch.get_block(n))[0].var for n in names}
    assert len(outer) == 1, f"blocks under {len(outer)} different outer loops"
    return loop_kinds(sch, names[0])[0]


def test_softmax_is_one_parallel_pass_per_row() -> None:
    func = unary(topi.softmax, (256, 1000))()
    sch = schedule(func)
    assert one_row_loop(sch) == ("parallel", 256)
    # max and sum of exponentials: vectors of partial results (1000 = 125 x 8)
    assert loop_kinds(sch, "T_softmax_maxelem_rf")[1:] == [("serial", 125), ("vectorized", 8)]
    assert loop_kinds(sch, "T_softmax_expsum_rf")[1:] == [("serial", 125), ("vectorized", 8)]
    assert loop_kinds(sch, "T_softmax_norm")[1:] == [("vectorized", 1000)]
    check_rule(AVX2, func)
    verify_trace_roundtrip(sch, func)


def test_layer_norm_rows_of_a_3d_input_fuse_into_one_loop() -> None:
    func = OPS["layer_norm"][0]()
    sch = schedule(func)
    assert one_row_loop(sch) == ("serial", 10)  # 1,000 elements: too little work to fork
    assert loop_kinds(sch, "T_layer_norm_var_rf")[1:] == [("serial", 5), ("vectorized", 20)]
    check_rule(AVX2, func)


def test_symbolic_rows_run_in_parallel() -> None:
    func = unary(topi.softmax, (N, 64))()
    sch = schedule(func)
    assert one_row_loop(sch) == ("parallel", None)
    check_rule(AVX2, func, (1, 7, 33))


def test_reduction_over_a_middle_axis_vectorizes_the_contiguous_axis() -> None:
    func = unary(topi.softmax, (8, 64, 32), axis=1)()
    sch = schedule(func)
    assert one_row_loop(sch) == ("serial", 8)
    # max over axis 1, 16 columns (2 x 8) at a time: the reduce loop outside the vector loop
    kinds = [("serial", 2), ("serial", 64), ("vectorized", 16)]
    assert loop_kinds(sch, "T_softmax_maxelem")[1:] == kinds
    assert loop_kinds(sch, "T_softmax_norm")[1:] == [("serial", 64), ("vectorized", 32)]
    check_rule(AVX2, func)


def test_fused_add_rms_norm_writing_the_sum_is_one_pass() -> None:
    build, _, sizes = OPS["add_rms_norm_two_outputs"]
    func = build()
    sch = schedule(func)
    assert one_row_loop(sch) == ("parallel", None)
    assert loop_kinds(sch, "T_add")[1:] == [("vectorized", 100)]
    check_rule(AVX2, func, sizes)


def test_attention_is_computed_row_by_row() -> None:
    func = OPS["attention"][0]()
    sch = schedule(func)
    assert one_row_loop(sch) == ("serial", 2 * 13)  # rows: (batch, query)
    assert loop_kinds(sch, "attention_scores_rf")[1:] == [("serial", 13), ("vectorized", 8)]
    assert loop_kinds(sch, "attention")[1:] == [("serial", 13), ("vectorized", 8)]
    # softmax normalisation (exp) is not inlined into the weighted sum: it would be
    # recomputed for every one of the 8 output columns
    assert "attention_softmax_norm" in block_names(sch.func)
    check_rule(AVX2, func)


def test_group_norm_statistics_are_computed_once_per_group() -> None:
    func = OPS["group_norm"][0]()
    sch = schedule(func)
    # rows are the batch only: a row loop over channels would recompute each group's
    # statistics once per channel of the group
    assert one_row_loop(sch) == ("serial", 2)
    check_rule(AVX2, func)


def test_symbolic_row_length_is_still_one_pass_per_row() -> None:
    func = unary(topi.softmax, (3, N))()
    sch = schedule(func)
    outer = {sch.get_loops(sch.get_block(n))[0].var for n in block_names(sch.func)}
    assert len(outer) == 1  # every stage under the one row loop, whatever the row length
    check_rule(AVX2, func, (1, 7, 100))


def test_declines_say_why() -> None:
    def reason(func: tc.ir.PrimFunc) -> str:
        got = AVX2.apply(func, CPU, False)
        assert isinstance(got, Decline)
        return got.reason

    assert "no reduction block" in reason(OPS["transpose"][0]())
    assert "T_argmax" in reason(OPS["argmax"][0]())
    assert "multiply-accumulate" in reason(OPS["dense_bias"][0]())
    x, w = ph((4, 8), "x"), ph((8,), "w")
    assert isinstance(AVX2.apply(te.create_prim_func([x, w, topi.rms_norm(x, w)]), CPU, False),
                      tc.Schedule)  # fmt: skip


def test_softmax_source_keeps_if_conversion() -> None:
    """The generated C holds no ``#pragma GCC unroll``: with one, the compiler adds
    ``-fno-tree-loop-if-convert`` for the whole source and the max's NaN-propagating select
    runs one element at a time (softmax 4096 x 1024, AVX-512: 3.4 GB/s against 5.1)."""
    func = unary(topi.softmax, (64, 1024))()
    for preset in ("avx2", "avx512"):
        target = tc.Target(preset)
        sch = GeneralReduction().apply(func, target, False)
        assert isinstance(sch, tc.Schedule), sch
        source = tc.codegen.c_source(sch.mod, target)
        assert "#pragma GCC unroll" not in source
        assert "#pragma omp simd" in source
        tc.testing.check_numeric(sch.func, func, rtol=1e-5, atol=1e-6)


def test_softmax_computes_each_exponential_once_into_a_row_buffer() -> None:
    """``exp(x - max)`` is one stage kept by the rule (not inlined into the sum and the
    result, which would compute it twice): computed under the row loop into a row buffer,
    vectorized, and read by the sum's partial vectors and the scaled write."""
    for preset, lanes in (("avx2", 8), ("avx512", 16)):
        target = tc.Target(preset)
        for rows, cols, partials in ((64, 1024, 2 * lanes), (33, 5000, None)):
            func = unary(topi.softmax, (rows, cols))()
            sch = GeneralReduction().apply(func, target, False)
            assert isinstance(sch, tc.Schedule), sch
            assert one_row_loop(sch) == ("parallel", rows)
            assert loop_kinds(sch, "T_softmax_exp")[1:] == [("vectorized", cols)]
            if partials is not None:
                assert loop_kinds(sch, "T_softmax_expsum_rf")[-1] == ("vectorized", partials)
            kernel = tc.codegen.c_source(sch.mod, target).split("TC_EXPORT void")[1]
            assert kernel.count("expf(") == 1
            # the row of exponentials lives in the output row (ShareOutputStorage)
            assert "T_softmax_exp[" not in kernel
            assert f"T_softmax_norm[((i0 * {cols}) + ax1_1)] = expf(" in kernel
            tc.testing.check_numeric(sch.func, func, rtol=1e-5, atol=1e-6)


def test_attention_softmax_computes_each_exponential_once() -> None:
    func = OPS["attention"][0]()
    sch = schedule(func)
    assert {"attention_softmax_exp", "attention_softmax_norm"} <= set(block_names(sch.func))
    assert one_row_loop(sch) == ("serial", 2 * 13)
    assert tc.codegen.c_source(sch.mod).split("TC_EXPORT void")[1].count("expf(") == 1
    check_rule(AVX2, func)


def test_symbolic_rows_and_row_length_stay_nested_with_vector_partial_sums() -> None:
    # attention's softmax over (1, 12, s, s): fusing (12, s) put a division by s into every
    # index, which kept the guarded partial sums scalar; the constant row loops are fused
    # (parallel), the symbolic one stays nested
    func = unary(topi.softmax, (1, 12, N, N))()
    sch = schedule(func)
    kinds = loop_kinds(sch, "T_softmax_maxelem_rf")
    assert kinds[:2] == [("parallel", 12), ("serial", None)]
    assert kinds[-1] == ("vectorized", 16)  # a symbolic row length: guarded partial sums
    assert loop_kinds(sch, "T_softmax_expsum_rf")[-1] == ("vectorized", 16)
    check_rule(AVX2, func, (1, 7, 16, 33))
    verify_trace_roundtrip(sch, func)
