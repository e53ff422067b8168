"""The GPU Matmul, GEMV and LowBatchGEMV rules over every topi workload of the rule tests:
each returns a schedule or a Decline with a reason, never raises, and takes exactly the
GEMM-like functions."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import tilecraft as tc
from tilecraft.rules import Decline
from tilecraft.rules.gpu import GEMV, LowBatchGEMV, Matmul

sys.path.insert(0, str(Path(__file__).parent.parent))  # tests/rules: the shared workloads
import cpu_rule_workloads as workloads

TARGETS = [tc.Target("cuda -arch=sm_80"), tc.Target("cuda -arch=sm_75")]
TAKEN = {
    "Matmul": {"matmul", "batch_matmul", "dense_bias", "conv2d"},  # conv2d: implicit GEMM
    "GEMV": set(),
    # x (n, K) with a symbolic n, and 13 rows times a (K, N) weight: a batch of rows
    "LowBatchGEMV": {"dense_bias", "matmul"},
}


@pytest.mark.parametrize("target", TARGETS, ids=["sm_80", "sm_75"])
def test_rules_schedule_or_decline_with_a_reason(target: tc.Target) -> None:
    for rule in (Matmul(), GEMV(), LowBatchGEMV()):
        taken = set()
        for name, (build, _, _) in workloads.OPS.items():
            result = rule.apply(build(), target)
            if isinstance(result, Decline):
                assert result.reason, (rule.name, name)
            else:
                assert isinstance(result, tc.Schedule), (rule.name, name, result)
                taken.add(name)
        assert taken == TAKEN[rule.name], rule.name
