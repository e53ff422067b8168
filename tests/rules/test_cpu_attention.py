"""The CPU ``Attention`` rule: fused softmax attention per block of query rows."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import tilecraft as tc
from tilecraft import te, topi
from tilecraft.graph import GraphBuilder, Legalize
from tilecraft.rules import Decline
from tilecraft.rules.cpu import Attention, AttentionConfig, default_rules
from tilecraft.testing import check_numeric

AVX2 = tc.Target("cpu -mcpu=avx2")
AVX512 = tc.Target("cpu -mcpu=avx512")
N = tc.ir.Var("n", "int32")


def graph_attention(s: int, heads: int, dim: int, causal: bool) -> tc.ir.PrimFunc:
    """The graph's ``attention`` op on (1, s, heads, dim) tensors, legalized (layout copies)."""
    bb = GraphBuilder()
    q, k, v = (bb.param(n, (1, s, heads, dim), "float32") for n in "qkv")
    mod = tc.IRModule({"main": bb.finish(bb.emit("attention", [q, k, v], {"causal": causal}))})
    (func,) = [f for f in Legalize()(mod).functions.values() if isinstance(f, tc.ir.PrimFunc)]
    return func


def topi_attention(
    qshape: tuple[object, ...], kvshape: tuple[object, ...], causal: bool, scale: float = 0.25
) -> tc.ir.PrimFunc:
    """``topi.attention`` on (..., S, D) placeholders read in place (no layout copies)."""
    q = te.placeholder(qshape, "float32", name="q")
    k = te.placeholder(kvshape, "float32", name="k")
    v = te.placeholder(kvshape, "float32", name="v")
    return te.create_prim_func([q, k, v, topi.attention(q, k, v, causal=causal, scale=scale)])


def scheduled(func: tc.ir.PrimFunc, target: tc.Target) -> tc.Schedule:
    got = Attention().apply(func, target, False)
    assert isinstance(got, tc.Schedule), got
    return got


@pytest.mark.parametrize("target", [AVX2, AVX512], ids=["avx2", "avx512"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("s", [17, 64])
def test_graph_attention_matches_unscheduled(target: tc.Target, causal: bool, s: int) -> None:
    func = graph_attention(s, 2, 16, causal)
    check_numeric(scheduled(func, target).func, func, seed=s)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_more_queries_than_a_block_and_ragged(causal: bool) -> None:
    """77 rows: several query blocks, the last one and the key tiles partial."""
    func = graph_attention(77, 1, 32, causal)
    check_numeric(scheduled(func, AVX512).func, func, seed=1)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_fewer_queries_than_keys_and_operands_in_place(causal: bool) -> None:
    """Queries after a KV cache (S < T, the mask aligned to the last keys); K packed from
    the parameter by a new copy."""
    func = topi_attention((2, 3, 9, 16), (2, 3, 40, 16), causal)
    check_numeric(scheduled(func, AVX2).func, func, seed=2)


def test_grouped_query_heads() -> None:
    """GQA: 3 query heads per key/value head, the key/value batch axis broadcast."""
    func = topi_attention((1, 2, 3, 19, 16), (1, 2, 1, 19, 16), causal=True)
    check_numeric(scheduled(func, AVX512).func, func, seed=3)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_symbolic_sequence_length(causal: bool) -> None:
    func = topi_attention((2, N, 16), (2, N, 16), causal)
    sch = scheduled(func, AVX2)
    for n in (1, 7, 33):
        check_numeric(sch.func, func, shape_vars={"n": n}, seed=n)


def test_matches_numpy_softmax_attention() -> None:
    """The legalized op itself is softmax attention (causal mask aligned to the last keys)."""
    func = topi_attention((1, 5, 8), (1, 7, 8), causal=True, scale=0.5)
    lib = tc.build(scheduled(func, AVX512).mod, target="cpu")
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 5, 8), dtype=np.float32)
    k, v = (rng.standard_normal((1, 7, 8), dtype=np.float32) for _ in "kv")
    out = np.zeros((1, 5, 8), np.float32)
    lib["main"](q, k, v, out)
    s = q @ k.transpose(0, 2, 1) * 0.5
    s = np.where(np.arange(7)[None, :] <= np.arange(5)[:, None] + 2, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(out, (p / p.sum(-1, keepdims=True)) @ v, rtol=1e-5, atol=1e-6)


def test_config_from_the_target() -> None:
    """Register tiles from the vector width and register count: AVX2 6 x 16 (12 of 16
    registers accumulate), AVX-512 8 x 32 (16 of 32; 8 row pointers at most)."""
    a2, a5 = AttentionConfig.for_target(AVX2), AttentionConfig.for_target(AVX512)
    assert (a2.mr, a2.nr_vectors * a2.lanes(32), a2.registers) == (6, 16, 16)
    assert (a5.mr, a5.nr_vectors * a5.lanes(32), a5.registers) == (8, 32, 32)
    assert [a2.row_tile(128), a2.row_tile(77), a5.row_tile(1024)] == [4, 6, 8]
    # two rows x 1024 keys x 4 bytes per query row: an eighth of a 512 KiB L2 holds 8 rows
    assert [a2.query_block(4, 1024, 4, 1024), a5.query_block(8, 1024, 4, 1024)] == [8, 16]
    assert [a5.query_block(8, 128, 4, 128), a5.query_block(8, None, 4, None)] == [32, 32]
    # a head dimension of 16 takes one AVX-512 vector, not a guarded pair
    assert [a5.column_tile(64, 16), a5.column_tile(16, 16), a5.column_tile(77, 16)] == [32, 16, 32]
    # the largest block dividing the rows when one does (no guarded block): 40 rows, 8
    assert [a5.query_block(8, 128, 4, 96), a5.query_block(8, 128, 4, 77)] == [32, 32]
    assert [a5.query_block(8, 128, 4, 24), a5.query_block(8, 128, 4, 40)] == [24, 8]


@pytest.mark.parametrize(("target", "width"), [(AVX2, 16), (AVX512, 32)], ids=["avx2", "avx512"])
def test_vector_loops_follow_the_target(target: tc.Target, width: int) -> None:
    sch = scheduled(graph_attention(64, 2, 64, False), target)
    text = sch.func.script()
    assert f"T.vectorized({width})" in text
    for block in ("attention_scores", "attention_weighted"):
        loops = [sch.get(lp) for lp in sch.get_loops(sch.get_block(block))]
        assert (loops[-1].kind.value, loops[-1].extent.value) == ("vectorized", width)
        # no unroll pragma: it would turn gcc's if-conversion off for the whole kernel
        assert loops[-2].kind.value == "serial"
    assert "#pragma GCC unroll" not in tc.build(sch.mod, target="cpu").source


def test_taken_first_by_the_default_rules() -> None:
    func = graph_attention(17, 2, 16, True)
    for rule in default_rules():
        got = rule.apply(func, AVX2, False)
        if not isinstance(got, Decline):
            assert rule.name == "Attention"
            break


def test_declines_other_functions_with_a_reason() -> None:
    a = te.placeholder((16, 8), "float32", name="a")
    b = te.placeholder((8, 16), "float32", name="b")
    got = Attention().apply(te.create_prim_func([a, b, topi.matmul(a, b)]), AVX2, False)
    assert isinstance(got, Decline)
    assert "two einsum" in got.reason
    q = te.placeholder((2, 9, 16), "float32", name="q")
    old = te.create_prim_func([q, topi.causal_attention(q, q, q)])  # normalized before @ v
    got = Attention().apply(old, AVX2, False)
    assert isinstance(got, Decline)
    assert "not read by one row sum and the weighted sum" in got.reason


def test_causal_exponentials_have_no_condition_and_no_infinity() -> None:
    """Regression: exp(-inf) for masked keys took the vector exp's slow path (s = 1024 causal
    ran 3x torch's time), and a condition next to the call kept gcc from vectorizing it."""
    sch = scheduled(graph_attention(32, 2, 16, True), AVX512)
    source = tc.build(sch.mod, target="cpu").source
    lines = [ln for ln in source.splitlines() if "expf(" in ln and "=" in ln and "TC_" not in ln]
    assert lines
    for line in lines:
        assert "?" not in line
        assert "INFINITY" not in line


PRESETS = [tc.Target("avx512 -num-cores=2"), tc.Target("avx2 -num-cores=2")]
KEY_STAGES = (
    "attention_scores",
    "attention_scores_init",
    "attention_masked",
    "attention_softmax_maxelem_rf",  # the row reductions' partial vectors
    "attention_softmax_arg",
    "attention_softmax_exp",
    "attention_softmax_weight",
    "attention_softmax_expsum_rf",
    "attention_weighted",
)


def _guarded(sch: tc.Schedule) -> list[str]:
    """The blocks ``Schedule.guard`` restricted, in trace order."""
    return [sch.get(inst.inputs[0]).name for inst in sch.trace if inst.kind == "guard"]


@pytest.mark.parametrize("target", PRESETS, ids=["avx512", "avx2"])
@pytest.mark.parametrize(
    ("qshape", "kvshape"),
    [
        ((3, 64, 16), (3, 64, 16)),  # S == T, whole query blocks
        ((2, 77, 16), (2, 77, 16)),  # ragged: partial query block and key tile
        ((2, 2, 19, 32), (2, 2, 83, 32)),  # T > S (a KV cache), ragged, 2 x 2 heads
    ],
    ids=["square", "ragged", "kv-cache"],
)
def test_causal_skipping_is_exact(target: tc.Target, qshape: tuple, kvshape: tuple) -> None:
    """Skipping the key chunks hidden from a whole query block changes no bit: the skipped
    weights are exactly 0 and the skipped scores -inf (``_causal_skip``)."""
    func = topi_attention(qshape, kvshape, causal=True)
    skipping = scheduled(func, target)
    assert len(_guarded(skipping)) == len(KEY_STAGES)
    check_numeric(skipping.func, func, seed=5)
    cfg = replace(AttentionConfig.for_target(target), skip_hidden=False)
    plain = Attention(cfg).apply(func, target, False)
    assert isinstance(plain, tc.Schedule)
    assert not _guarded(plain)
    check_numeric(skipping.func, plain.func, rtol=0.0, atol=0.0, seed=6)


@pytest.mark.parametrize("target", PRESETS, ids=["avx512", "avx2"])
def test_causal_schedule_skips_hidden_key_chunks(target: tc.Target) -> None:
    """Every stage over the keys is guarded by its chunk's first key against the query
    block's last visible key, and the lowered code tests it above the chunk's loops; the
    full mask is left unguarded."""
    sch = scheduled(graph_attention(64, 2, 16, True), target)
    assert sorted(_guarded(sch)) == sorted(KEY_STAGES)
    assert all(_has_predicate(sch, name) for name in KEY_STAGES)
    source = tc.build(sch.mod, target="cpu").source
    guards = [ln.strip() for ln in source.splitlines() if ln.strip().startswith("if ((")]
    assert len(guards) >= len(KEY_STAGES), guards
    full = scheduled(graph_attention(64, 2, 16, False), target)
    assert not _guarded(full)
    assert "T.where" not in full.func.script()


def _has_predicate(sch: tc.Schedule, name: str) -> bool:
    pred = sch.get_realize(sch.get_block(name)).predicate
    return not (isinstance(pred, tc.ir.IntImm) and pred.value == 1)


def test_causal_chunks_not_dividing_the_tile_are_not_skipped() -> None:
    """30 queries, 100 keys on AVX2: the row reductions run in chunks of 20 keys, which do
    not divide the 16 of a scores tile, so no stage is guarded (skipping some stages but not
    their readers would read unwritten scores); the result is still exact."""
    func = topi_attention((2, 30, 16), (2, 100, 16), causal=True)
    sch = scheduled(func, PRESETS[1])
    assert not _guarded(sch)
    check_numeric(sch.func, func, seed=7)


def _shape(sch: tc.Schedule, block: str) -> list[int]:
    return [d.value for d in sch.get(sch.get_block(block)).writes[0].buffer.shape]


def test_key_panels_and_row_spreading() -> None:
    """K is packed in panels of a tile's keys; 4 KiB score rows get one cache line more."""
    sch = scheduled(graph_attention(1024, 1, 64, False), AVX512)
    assert _shape(sch, "k_bhsd") == [1, 1, 32, 64, 32]
    masked = sch.get(sch.get_block("attention_masked"))
    assert masked.annotations["buffer_dim_align"] == ((0, 2, 1024, 16),)
    ragged = scheduled(graph_attention(77, 1, 64, False), AVX512)
    # 77 keys: no whole panels, a plain (d, t) transpose; rows of 308 bytes left alone
    assert _shape(ragged, "k_bhsd") == [1, 1, 64, 77]
    assert "buffer_dim_align" not in ragged.get(ragged.get_block("attention_masked")).annotations


def test_gpu_rules_still_schedule_the_fused_form() -> None:
    """The legalized op is the GPU rules' as well (GeneralReduction), exact under racecheck."""
    from tilecraft import rules as dl
    from tilecraft.rules.gpu import default_rules as gpu_rules

    gpu = tc.Target("cuda -arch=sm_90")
    func = graph_attention(9, 1, 16, True)
    with gpu:
        mod = dl.ApplyDefaultSchedule(*gpu_rules())(tc.IRModule({"main": func}))
    assert mod["main"].attrs["tc.schedule_rule"] == "GeneralReduction"
    check_numeric(mod["main"], func, emulate_gpu="racecheck", seed=4)
