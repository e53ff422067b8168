"""The CPU ``Injective`` rule: inlined chains, tiled transposes, vectors, parallel loops."""

from __future__ import annotations

import models
import pytest
from cpu_rule_workloads import CPU, OPS, N, binary, block_names, check_rule, loop_kinds, ph, unary

import tilecraft as tc
from tilecraft import te, topi
from tilecraft.rules import Decline
from tilecraft.rules.cpu import Injective
from tilecraft.schedule.testing_utils import verify_trace_roundtrip

AVX2 = Injective(Injective.Config(vector_bits=256, num_cores=4, tile=16))


def schedule(func: tc.ir.PrimFunc) -> tc.Schedule:
    sch = AVX2.apply(func, CPU, False)
    assert isinstance(sch, tc.Schedule), sch
    return sch


def test_transpose_is_tiled_on_both_axes() -> None:
    func = unary(topi.transpose, (1000, 300))()
    sch = schedule(func)
    # blocks of 128 x 128 (3 x 8, guarded), 8 x 8 tiles of 16 x 16 in a block, the output's
    # contiguous axis vectorized inside a tile
    assert loop_kinds(sch, "T_transpose") == [
        ("parallel", 3 * 8),
        ("serial", 8),
        ("serial", 8),
        ("serial", 16),
        ("vectorized", 16),
    ]
    check_rule(AVX2, func)
    verify_trace_roundtrip(sch, func)


def test_small_transpose_is_one_level_of_tiles() -> None:
    func = unary(topi.transpose, (100, 37))()
    sch = schedule(func)
    assert loop_kinds(sch, "T_transpose") == [
        ("serial", 3 * 7),  # 3,700 elements: one thread
        ("serial", 16),
        ("vectorized", 16),
    ]
    check_rule(AVX2, func)


@pytest.mark.parametrize("name", ["transpose_sym", "permute_last_two"])
def test_odd_and_symbolic_transposes(name: str) -> None:
    build, _, sizes = OPS[name]
    func = build()
    assert [k for k, _ in loop_kinds(schedule(func), "T_transpose")][-2:] == [
        "serial",
        "vectorized",
    ]
    check_rule(AVX2, func, sizes)


def test_permute_keeping_the_last_axis_is_not_tiled() -> None:
    func = unary(topi.permute, (2, 64, 12, 64), axes=[0, 2, 1, 3])()
    sch = schedule(func)
    assert loop_kinds(sch, "T_transpose") == [("parallel", 2 * 12 * 64), ("vectorized", 64)]
    check_rule(AVX2, func)


def test_elementwise_fuses_into_chunks_of_vectors() -> None:
    func = binary(topi.add, (512, 300), (512, 300))()
    sch = schedule(func)
    # 4 vectors of 8 per chunk; 153,600 elements = 4,800 chunks
    assert loop_kinds(sch, "T_add") == [("parallel", 4800), ("vectorized", 32)]
    check_rule(AVX2, func)


def test_broadcast_keeps_the_row_loop() -> None:
    func = binary(topi.add, (N, 100), (100,))()
    sch = schedule(func)
    assert loop_kinds(sch, "T_add") == [("parallel", None), ("vectorized", 100)]
    check_rule(AVX2, func, (1, 7, 33))


def test_chains_are_inlined() -> None:
    x, y = ph((N, 64), "x"), ph((64,), "y")
    func = te.create_prim_func([x, y, topi.relu(topi.multiply(topi.add(x, y), y))])
    sch = schedule(func)
    assert block_names(sch.func) == ["T_relu"]
    check_rule(AVX2, func, (1, 13))


def test_costly_broadcast_producer_is_computed_once() -> None:
    x, w = ph((N, 64), "x"), ph((64,), "w")
    table = te.compute((64,), lambda j: tc.ir.op.exp(w[j]), name="table")
    cheap = te.compute((64,), lambda j: w[j] + 1.0, name="cheap")
    out = te.compute((N, 64), lambda i, j: x[i, j] * table[j] + cheap[j], name="out")
    func = te.create_prim_func([x, w, out])
    sch = schedule(func)
    assert block_names(sch.func) == ["table", "out"]  # exp once per column, not per element
    check_rule(AVX2, func, (1, 9))


def test_rotary_kernel_becomes_one_stage() -> None:
    func = models.kernels()["llama_prefill_small/zero/fused_reshape1_rotary_embedding1_transpose3"]
    assert block_names(func) == ["T_reshape", "T_rotary", "T_transpose"]
    sch = schedule(func)
    # the reshape before the rotation (which computes its angles in place, no tables) and the
    # transpose after it are inlined into one parallel, vectorized stage
    assert set(block_names(sch.func)) == {"T_transpose"}
    check_rule(AVX2, func, (1, 5))


def test_declines_say_why() -> None:
    got = AVX2.apply(OPS["softmax"][0](), CPU, False)
    assert isinstance(got, Decline)
    assert got.reason == 'block "T_softmax_maxelem" has reduction iterators (SR)'
    got = AVX2.apply(OPS["argmax"][0](), CPU, False)
    assert isinstance(got, Decline)
    assert "opaque" in got.reason
