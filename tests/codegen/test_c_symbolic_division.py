"""A division by a symbolic extent inside a loop over that extent is a plain C ``/``.

The loop ``for i in range(s * 12)`` runs its body only when ``s >= 1``, so ``i // s`` needs
no helper guarding a zero divisor; the helper's branches kept the C compiler from hoisting
the division out of the vectorized inner loop (a transpose of symbolic length ran 20x slower
than its static compile)."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft.codegen._bounds import positive_factors
from tilecraft.ir import IntImm, Var


def _transpose(s: Var) -> tc.IRModule:
    a = tc.te.placeholder((s, 12, 64), "float32", name="A")
    out = tc.topi.transpose(a, (1, 0, 2))
    func = tc.te.create_prim_func([a, out])
    with tc.Target("avx2 -num-cores=2"):
        return dl.ApplyDefaultSchedule(*dl.cpu.default_rules())(tc.IRModule({"main": func}))


def test_division_by_the_extent_of_an_enclosing_loop_is_plain() -> None:
    mod = _transpose(Var("s", "int32"))
    lib = tc.build(mod, "cpu")
    body = lib.source[lib.source.index("TC_EXPORT void") :]
    assert " / s)" in body
    assert "tc_floordiv_int32(" not in body
    assert "tc_floormod_int32(" not in body
    for s in (1, 3, 17):
        a = np.random.default_rng(s).standard_normal((s, 12, 64)).astype(np.float32)
        out = np.zeros((12, s, 64), np.float32)
        lib["main"](a, out)
        np.testing.assert_array_equal(out, a.transpose(1, 0, 2))


def test_positive_factors_of_an_extent() -> None:
    s, t = Var("s", "int32"), Var("t", "int32")
    env = {id(s): (0, None), id(t): (0, None)}
    assert positive_factors(s * 12, env) == [s]
    assert positive_factors((s + 7) // 8, env) == []  # s + 7 >= 8 proves nothing about s
    assert positive_factors(s // 8, env) == [s]
    assert positive_factors(tc.ir.Min(s, t * 2), env) == [s, t]
    assert positive_factors(s - 1, env) == []
    # a factor that may be negative proves nothing
    assert positive_factors(s * t, {id(s): (0, None)}) == []
    assert positive_factors(IntImm("int32", 4), env) == []


@pytest.mark.parametrize("s", [0, 1])
def test_an_empty_extent_runs_no_division(s: int) -> None:
    lib = tc.build(_transpose(Var("s", "int32")), "cpu")
    a = np.ones((s, 12, 64), np.float32)
    out = np.zeros((12, s, 64), np.float32)
    lib["main"](a, out)
    np.testing.assert_array_equal(out, a.transpose(1, 0, 2))
