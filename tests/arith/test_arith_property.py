"""Property tests: simplification keeps values, bounds contain values, proofs are sound."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilecraft import ir
from tilecraft.arith import Analyzer, evaluate

X, Y, Z = ir.Var("x", "int32"), ir.Var("y", "int32"), ir.Var("z", "int32")
N = ir.Var("n", "int32")
II, JJ = ir.Var("i", "int32"), ir.Var("j", "int32")

CONST_DOMS = {X: (0, 16), Y: (-8, 8), Z: (0, 5)}
SETTINGS = settings(
    max_examples=250, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
MANY = settings(SETTINGS, max_examples=3000)  # the ``-m slow`` versions

_BIN = [ir.Add, ir.Sub, ir.Mul, ir.Min, ir.Max]
_CMP = [ir.LT, ir.LE, ir.GT, ir.GE, ir.EQ, ir.NE]


def _exprs(leaves: list[ir.Var], divisors: list[ir.Expr]) -> st.SearchStrategy[ir.Expr]:
    leaf = st.one_of(
        st.sampled_from(leaves),
        st.integers(-20, 20).map(lambda v: ir.IntImm("int32", v)),
    )
    nonzero = st.one_of(
        st.sampled_from([-16, -3, -2, 1, 2, 3, 4, 8, 16]).map(lambda v: ir.IntImm("int32", v)),
        st.sampled_from(divisors) if divisors else st.nothing(),
    )

    def extend(sub: st.SearchStrategy[ir.Expr]) -> st.SearchStrategy[ir.Expr]:
        return st.one_of(
            st.builds(lambda c, a, b: c(a, b), st.sampled_from(_BIN), sub, sub),
            st.builds(ir.Mul, sub, st.integers(-5, 17).map(lambda v: ir.IntImm("int32", v))),
            st.builds(
                lambda c, a, b: c(a, b),
                st.sampled_from([ir.FloorDiv, ir.FloorMod, ir.Div]),
                sub,
                nonzero,
            ),
            st.builds(
                lambda c, a, b, t, f: ir.Select(c(a, b), t, f),
                st.sampled_from(_CMP),
                sub,
                sub,
                sub,
                sub,
            ),
        )

    return st.recursive(leaf, extend, max_leaves=10)


def _const_analyzer() -> Analyzer:
    ana = Analyzer()
    for v, (lo, hi) in CONST_DOMS.items():
        ana.bind(v, ir.Range(lo, hi - lo))
    return ana


def _overflows(expr: ir.Expr, env: dict[ir.Var, int]) -> bool:
    """Whether some integer subexpression of ``expr`` leaves int32 under ``env``.

    The analyzer's contract (see its module docstring) assumes index arithmetic never overflows
    its dtype, as signed overflow is undefined in the generated C; such assignments are outside
    what it promises, so the properties are checked only where no intermediate overflows.
    """
    subs: list[ir.Expr] = []
    ir.post_order_visit(expr, lambda n: subs.append(n) if isinstance(n, ir.Expr) else None)
    for sub in subs:
        if sub.dtype.is_int:
            value = evaluate(sub, env)
            if not -(2**31) <= value < 2**31:
                return True
    return False


def _check(ana: Analyzer, expr: ir.Expr, envs: list[dict[ir.Var, int]]) -> None:
    envs = [env for env in envs if not _overflows(expr, env)]
    simple = ana.simplify(expr)
    b = ana.const_int_bound(expr)
    proved = [
        (cond, ana.can_prove(cond))
        for cond in (cmp(expr, ir.IntImm("int32", rhs)) for cmp in _CMP for rhs in (0, 7))
    ]
    for env in envs:
        want = evaluate(expr, env)
        assert evaluate(simple, env) == want, (expr, simple, env)
        assert b.min_value <= want <= b.max_value, (expr, b, want)
        for cond, ok in proved:
            if ok:
                assert evaluate(cond, env), (cond, env)


def _envs(doms: dict[ir.Var, tuple[int, int]], first: dict[ir.Var, int], seed: int) -> list:
    """``first`` plus a few more random in-range assignments (cheap: simplify runs once)."""
    rng = random.Random(seed)
    extra = [{v: rng.randrange(lo, hi) for v, (lo, hi) in doms.items()} for _ in range(7)]
    return [first, *extra]


CONST_ARGS = {
    "expr": _exprs([X, Y, Z], []),
    "x": st.integers(*CONST_DOMS[X]).filter(lambda v: v < CONST_DOMS[X][1]),
    "y": st.integers(*CONST_DOMS[Y]).filter(lambda v: v < CONST_DOMS[Y][1]),
    "z": st.integers(*CONST_DOMS[Z]).filter(lambda v: v < CONST_DOMS[Z][1]),
}
SYMBOLIC_ARGS = {"expr": _exprs([II, JJ, N], [N]), "n": st.integers(1, 40), "data": st.data()}


def _const_bounds(expr: ir.Expr, x: int, y: int, z: int) -> None:
    env = {X: x, Y: y, Z: z}
    _check(_const_analyzer(), expr, _envs(CONST_DOMS, env, x * 1000 + y * 10 + z))


test_simplify_const_bounds = SETTINGS(given(**CONST_ARGS)(_const_bounds))
test_simplify_const_bounds_many = pytest.mark.slow(MANY(given(**CONST_ARGS)(_const_bounds)))


def _symbolic_bounds(expr: ir.Expr, n: int, data: st.DataObject) -> None:
    ana = Analyzer()
    ana.bind(N, ir.Range(1, 64))
    ana.bind(II, ir.Range(0, N))
    ana.bind(JJ, ir.Range(0, N * 4))
    i = data.draw(st.integers(0, n - 1))
    j = data.draw(st.integers(0, 4 * n - 1))
    rng = random.Random(i * 7919 + j * 31 + n)
    envs = [{II: i, JJ: j, N: n}]
    for _ in range(7):
        nn = rng.randrange(1, 41)
        envs.append({N: nn, II: rng.randrange(nn), JJ: rng.randrange(4 * nn)})
    _check(ana, expr, envs)


test_simplify_symbolic_bounds = SETTINGS(given(**SYMBOLIC_ARGS)(_symbolic_bounds))
test_simplify_symbolic_bounds_many = pytest.mark.slow(
    MANY(given(**SYMBOLIC_ARGS)(_symbolic_bounds))
)


@settings(max_examples=300, deadline=None, database=None)
@given(expr=_exprs([X, Y], []), x=st.integers(-1000, 1000), y=st.integers(-1000, 1000))
def test_simplify_unbound_vars(expr: ir.Expr, x: int, y: int) -> None:
    _check(Analyzer(), expr, _envs({X: (-1000, 1000), Y: (-1000, 1000)}, {X: x, Y: y}, x + y))


@settings(max_examples=300, deadline=None, database=None)
@given(
    expr=_exprs([X, Y], []),
    x=st.integers(0, 15),
    y=st.integers(-8, 7),
    k=st.integers(-4, 12),
)
def test_constraint_scope_is_sound(expr: ir.Expr, x: int, y: int, k: int) -> None:
    ana = _const_analyzer()
    cond = ir.And(ir.LT(X, ir.IntImm("int32", k)), ir.GE(Y, ir.IntImm("int32", -2)))
    env = {X: x, Y: y, Z: 0}
    with ana.constraint(cond):
        simple = ana.simplify(expr)
        proved = ana.can_prove(ir.GE(expr, ir.IntImm("int32", 3)))
        b = ana.const_int_bound(expr)
    if evaluate(cond, env):
        want = evaluate(expr, env)
        assert evaluate(simple, env) == want
        assert b.min_value <= want <= b.max_value
        if proved:
            assert want >= 3
    # outside the scope the constraint no longer applies
    assert evaluate(ana.simplify(expr), env) == evaluate(expr, env)
