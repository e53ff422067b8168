"""Seeded, time-bounded fuzzing of IR JSON loading (see tests/script/loader_fuzz.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "script"))
from loader_fuzz import Stats, campaign


def _check(stats: Stats) -> None:
    assert stats.cases > 0
    assert stats.raw_total() == 0, (stats.summary(), stats.examples)
    assert not stats.broken, (stats.broken, stats.examples)


@pytest.mark.parametrize("seed", range(2))
def test_from_json_fuzz(seed: int) -> None:
    _check(campaign("json", seed, count=100, seconds=2.0))


def test_from_json_fuzz_accepts_and_round_trips_some() -> None:
    stats = campaign("json", 7, count=60)  # a fixed count: the figures are deterministic
    _check(stats)
    assert stats.accepted > 0
    assert stats.rejected > 0


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 110))
def test_from_json_fuzz_long(seed: int) -> None:
    _check(campaign("json", seed, count=2000))
