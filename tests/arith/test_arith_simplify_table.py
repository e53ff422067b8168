"""Table of named simplifications, including every index pattern split and fuse produce."""

from __future__ import annotations

import itertools

import pytest

from tilecraft import ir
from tilecraft.arith import Analyzer, evaluate

i, j, k = ir.Var("i", "int32"), ir.Var("j", "int32"), ir.Var("k", "int32")
i0, i1, i2 = ir.Var("i0", "int32"), ir.Var("i1", "int32"), ir.Var("i2", "int32")
f = ir.Var("f", "int32")
n, m = ir.Var("n", "int32"), ir.Var("m", "int32")
x = ir.Var("x", "int32")  # unbound
L = ir.Var("l", "int64")

DOMS: dict[ir.Var, tuple[int | ir.Expr, int | ir.Expr]] = {
    i: (0, 16), j: (0, 16), k: (0, 4), i0: (0, 8), i1: (0, 4), i2: (0, 8), f: (0, 96),
    n: (1, 128), m: (1, 64), L: (0, 1 << 40),
}  # fmt: skip

_PREC = {ir.Add: 1, ir.Sub: 1, ir.Mul: 2, ir.FloorDiv: 2, ir.FloorMod: 2, ir.Div: 2}


def fmt(e: ir.Expr) -> str:
    """Render an expression as Python-like text (minimal parentheses)."""
    cls = type(e)
    if cls is ir.Var:
        return e.name
    if cls in (ir.IntImm, ir.FloatImm):
        if e.dtype.is_bool:
            return str(bool(e.value))
        return str(e.value)
    if cls in _PREC:
        p = _PREC[cls]
        a, b = fmt(e.a), fmt(e.b)
        if type(e.a) in _PREC and _PREC[type(e.a)] < p:
            a = f"({a})"
        if type(e.b) in _PREC and (
            _PREC[type(e.b)] < p or (_PREC[type(e.b)] == p and cls not in (ir.Add, ir.Mul))
        ):
            b = f"({b})"
        return f"{a} {e.symbol} {b}"
    if cls in (ir.Min, ir.Max):
        return f"{e.symbol}({fmt(e.a)}, {fmt(e.b)})"
    if isinstance(e, ir.CmpOp):
        return f"{fmt(e.a)} {e.symbol} {fmt(e.b)}"
    if cls is ir.And:
        return f"({fmt(e.a)} and {fmt(e.b)})"
    if cls is ir.Or:
        return f"({fmt(e.a)} or {fmt(e.b)})"
    if cls is ir.Not:
        return f"not {fmt(e.a)}"
    if cls is ir.Select:
        return f"select({fmt(e.condition)}, {fmt(e.true_value)}, {fmt(e.false_value)})"
    return f"{cls.__name__}(...)"


def C(v: int) -> ir.Expr:
    return ir.IntImm("int32", v)


def _analyzer() -> Analyzer:
    ana = Analyzer()
    for v, (lo, ext) in DOMS.items():
        ana.bind(
            v,
            ir.Range(lo, ext)
            if not isinstance(ext, int) or v.dtype.bits == 32
            else ir.Range(ir.IntImm("int64", lo), ir.IntImm("int64", ext)),
        )
    return ana


fused3 = (i0 * 4 + i1) * 8 + i2  # fuse(i0, i1, i2), extents 8, 4, 8

TABLE: list[tuple[str, ir.Expr, str]] = [
    # constant folding and affine collection
    ("fold add", C(3) + C(4), "7"),
    ("fold floordiv negative", C(-7) // 2, "-4"),
    ("fold floormod negative", C(-7) % 2, "1"),
    ("fold truncdiv negative", C(-7) / C(2), "-3"),
    ("add zero", x + 0, "x"),
    ("mul one", x * 1, "x"),
    ("mul zero", x * 0, "0"),
    ("cancel", x + j - x, "j"),
    ("collect like terms", x * 2 + j + x * 3 - j, "x * 5"),
    ("constants last", C(3) + x + 4, "x + 7"),
    ("distribute", (x + 2) * 3, "x * 3 + 6"),
    ("canonical order", j + i * 16, "i * 16 + j"),
    ("negative start", C(15) - i, "15 - i"),
    ("double negation", C(0) - (C(0) - x), "x"),
    # split: i = io*f + ii
    ("split outer", (i * 16 + j) // 16, "i"),
    ("split inner", (i * 16 + j) % 16, "j"),
    ("split partial div", (i * 16 + j) // 4, "i * 4 + j // 4"),
    ("split partial mod", (i * 16 + j) % 4, "j % 4"),
    ("split of split outer", ((i0 * 4 + i1) * 8 + i2) // 32, "i0"),
    ("split recompose", (f // 8) * 8 + f % 8, "f"),
    ("split recompose scaled", (f // 4) * 8 + (f % 4) * 2, "f * 2"),
    ("split recompose three", f // 9 * 9 + f % 9 // 3 * 3 + f % 3, "f"),
    ("split recompose low two", f // 3 % 3 * 3 + f % 3, "f % 9"),
    ("split recompose shifted", (f + 5) % 9 // 3 * 3 + (f + 2) % 3, "(f + 5) % 9"),
    ("split recompose low two scaled", (f // 3 % 3) * 6 + (f % 3) * 2, "f % 9 * 2"),
    # fuse: fused = i0*32 + i1*8 + i2
    ("fuse then recover i0", fused3 // 32, "i0"),
    ("fuse then recover i1", fused3 // 8 % 4, "i1"),
    ("fuse then recover i2", fused3 % 8, "i2"),
    ("fuse middle via mod", fused3 % 32 // 8, "i1"),
    ("fuse low pair", fused3 % 32, "i1 * 8 + i2"),
    ("fuse high pair", fused3 // 8, "i0 * 4 + i1"),
    ("fuse 2 of 3 recompose", fused3 // 32 * 32 + fused3 % 32, "i0 * 32 + i1 * 8 + i2"),
    # fuse then split: f2 = fo*F + fi
    ("fuse-split same factor", (i * 8 + k) // 8, "i"),
    ("fuse-split multiple", (i * 16 + j) // 8, "i * 2 + j // 8"),
    ("fuse-split mod multiple", (i * 16 + j) % 8, "j % 8"),
    ("split-fuse small term", (i * 4 + k) // 8, "i // 2"),
    ("split-fuse small term mod", (i * 4 + k) % 16, "i % 4 * 4 + k"),
    ("nested floordiv", f // 4 // 3, "f // 12"),
    ("nested floormod", f % 12 % 4, "f % 4"),
    ("div by negative", (i * 16 + j) // -16, "j * -1 // 16 - i"),
    ("mod by bound", (j + 16) % 16, "j"),
    ("div shifted by bound", (j + 32) // 16, "2"),
    ("truncdiv nonneg", (i * 16 + j) / C(16), "i"),
    ("truncdiv unknown sign kept", x / C(4), "x / 4"),
    # min / max / comparisons / select
    ("min by bounds", ir.Min(j, C(16)), "j"),
    ("max by bounds", ir.Max(j, C(-1)), "j"),
    ("min undecided", ir.Min(j, C(8)), "min(j, 8)"),
    ("min common constant", ir.Min(x + 3, j + 5), "min(x, j + 2) + 3"),
    ("lt true", i * 16 + j < 256, "True"),
    ("lt false", j >= 16, "False"),
    ("lt undecided", i * 16 + j < 128, "i * 16 + j < 128"),
    ("gcd in comparison", i * 4 < 8, "i < 2"),
    ("eq impossible by gcd", (x * 2).eq(C(1)), "False"),
    ("eq decided", (x + 1).eq(x + 1), "True"),
    ("not lt", ir.Not(x < 4), "3 < x"),
    ("and true", ir.And(j < 16, x < 3), "x < 3"),
    ("or true", ir.Or(j < 16, x < 3), "True"),
    ("select provable", ir.Select(j < 16, i, j), "i"),
    ("select same branches", ir.Select(x < 3, i + 1, 1 + i), "i + 1"),
    # symbolic extents
    ("symbolic fused", (i * n + j) - i * n, "j"),
    ("symbolic lt", n - 1 < n, "True"),
    ("symbolic min", ir.Min(n, n + m), "n"),
    # int64
    ("int64 split", (L * 16 + ir.IntImm("int64", 3)) // ir.IntImm("int64", 16), "l"),
]


@pytest.mark.parametrize(("name", "expr", "expected"), TABLE, ids=[t[0] for t in TABLE])
def test_simplify_table(name: str, expr: ir.Expr, expected: str) -> None:
    ana = _analyzer()
    out = ana.simplify(expr)
    assert fmt(out) == expected, name
    free = [v for v in ir.collect_vars(expr) if v in DOMS or v is x]
    for values in itertools.islice(itertools.product(*(_samples(v) for v in free)), 64):
        env = dict(zip(free, values, strict=True))
        assert evaluate(out, env) == evaluate(expr, env)


def _samples(v: ir.Var) -> list[int]:
    if v is x:
        return [-9, -1, 0, 5]
    lo, ext = DOMS[v]
    if not isinstance(ext, int):
        return [0, 1]
    hi = lo + ext - 1 if isinstance(lo, int) else ext - 1
    return sorted({lo, hi, (lo + hi) // 2})


def test_table_has_forty_entries() -> None:
    assert len(TABLE) >= 40


def test_symbolic_range_bound() -> None:
    ana = Analyzer()
    ana.bind(n, ir.Range(1, 100))
    ana.bind(i, ir.Range(0, n))
    assert ana.can_prove(i < n)
    assert ana.can_prove(i <= n - 1)
    assert not ana.can_prove(i < n - 1)
    assert ana.can_prove((i * 4 + k) // 4 < n) is False or ana.can_prove(k < 4)
    assert fmt(ana.simplify(ir.Min(i, n))) == "i"
    assert fmt(ana.simplify(i // n)) == "0"
    assert fmt(ana.simplify(i % n)) == "i"


def test_constraint_scope() -> None:
    ana = Analyzer()
    ana.bind(i, ir.Range(0, 16))
    assert not ana.can_prove(i < 8)
    with ana.constraint(i < 8):
        assert ana.can_prove(i < 8)
        assert fmt(ana.simplify(i // 8)) == "0"
        assert ana.const_int_bound(i).max_value == 7
    assert not ana.can_prove(i < 8)
    with ana.constraint(i < n):
        assert ana.can_prove(i < n)
        assert ana.can_prove(i < n + 1)


def test_const_int_bound_values() -> None:
    ana = _analyzer()
    b = ana.const_int_bound(i * 16 + j)
    assert (b.min_value, b.max_value) == (0, 255)
    b = ana.const_int_bound(f % 8 - 3)
    assert (b.min_value, b.max_value) == (-3, 4)
    b = ana.const_int_bound(x)
    assert (b.min_value, b.max_value) == (-(2**31), 2**31 - 1)
    assert ana.can_prove_equal(fused3 // 8 % 4, i1)
    assert not ana.can_prove_equal(fused3 // 8, i1)


def test_bind_value_substitutes() -> None:
    ana = Analyzer()
    ana.bind(i, 5)
    assert fmt(ana.simplify(i * 2 + 1)) == "11"


def test_float_expressions_unchanged_in_value() -> None:
    a = ir.Var("a", "float32")
    ana = Analyzer()
    e = (a * ir.FloatImm("float32", 1.0)) + ir.FloatImm("float32", 0.1) * ir.FloatImm(
        "float32", 3.0
    )
    out = ana.simplify(e)
    assert evaluate(out, {a: 2.0}) == pytest.approx(evaluate(e, {a: 2.0}), rel=1e-6)
    assert type(out.b) is ir.FloatImm
