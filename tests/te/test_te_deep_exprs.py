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


def test_a_600_term_expression_builds_and_runs() -> None:
    """Regression: lowering and codegen recursed once per term and hit the recursion limit."""
    import numpy as np

    te = tc.te
    a = te.placeholder((8,), "float32", name="A")

    def chain(i: tc.ir.Expr) -> tc.ir.Expr:
        e = a[i]
        for k in range(600):
            e = e + a[i] * float(k % 7)
        return e

    lib = tc.build(te.create_prim_func([a, te.compute((8,), chain, name="B")]))
    x, y = np.arange(8, dtype="float32"), np.zeros(8, "float32")
    lib["main"](x, y)
    np.testing.assert_allclose(y, x * (1 + sum(k % 7 for k in range(600))), rtol=1e-5)
