"""CPU Matmul with ``tunable=True``: the number of ``m`` blocks and the micro-kernel's ``K``
unroll are sampling instructions, every value they take schedules the GEMM exactly, the
rules' own choice is one of them, and the untuned schedule is the one it always was."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

import tilecraft as tc
from tilecraft.ir import PrimFunc, structural_hash
from tilecraft.rules.cpu import Matmul, MatmulConfig
from tilecraft.rules.cpu._matmul_parts import K_UNROLL_SAMPLED
from tilecraft.schedule import Schedule, Trace
from tilecraft.tune.space import RuleVariants

te, T = tc.te, tc.topi
PRESETS = ("avx2", "avx512")


def _matmul(m: int, n: int, k: int) -> PrimFunc:
    a = te.placeholder((m, k), "float32", name="A")
    b = te.placeholder((k, n), "float32", name="B")
    return te.create_prim_func([a, b, T.matmul(a, b)])


def _dense(m: int, n: int, k: int) -> PrimFunc:
    x = te.placeholder((m, k), "float32", name="x")
    w = te.placeholder((n, k), "float32", name="W")
    return te.create_prim_func([x, w, T.dense(x, w)])


def _batched(b: int, m: int, n: int, k: int) -> PrimFunc:
    x = te.placeholder((b, m, k), "float32", name="x")
    y = te.placeholder((b, k, n), "float32", name="y")
    return te.create_prim_func([x, y, T.matmul(x, y)])


def _small_l2(preset: str) -> MatmulConfig:
    """The preset's numbers with an 8 KiB L2: small GEMMs get their ``m`` blocked."""
    cfg = MatmulConfig.for_target(tc.Target(preset))
    return dataclasses.replace(cfg, l2_bytes=8 * 1024)


def _tunable(func: PrimFunc, preset: str, config: MatmulConfig | None = None) -> Schedule:
    got = Matmul(config).apply(func, tc.Target(preset), True)
    assert isinstance(got, Schedule), got
    return got


def _samples(trace: Trace) -> list[int]:
    return [i for i in trace.sampling_indices() if trace[i].kind == "sample_perfect_tile"]


def _every_decision(func: PrimFunc, sch: Schedule) -> dict[tuple[int, ...], Schedule]:
    """The schedule of each combination of the two-way perfect tilings the rule sampled
    (every divisor of each loop's extent allowed as its inner factor), keyed by the inner
    factors."""
    trace = sch.trace
    sites = _samples(trace)
    options = []
    for i in sites:
        extent = trace[i].decision[0] * trace[i].decision[1]
        limit = dict(trace[i].attrs)["max_innermost_factor"]
        options.append([d for d in range(1, extent + 1) if extent % d == 0 and d <= limit])
    out: dict[tuple[int, ...], Schedule] = {}
    for inner in itertools.product(*options):
        decisions = {
            i: [trace[i].decision[0] * trace[i].decision[1] // d, d]
            for i, d in zip(sites, inner, strict=True)
        }
        again = Schedule(func)
        trace.apply_to_schedule(again, decisions=decisions)
        out[inner] = again
    return out


def _redrawn(func: PrimFunc, trace: Trace, seed: int) -> Schedule:
    """``trace`` replayed with every sampling decision drawn anew from ``seed``."""
    for i in trace.sampling_indices():
        trace = trace.with_decision(i, None)
    again = Schedule(func, seed=seed)
    trace.apply_to_schedule(again)
    return again


UNTUNED = {  # structural hashes of the untuned schedules before the knobs were sampled
    ("avx2", "mm512"): "c4223ece668510b2559c4c82aab9edab",
    ("avx2", "mm1024"): "3cebb8e10479b697a21d24cc0bd8b675",
    ("avx2", "mm127x255x511"): "418178b0479be9689bff70290f6e37fd",
    ("avx2", "dense128x2048x2048"): "d5940e7571d0c4bd1c5f807db7249b0f",
    ("avx2", "bmm16x197x197x64"): "6d992f24478d5b190a35d242249996a6",
    ("avx512", "mm512"): "bac5b5f41df5ea94a0ddacba3e56fbc6",
    ("avx512", "mm1024"): "eb28c33ccb7bd3c141e47a3f584938ed",
    ("avx512", "mm127x255x511"): "36bc5c17038d041cf71dd3d45bef356f",
    ("avx512", "dense128x2048x2048"): "5fc37d0e074f10782a2e004bc7ae0be8",
    ("avx512", "bmm16x197x197x64"): "131ff3993492d05a44ea7a69995f6da7",
}
SHAPES = {
    "mm512": lambda: _matmul(512, 512, 512),
    "mm1024": lambda: _matmul(1024, 1024, 1024),
    "mm127x255x511": lambda: _matmul(127, 255, 511),
    "dense128x2048x2048": lambda: _dense(128, 2048, 2048),
    "bmm16x197x197x64": lambda: _batched(16, 197, 197, 64),
}


@pytest.mark.parametrize(("preset", "shape"), sorted(UNTUNED))
def test_untuned_schedule_is_unchanged(preset: str, shape: str) -> None:
    sch = Matmul().apply(SHAPES[shape](), tc.Target(preset), False)
    assert isinstance(sch, Schedule)
    assert not sch.trace.sampling_indices()
    assert structural_hash(sch.func) == UNTUNED[(preset, shape)]


@pytest.mark.parametrize("preset", PRESETS)
def test_the_rules_choice_is_a_point_of_the_tunable_space(preset: str) -> None:
    """The tunable trace with the rules' block count and ``K`` unroll replays to the untuned
    schedule (512^3 and 1024^3: ``m`` blocked, ``K`` unrolled)."""
    for shape in ("mm512", "mm1024"):
        func = SHAPES[shape]()
        untuned = Matmul().apply(func, tc.Target(preset), False)
        assert isinstance(untuned, Schedule)
        trace = _tunable(func, preset).trace
        sites = _samples(trace)
        assert len(sites) == 2  # the m blocks, then the K unroll
        blocks, unroll = _rules_factors(untuned.trace)
        decisions = {sites[0]: [blocks, _extent(trace, sites[0]) // blocks],
                     sites[1]: [_extent(trace, sites[1]) // unroll, unroll]}  # fmt: skip
        again = Schedule(func)
        trace.apply_to_schedule(again, decisions=decisions)
        assert structural_hash(again.func) == structural_hash(untuned.func)


def _extent(trace: Trace, index: int) -> int:
    decision = trace[index].decision
    return int(decision[0] * decision[1])


def _rules_factors(trace: Trace) -> tuple[int, int]:
    """(m blocks, K unroll) of an untuned trace: its split ``[blocks, None]`` and its last
    split ``[None, unroll]``."""
    splits = [inst.inputs[1] for inst in trace if inst.kind == "split"]
    blocks = next(f[0] for f in splits if f[-1] is None and f[0] is not None)
    return int(blocks), int(splits[-1][-1])


@pytest.mark.parametrize("preset", PRESETS)
def test_seeded_draws_cover_the_sampled_values(preset: str) -> None:
    func = _matmul(512, 512, 512)
    trace = _tunable(func, preset).trace
    blocks: set[int] = set()
    unrolls: set[int] = set()
    for seed in range(24):
        drawn = _redrawn(func, trace, seed).trace
        first, second = _samples(drawn)
        blocks.add(drawn[first].decision[0])
        unrolls.add(drawn[second].decision[1])
    assert unrolls == {1, 2, 4, K_UNROLL_SAMPLED}  # every power of two up to 8
    assert len(blocks) >= 4  # 64 or 128 row tiles: blocks of 1 tile up to all of them
    assert 1 in blocks
    again = _redrawn(func, trace, 3)
    assert structural_hash(again.func) == structural_hash(_redrawn(func, trace, 3).func)


CASES = [
    ("mm", lambda: _matmul(64, 96, 128)),
    ("dense", lambda: _dense(48, 64, 96)),
    ("batched", lambda: _batched(2, 40, 48, 24)),
]


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize(("name", "make"), CASES, ids=[c[0] for c in CASES])
def test_every_sampled_candidate_is_exact(preset: str, name: str, make: object) -> None:
    """Each value of each sample (the others at their first) computes what the unscheduled
    function computes, on an ``m`` blocked for a small L2."""
    assert callable(make)
    func = make()
    sch = _tunable(func, preset, _small_l2(preset))
    sites = _samples(sch.trace)
    assert sites, name
    every = _every_decision(func, sch)
    firsts = next(iter(every))
    seen = set()
    for inner, cand in every.items():
        if sum(a != b for a, b in zip(inner, firsts, strict=True)) > 1:
            continue  # one sample moved at a time
        key = structural_hash(cand.func)
        assert key not in seen
        seen.add(key)
        tc.testing.check_numeric(cand.func, func, rtol=1e-4, atol=1e-4)
    assert len(seen) >= 4


@pytest.mark.parametrize("preset", PRESETS)
def test_rule_variants_keep_the_matmul_samples(preset: str) -> None:
    """The default space's rule variants of a GEMM are sampled sketches, not fixed ones."""
    func = _matmul(256, 256, 256)
    sketches = RuleVariants().generate(func, tc.Target(preset), 0)
    assert sketches
    assert all(len(_samples(s.trace)) >= 1 for s in sketches)


def test_the_knob_benchmark_replays_the_rules_pair() -> None:
    """``benchmarks/matmul_knobs.py`` times pairs of the sampled values: the rules' own pair
    replays to the untuned schedule, another pair to another one."""
    from bench_import import benchmark_module

    func = _matmul(512, 512, 512)
    target = tc.Target("avx512")
    untuned = Matmul().apply(func, target, False)
    assert isinstance(untuned, Schedule)
    blocks, unroll = _rules_factors(untuned.trace)
    with benchmark_module("matmul_knobs") as bench:
        same = bench.pair_schedule(func, target, blocks, unroll)
        other = bench.pair_schedule(func, target, blocks, unroll * 2)
    assert structural_hash(same.func) == structural_hash(untuned.func)
    assert structural_hash(other.func) != structural_hash(untuned.func)
