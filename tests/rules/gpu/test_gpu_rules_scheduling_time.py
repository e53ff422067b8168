"""How long the GPU default rules take on the TinyLlama decoder layer (every function; no
nvcc, no emulation). A measurement, so ``slow``: CPU time of this process (``process_time``,
median of three), which a machine shared with other work inflates less than wall time.
``benchmarks/gpu_rules_bench.py`` prints the same per kernel."""

from __future__ import annotations

import statistics
import time

import models
import pytest

import tilecraft as tc
from tilecraft import rules as dl
from tilecraft.graph import get_pipeline

SM90 = tc.Target("cuda -arch=sm_90")


def _rules_cpu_seconds(case: models.ModelCase) -> float:
    with SM90:
        mod = get_pipeline("default", params=case.params)(case.mod)
    spent = []
    for _ in range(3):
        start = time.process_time()
        with SM90:
            out = dl.ApplyDefaultSchedule(*dl.gpu.default_rules(), strict=True)(mod)
        spent.append(time.process_time() - start)
    assert all(f.attrs.get(dl.SCHEDULE_RULE_ATTR) for _, f in out.prim_funcs())
    return statistics.median(spent)


@pytest.mark.slow
@pytest.mark.parametrize("phase", ["decode", "prefill"])
@pytest.mark.parametrize("half", [False, True], ids=["fp32", "fp16"])
def test_decoder_layer_scheduled_within_a_second(half: bool, phase: str) -> None:
    """Decode (a KV cache) and prefill (a symbolic sequence length: the fp16 projections and
    QK^T take the tensor-core schedule, the costliest to build)."""
    cfg = models.llama.fp16(models.llama.TINYLLAMA) if half else models.llama.TINYLLAMA
    assert _rules_cpu_seconds(models.llama.case(cfg, phase)) < 1.0
