"""Candidates of the CPU space are made once per trace: a trace with the same structure and
decisions gives the same candidate without replaying, postprocessing or featurizing again."""

from __future__ import annotations

import random

from tune_workloads import matmul

import tilecraft as tc
from tilecraft.tune.features import PerStoreFeature
from tilecraft.tune.postproc import default_postprocs
from tilecraft.tune.search import EvolutionarySearch
from tilecraft.tune.search._candidates import CandidateMaker, decision_key
from tilecraft.tune.search.evolutionary import _cleared
from tilecraft.tune.space import search_rules_space

CPU = tc.Target("cpu -mcpu=avx2 -num-cores=1")


def _maker(func: tc.ir.PrimFunc) -> CandidateMaker:
    return CandidateMaker(func, default_postprocs(CPU), PerStoreFeature(CPU))


def test_decision_key_tells_traces_apart() -> None:
    func = matmul(32, 32, 32)
    sketch = search_rules_space(CPU).generate(func, CPU, 0)[0].trace
    again = search_rules_space(CPU).generate(func, CPU, 0)[0].trace
    other = search_rules_space(CPU).generate(func, CPU, 3)[0].trace
    assert decision_key(sketch) == decision_key(again)
    assert decision_key(sketch) != decision_key(other)
    assert decision_key(_cleared(sketch)) is None  # undrawn decisions fix nothing


def test_a_trace_made_twice_is_reused() -> None:
    func = matmul(32, 32, 32)
    maker = _maker(func)
    rng = random.Random(0)
    sketch = search_rules_space(CPU).generate(func, CPU, 0)[0].trace
    sketch = sketch.simplified(remove_postproc=True)
    first = maker.make(_cleared(sketch), rng)
    assert first is not None
    assert maker.reused == 0
    assert maker.make(first.trace, rng) is first  # decided: no replay at all
    index = first.trace.sampling_indices()[0]
    changed = first.trace.with_decision(index, list(reversed(first.trace[index].decision)))
    other = maker.make(changed, rng)
    assert other is not None
    assert other is not first
    assert maker.reused == 1
    tc.testing.check_numeric(other.sch.func, func, rtol=1e-4, atol=1e-4)


def test_default_population_fits_a_round() -> None:
    # 32 per generation: the search (replay, postprocessing, features of every child) was
    # three quarters of a trial's time with 64
    assert EvolutionarySearch().population_size == 32
