"""Deep compute bodies: create_prim_func, printing, parsing and JSON do not recurse per level."""

from __future__ import annotations

import pytest

import tilecraft as tc
from tilecraft.ir import Block, post_order_visit, structural_equal


def _long_sum(terms: int, reduce: bool) -> tc.ir.PrimFunc:
    a = tc.te.placeholder((4, 8), "float32", name="A")
    k = tc.te.reduce_axis((0, 8), name="k")

    def body(i: tc.ir.Var) -> tc.ir.Expr:
        e = a[i, k] if reduce else a[i, 0]
        for n in range(terms):
            e = e + (a[i, k] if reduce else a[i, n % 8]) * float(n % 7)
        return tc.te.sum(e, axis=k) if reduce else e

    b = tc.te.compute((4,), body, name="B")
    return tc.te.create_prim_func([a, b])


@pytest.mark.parametrize("reduce", [False, True])
def test_create_prim_func_of_a_600_term_sum(reduce: bool) -> None:
    """Regression: renaming the stage's variables recursed once per term."""
    func = _long_sum(600, reduce)
    blocks: list[Block] = []
    post_order_visit(func.body, lambda n: blocks.append(n) if isinstance(n, Block) else None)
    block = next(b for b in blocks if b.name == "B")
    reads = [tc.script.to_script(r) for r in block.reads]
    assert reads == (["A[vi, vk]", "B[vi]"] if reduce else ["A[vi, 0:8]"])
    text = func.script()
    assert text.count(" + ") >= 600
    back = tc.script.parse(text)
    assert structural_equal(back, func)
    assert back.script() == text
    assert structural_equal(tc.ir.from_json(tc.ir.to_json(func)), func)
