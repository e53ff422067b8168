"""Property test: random primitive sequences either fail cleanly or keep the function's meaning.

The campaign (``random_campaign.py``, steps and workloads in ``random_steps.py``) applies
random (seeded) primitive sequences to twelve workloads, half of them with a symbolic extent
compared at two or three runtime sizes. It checks that a failing step leaves the schedule
exactly as before (function object, trace length, handles, random state), that every trace
replays to the same function (live, from JSON and from its Python text), and that every
distinct scheduled function computes what the unscheduled one does. Any other exception is a
bug of a primitive. The default run is short and seeded; the slow run is the 5,000-sequence
campaign whose figures the issue reports.
"""

from __future__ import annotations

import pytest
from random_campaign import run_campaign
from random_steps import STEPS, WORKLOADS

from tilecraft.schedule import INSTRUCTION_KINDS


def test_workloads_are_one_third_symbolic() -> None:
    symbolic = [n for n, w in WORKLOADS.items() if w.symbolic]
    assert 3 * len(symbolic) >= len(WORKLOADS)
    assert all(len(WORKLOADS[n].sizes) >= 2 for n in symbolic)


def test_random_sequences_keep_meaning() -> None:
    stats = run_campaign(per_workload=17, base_seed=1000, n_steps=6, strict=True)
    assert stats.sequences == 17 * len(WORKLOADS) >= 200
    assert stats.schedule_errors > 0
    assert stats.successes > stats.sequences  # most sequences do change the function
    assert set(stats.steps_succeeded) == {s.__name__ for s in STEPS}
    assert stats.checked_functions > stats.sequences // 2


@pytest.mark.slow
def test_random_sequences_keep_meaning_many() -> None:
    stats = run_campaign(per_workload=417, base_seed=50_000, n_steps=10, strict=False)
    assert stats.sequences == 417 * len(WORKLOADS) >= 5000
    findings = stats.examples
    assert stats.meaning_changes == 0, findings
    assert stats.transactionality_violations == 0, findings
    assert stats.replay_mismatches == 0, findings
    assert not stats.raw_exceptions, findings
    assert stats.crashes == stats.oversized_allocations == 0, findings
    assert set(INSTRUCTION_KINDS) <= set(stats.kinds_succeeded)  # every primitive was used
