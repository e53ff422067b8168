"""guard: run a block only at the loop iterations a bound allows."""

from __future__ import annotations

import numpy as np
import pytest
from sched_loop_helpers import ADD_ONE_BEFORE, matmul, two_stage

import tilecraft as tc
from tilecraft.ir import PrimFunc, structural_equal
from tilecraft.schedule.testing_utils import assert_fails_unchanged, verify_trace_roundtrip
from tilecraft.testing import assert_ir_equal

GUARDED = """
@T.prim_func
def main(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
    with T.block("root"):
        for i, j in T.grid(4, 8):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                vj = T.axis.spatial(8, j)
                T.where(j <= i + 2)
                T.reads(A[vi, vj])
                T.writes(B[vi, vj])
                B[vi, vj] = A[vi, vj] + T.float32(1.0)
"""


def test_guard_adds_the_bound_to_the_predicate() -> None:
    before = tc.script.parse(ADD_ONE_BEFORE)
    sch = tc.Schedule(before)
    block = sch.get_block("B")
    i, j = sch.get_loops(block)
    sch.guard(block, [i, j], lambda i, j: (j, i + 2))
    assert_ir_equal(sch.func, tc.script.parse(GUARDED))
    verify_trace_roundtrip(sch, before)


def _guarded_matmul() -> tuple[PrimFunc, tc.Schedule]:
    """C = A @ B over k in chunks of 4; row i runs the chunks starting at or before i."""
    before = matmul(8, 8, 16)
    sch = tc.Schedule(before)
    block = sch.get_block("C")
    i, _j, k = sch.get_loops(block)
    k_o, _k_i = sch.split(k, [None, 4])
    sch.decompose_reduction(block, k_o)
    sch.guard(sch.get_block("C"), [i, k_o], lambda i, k_o: (k_o * 4, i))
    return before, sch


def test_guard_skips_reduction_updates() -> None:
    """Row i sums the chunks of k starting at or before i: exactly a masked matmul."""
    _before, sch = _guarded_matmul()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 16)).astype(np.float32)
    b = rng.standard_normal((16, 8)).astype(np.float32)
    keep = (np.arange(16)[None, :] // 4 * 4) <= np.arange(8)[:, None]
    c = np.empty((8, 8), np.float32)
    tc.build(sch.mod, target="cpu")["main"](a, b, c)
    np.testing.assert_allclose(c, (a * keep) @ b, rtol=1e-5, atol=1e-5)


def test_guard_trace_json_and_python_replay() -> None:
    before, sch = _guarded_matmul()
    verify_trace_roundtrip(sch, before)
    text = sch.trace.as_python()
    assert "sch.guard(" in text
    fresh = tc.Schedule(before)
    exec(compile(text, "<trace>", "exec"), {"sch": fresh, "T": tc.script.T})
    assert structural_equal(fresh.func, sch.func)
    assert fresh.trace.as_python() == text


def test_guard_refuses_the_root_block() -> None:
    sch = tc.Schedule(tc.script.parse(ADD_ONE_BEFORE))
    root = sch.get_block("root")
    assert_fails_unchanged(sch, "guard", root, [], lambda: (0, 1), match="is the root block")


def test_guard_refuses_a_block_with_init() -> None:
    sch = tc.Schedule(matmul(8, 8, 16))
    block = sch.get_block("C")
    i, _j, k = sch.get_loops(block)
    err = assert_fails_unchanged(
        sch, "guard", block, [i, k], lambda i, k: (k, i), match='block "C" has an init'
    )
    assert err.primitive == "guard"
    assert "decompose_reduction first" in str(err)


def test_guard_refuses_a_loop_not_enclosing_the_block() -> None:
    sch = tc.Schedule(two_stage(8))
    b = sch.get_block("B")
    c_loop = sch.get_loops(sch.get_block("C"))[0]
    i = sch.get_loops(b)[0]
    assert_fails_unchanged(
        sch, "guard", b, [i, c_loop], lambda x, y: (x, y), match='do not enclose block "B"'
    )


@pytest.mark.parametrize(
    ("bound", "got"),
    [
        (lambda i: (i, 0), "1 to 2"),
        (lambda i, j: (i, j, 0), "2 to 3"),
        (lambda i, j: (i,), "2 to 1"),
    ],
    ids=["one-index", "three-outputs", "one-output"],
)
def test_guard_refuses_a_bound_of_the_wrong_arity(bound: object, got: str) -> None:
    sch = tc.Schedule(tc.script.parse(ADD_ONE_BEFORE))
    block = sch.get_block("B")
    i, j = sch.get_loops(block)
    assert_fails_unchanged(
        sch, "guard", block, [i, j], bound, match=f"expected a map of 2 indices to 2, got {got}"
    )
