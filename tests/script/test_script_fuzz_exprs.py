"""Seeded random expression trees survive print -> parse exactly (precedence, literals, dtypes)."""

from __future__ import annotations

import math
import random

import pytest

import tilecraft as tc
from tilecraft import ir
from tilecraft.ir import Buffer, BufferStore, Expr, IntImm, PrimFunc, Var

INT_OPS = [ir.Add, ir.Sub, ir.Mul, ir.Div, ir.FloorDiv, ir.FloorMod, ir.Min, ir.Max]
FLOAT_OPS = [ir.Add, ir.Sub, ir.Mul, ir.Div, ir.Min, ir.Max]
CMP_OPS = [ir.EQ, ir.NE, ir.LT, ir.LE, ir.GT, ir.GE]
FLOATS = [0.0, -0.0, 1.5, -2.25, 1e-30, 3.4e38, math.inf, -math.inf, math.nan, 0.1]


class Gen:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.ints = [Var("n"), Var("m"), Var("k")]
        self.float_buf = Buffer("X", (8,), "float32")

    def int_expr(self, depth: int) -> Expr:
        r = self.rng
        if depth == 0 or r.random() < 0.2:
            if r.random() < 0.5:
                return r.choice(self.ints)
            return IntImm("int32", r.choice([0, 1, -1, 7, -(2**31), 2**31 - 1, -13]))
        if r.random() < 0.15:
            return ir.Select(
                self.bool_expr(depth - 1), self.int_expr(depth - 1), self.int_expr(depth - 1)
            )
        return r.choice(INT_OPS)(self.int_expr(depth - 1), self.int_expr(depth - 1))

    def bool_expr(self, depth: int) -> Expr:
        r = self.rng
        if depth == 0 or r.random() < 0.2:
            return ir.const(r.random() < 0.5, "bool")
        pick = r.random()
        if pick < 0.4:
            return r.choice(CMP_OPS)(self.int_expr(depth - 1), self.int_expr(depth - 1))
        if pick < 0.55:
            return ir.Not(self.bool_expr(depth - 1))
        if pick < 0.7:
            return r.choice(CMP_OPS)(self.bool_expr(depth - 1), self.bool_expr(depth - 1))
        ctor = r.choice([ir.And, ir.Or])
        return ctor(self.bool_expr(depth - 1), self.bool_expr(depth - 1))

    def float_expr(self, depth: int) -> Expr:
        r = self.rng
        if depth == 0 or r.random() < 0.2:
            if r.random() < 0.5:
                return ir.FloatImm("float32", r.choice(FLOATS))
            return self.float_buf[self.int_expr(1)]
        pick = r.random()
        if pick < 0.15:
            return ir.Cast("float32", self.int_expr(depth - 1))
        if pick < 0.3:
            name = r.choice(["exp", "sqrt", "tanh", "pow", "fabs", "atan2"])
            arity = ir.INTRINSICS[name].arity
            return ir.Call("float32", name, tuple(self.float_expr(depth - 1) for _ in range(arity)))
        return r.choice(FLOAT_OPS)(self.float_expr(depth - 1), self.float_expr(depth - 1))


def _func(g: Gen, exprs: list[Expr]) -> PrimFunc:
    stmts = []
    for idx, e in enumerate(exprs):
        out = Buffer(f"O{idx}", (1,), e.dtype)
        stmts.append((out, BufferStore(out, e, (0,))))
    params = (g.float_buf, *g.ints, *(o for o, _ in stmts))
    return PrimFunc(params, ir.seq(*(s for _, s in stmts)), name="fuzz")


@pytest.mark.parametrize("seed", range(8))
def test_random_expressions_roundtrip(seed: int) -> None:
    g = Gen(seed)
    exprs = [g.int_expr(5) for _ in range(8)] + [g.bool_expr(4) for _ in range(8)]
    exprs += [g.float_expr(4) for _ in range(8)]
    func = _func(g, exprs)
    text = func.script()
    back = tc.script.parse(text, verify=False)  # random indices may be out of range
    assert tc.ir.structural_equal(func, back), text
    assert back.script() == text
