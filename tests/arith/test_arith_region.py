"""Regions: intervals covered by accesses, relaxation over loop nests, unions."""

from __future__ import annotations

import itertools

from tilecraft import ir
from tilecraft.arith import (
    Analyzer,
    IntSet,
    eval_region,
    eval_set,
    evaluate,
    relax_region,
    union_region,
)

i, j, k = ir.Var("i", "int32"), ir.Var("j", "int32"), ir.Var("k", "int32")
n = ir.Var("n", "int32")


def _ints(r: ir.Range) -> tuple[int, int]:
    assert type(r.min) is ir.IntImm, r
    assert type(r.extent) is ir.IntImm, r
    return r.min.value, r.extent.value


def test_affine_region_exact() -> None:
    region = eval_region([i * 16 + j, k], {i: ir.Range(0, 4), j: ir.Range(0, 16)})
    assert _ints(region[0]) == (0, 64)
    assert region[1].min is k
    assert _ints(ir.Range(0, region[1].extent))[1] == 1


def test_region_matches_brute_force() -> None:
    exprs = [i * 3 - j + 2, (i * 4 + j) // 3, (i + j) % 5, ir.Min(i, j) * 2, i * 8 - j * 8]
    dom = {i: ir.Range(1, 5), j: ir.Range(0, 7)}
    for e in exprs:
        (r,) = eval_region([e], dom)
        lo, ext = _ints(r)
        values = {evaluate(e, {i: a, j: b}) for a, b in itertools.product(range(1, 6), range(7))}
        assert lo <= min(values), e
        assert max(values) <= lo + ext - 1, e
        if type(e) not in (ir.Min, ir.FloorMod):
            assert (lo, lo + ext - 1) == (min(values), max(values)), e


def test_relax_tile_region() -> None:
    # A[io*32 + ii, k] accessed for ii in [0, 32): the tile of io
    io, ii = ir.Var("io", "int32"), ir.Var("ii", "int32")
    region = relax_region([ir.Range(io * 32 + ii, 1), ir.Range(0, 64)], {ii: ir.Range(0, 32)})
    ana = Analyzer()
    assert ana.can_prove_equal(region[0].min, io * 32)
    assert ana.can_prove_equal(region[0].extent, 32)
    assert _ints(region[1]) == (0, 64)


def test_symbolic_region() -> None:
    region = eval_region([i + k], {i: ir.Range(0, n)})
    ana = Analyzer()
    assert region[0].min is k
    assert ana.can_prove_equal(region[0].extent, n)


def test_union_region() -> None:
    a = [ir.Range(0, 8), ir.Range(4, 4)]
    b = [ir.Range(4, 8), ir.Range(0, 2)]
    u = union_region([a, b])
    assert [_ints(r) for r in u] == [(0, 12), (0, 8)]
    ana = Analyzer()
    ana.bind(n, ir.Range(1, 10))
    u = union_region([[ir.Range(0, n)], [ir.Range(0, n + 2)]], ana)
    assert ana.can_prove_equal(u[0].extent, n + 2)


def test_eval_set_intset() -> None:
    s = eval_set(i * 2 + 1, {i: IntSet.interval(0, 9)})
    assert (s.min_value.value, s.max_value.value) == (1, 19)
    s = eval_set(i * -2, {i: ir.Range(0, 10)})
    assert (s.min_value.value, s.max_value.value) == (-18, 0)
    assert IntSet.single_point(3).is_bounded()
