"""Iterator-map detection: fused, split, fused-then-split, failures, symbolic extents."""

from __future__ import annotations

from tilecraft import ir
from tilecraft.arith import Analyzer, detect_iter_map, evaluate

i, j, k = ir.Var("i", "int32"), ir.Var("j", "int32"), ir.Var("k", "int32")
n = ir.Var("n", "int32")


def R(ext: int | ir.Expr) -> ir.Range:
    return ir.Range(0, ext)


def _splits(res, idx):  # type: ignore[no-untyped-def]
    out = []
    for s in res.indices[idx].args:
        src = s.source.source
        name = src.name if isinstance(src, ir.Var) else "fused"
        out.append((name, _c(s.lower_factor), _c(s.extent), _c(s.scale)))
    return out


def _c(e: ir.Expr) -> int | str:
    return e.value if type(e) is ir.IntImm else "sym"


def test_identity_is_bijective() -> None:
    res = detect_iter_map([i, j], {i: R(4), j: R(8)})
    assert res, res.errors
    assert _splits(res, 0) == [("i", 1, 4, 1)]
    assert _splits(res, 1) == [("j", 1, 8, 1)]


def test_fused() -> None:
    res = detect_iter_map([i * 8 + j], {i: R(4), j: R(8)})
    assert res, res.errors
    assert _splits(res, 0) == [("i", 1, 4, 8), ("j", 1, 8, 1)]


def test_split() -> None:
    f = ir.Var("f", "int32")
    res = detect_iter_map([f // 8, f % 8], {f: R(32)})
    assert res, res.errors
    assert _splits(res, 0) == [("f", 8, 4, 1)]
    assert _splits(res, 1) == [("f", 1, 8, 1)]


def test_split_three_ways() -> None:
    f = ir.Var("f", "int32")
    res = detect_iter_map([f // 32, f % 32 // 4, f % 4], {f: R(128)})
    assert res, res.errors
    assert [_splits(res, d)[0][1:3] for d in range(3)] == [(32, 4), (4, 8), (1, 4)]


def test_fused_then_split() -> None:
    # fuse(i:6, j:4) -> f = i*4 + j, then split f by 3 -> (i*4 + j) // 3, (i*4 + j) % 3
    res = detect_iter_map([(i * 4 + j) // 3, (i * 4 + j) % 3], {i: R(6), j: R(4)})
    assert res, res.errors
    ((name0, lf0, ext0, _),) = _splits(res, 0)
    ((name1, lf1, ext1, _),) = _splits(res, 1)
    assert (name0, lf0, ext0) == ("fused", 3, 8)
    assert (name1, lf1, ext1) == ("fused", 1, 3)
    mark = res.indices[0].args[0].source
    assert mark is res.indices[1].args[0].source
    assert _c(mark.extent) == 24


def test_split_reorder_fuse_round_trip() -> None:
    # split i into (io, ii), j into (jo, ji), indices recovered through reorder
    io, ii, jo, ji = (ir.Var(s, "int32") for s in ("io", "ii", "jo", "ji"))
    dom = {io: R(4), ii: R(8), jo: R(2), ji: R(16)}
    res = detect_iter_map([io * 8 + ii, jo * 16 + ji], dom)
    assert res, res.errors
    for d, want in enumerate(
        [[("io", 1, 4, 8), ("ii", 1, 8, 1)], [("jo", 1, 2, 16), ("ji", 1, 16, 1)]]
    ):
        assert _splits(res, d) == want


def test_overlap_is_not_bijective() -> None:
    res = detect_iter_map([i, i], {i: R(4)})
    assert not res
    assert "overlap" in res.errors[0]


def test_non_radix_sum_fails() -> None:
    res = detect_iter_map([i + j], {i: R(4), j: R(4)})
    assert not res
    assert "not a fused iterator" in res.errors[0]


def test_missing_iterator() -> None:
    res = detect_iter_map([i], {i: R(4), j: R(8)})
    assert not res
    assert "j is not used" in res.errors[0]
    assert detect_iter_map([i], {i: R(4), j: R(8)}, check_level="surjective")


def test_partial_split_surjective_only() -> None:
    f = ir.Var("f", "int32")
    assert not detect_iter_map([f % 8], {f: R(32)})
    assert detect_iter_map([f % 8], {f: R(32)}, check_level="surjective")


def test_non_affine() -> None:
    res = detect_iter_map([i * i], {i: R(4)})
    assert not res
    assert "non-affine" in res.errors[0]
    res = detect_iter_map([i // j], {i: R(4), j: R(3)})
    assert not res


def test_non_divisible_split_fails() -> None:
    f = ir.Var("f", "int32")
    res = detect_iter_map([f // 8, f % 8], {f: R(30)})
    assert not res
    assert "not divisible" in res.errors[0]


def test_predicate_narrows_fused_extent() -> None:
    # split of a 100-extent loop by 32: io in [0, 4), ii in [0, 32), io*32 + ii < 100
    io, ii = ir.Var("io", "int32"), ir.Var("ii", "int32")
    res = detect_iter_map([io * 32 + ii], {io: R(4), ii: R(32)}, predicate=io * 32 + ii < 100)
    assert res, res.errors
    assert _c(res.indices[0].args[0].source.extent) == 100


def test_symbolic_extents() -> None:
    ana = Analyzer()
    ana.bind(n, ir.Range(1, 64))
    res = detect_iter_map([i * n + j], {i: R(4), j: R(n)}, analyzer=ana)
    assert res, res.errors
    f = ir.Var("f", "int32")
    res = detect_iter_map([f // 4, f % 4], {f: R(n * 4)}, analyzer=ana)
    assert res, res.errors
    assert ana.can_prove_equal(res.indices[0].args[0].extent, n)
    res = detect_iter_map([i * n + j], {i: R(4), j: R(n + 1)}, analyzer=ana)
    assert not res


def test_iter_sum_to_expr_matches_index() -> None:
    f = ir.Var("f", "int32")
    idx = [f // 32, f % 32 // 4, f % 4 + 1]
    res = detect_iter_map(idx, {f: R(128)}, check_level="surjective")
    assert res, res.errors
    for v in range(0, 128, 7):
        for e, s in zip(idx, res.indices, strict=True):
            assert evaluate(s.to_expr(), {f: v}) == evaluate(e, {f: v})
