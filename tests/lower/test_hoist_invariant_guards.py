"""HoistInvariantGuards: a guard's loop-invariant, memory-free conjuncts move above the loop."""

from __future__ import annotations

import tilecraft as tc
from tilecraft.ir import IRModule, PrimFunc, structural_equal
from tilecraft.ir.serialize import to_json
from tilecraft.lower import HoistInvariantGuards
from tilecraft.testing import assert_ir_equal

HEADER = """
@T.prim_func
def main(A: T.Buffer((4, 8, 16), "float32"), B: T.Buffer((4, 8, 16), "float32")):
"""


def _func(body: str) -> PrimFunc:
    return tc.script.parse(HEADER + body)


def test_hoists_to_the_outermost_loop_the_condition_does_not_use() -> None:
    before = _func("""
    for i, j, k in T.grid(4, 8, 16):
        if i < 3 and k < j * 2:
            B[i, j, k] = A[i, j, k] + T.float32(1.0)
""")
    expected = _func("""
    for i in range(4):
        if i < 3:
            for j, k in T.grid(8, 16):
                if k < j * 2:
                    B[i, j, k] = A[i, j, k] + T.float32(1.0)
""")
    assert_ir_equal(HoistInvariantGuards()(before), expected)


def test_leaves_a_condition_on_the_loop_itself_in_place() -> None:
    before = _func("""
    for i, j, k in T.grid(4, 8, 16):
        if k < 4:
            B[i, j, k] = A[i, j, k] + T.float32(1.0)
""")
    assert_ir_equal(HoistInvariantGuards()(before), before)


def test_leaves_a_condition_reading_memory_in_place() -> None:
    """``A[i, 0, 0]`` does not vary in j or k, but a load is not moved (the buffer may be
    written in the loop, and a guard hoisted above an empty loop would read it anyway)."""
    before = _func("""
    for i, j, k in T.grid(4, 8, 16):
        if A[i, 0, 0] > T.float32(0.0):
            B[i, j, k] = A[i, j, k] + T.float32(1.0)
""")
    assert_ir_equal(HoistInvariantGuards()(before), before)


def test_splits_a_conjunction_between_loops() -> None:
    before = _func("""
    for i, j, k in T.grid(4, 8, 16):
        if j <= i + 2 and k < j * 2 and A[i, j, 0] > T.float32(0.0):
            B[i, j, k] = A[i, j, k] + T.float32(1.0)
""")
    expected = _func("""
    for i, j in T.grid(4, 8):
        if j <= i + 2:
            for k in range(16):
                if k < j * 2 and A[i, j, 0] > T.float32(0.0):
                    B[i, j, k] = A[i, j, k] + T.float32(1.0)
""")
    assert_ir_equal(HoistInvariantGuards()(before), expected)


def test_leaves_its_input_unchanged() -> None:
    func = _func("""
    for i, j, k in T.grid(4, 8, 16):
        if i < 3:
            B[i, j, k] = A[i, j, k] + T.float32(1.0)
""")
    mod = IRModule({"main": func})
    text = to_json(mod)
    out = HoistInvariantGuards()(mod)
    assert isinstance(out, IRModule)
    assert to_json(mod) == text
    assert mod["main"] is func
    assert not structural_equal(out["main"], func)
