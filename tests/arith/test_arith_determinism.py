"""The canonical term order never depends on object identity or on the process.

Variables with equal names are told apart by the order the analyzer first meets them, so
simplifying the same expression rebuilt from fresh variables (in any creation order, in any
process) gives the same structure, with each variable in the same role.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tilecraft.arith import Analyzer
from tilecraft.ir import Expr, Range, Var, structural_equal, structural_hash

ROOT = Path(__file__).resolve().parents[2]


def simplified(order: str, shared: bool = False) -> list[tuple[Expr, Expr]]:
    """``(input, result)`` pairs; ``order`` ("ab"/"ba") is the creation order of two vars "x".

    Unrelated allocations between the two make their addresses differ from run to run.
    ``shared`` simplifies all expressions with one analyzer, else each with a fresh one.
    """
    made, junk = {}, []
    for name in order:
        junk.append([object() for _ in range(1000)])
        made[name] = Var("x", "int32")
    a, b, y = made["a"], made["b"], Var("y", "int32")
    exprs = [b + a, (b * y + a * y) // 8 + a % 4 * b, (a + b * 2 + b) % 16 + (b - a) // 3]
    ana = Analyzer()
    out = []
    for e in exprs:
        if not shared:
            ana = Analyzer()
        for v in (a, b, y):
            ana.bind(v, Range(0, 64))
        out.append((e, ana.simplify(e)))
    return out


def test_same_named_vars_ordered_by_first_appearance():
    (e, s), *_ = simplified("ab")
    # b appears first in b + a; with equal names (and dtypes) it stays first
    assert s.a is e.a
    assert s.b is e.b


@pytest.mark.parametrize("shared", [False, True])
def test_creation_order_does_not_change_the_result(shared):
    # map_free_vars numbers the variables by first appearance in the input, so this also
    # checks that each variable keeps its role in the result
    for p1, p2 in zip(simplified("ab", shared), simplified("ba", shared), strict=True):
        assert structural_equal(p1, p2, map_free_vars=True), (p1[1], p2[1])


def test_alpha_equivalent_inputs_in_one_analyzer():
    a1, b1, a2, b2 = (Var("x", "int32") for _ in range(4))
    ana = Analyzer()
    e1 = (b1 * 3 + a1 * 3) // 6 + a1 % 5
    e2 = (b2 * 3 + a2 * 3) // 6 + a2 % 5
    assert structural_equal((e1, ana.simplify(e1)), (e2, ana.simplify(e2)), map_free_vars=True)


@pytest.mark.parametrize(("seed", "order"), [("0", "ab"), ("1", "ba"), ("12345", "ba")])
def test_same_structure_in_other_processes(seed, order):
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, __file__, order],
        capture_output=True, text=True, env=env, cwd=ROOT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [structural_hash(p) for p in simplified("ab", shared=True)]


if __name__ == "__main__":  # the subprocess of test_same_structure_in_other_processes
    print(" ".join(structural_hash(p) for p in simplified(sys.argv[1], shared=True)))  # noqa: T201
