"""Seeded, time-bounded fuzzing of the script parser (see loader_fuzz.py for the rules)."""

from __future__ import annotations

import pytest
from loader_fuzz import Stats, campaign


def _check(stats: Stats) -> None:
    assert stats.cases > 0
    assert stats.raw_total() == 0, (stats.summary(), stats.examples)
    assert not stats.broken, (stats.broken, stats.examples)


@pytest.mark.parametrize("seed", range(2))
def test_script_parser_fuzz(seed: int) -> None:
    stats = campaign("script", seed, count=100, seconds=2.0)
    _check(stats)


def test_script_parser_fuzz_accepts_and_round_trips_some() -> None:
    stats = campaign("script", 7, count=60)  # a fixed count: the figures are deterministic
    _check(stats)
    assert stats.accepted > 0
    assert stats.rejected > 0


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 110))
def test_script_parser_fuzz_long(seed: int) -> None:
    _check(campaign("script", seed, count=2000))
