"""CUDA targets and presets, the host CPU description and the current target."""

from __future__ import annotations

import pytest

import tilecraft as tc
from tilecraft.target import GPU_PRESETS, Target, TargetError


def test_cuda_target_from_arch_uses_the_matching_preset_limits():
    t = Target("cuda -arch=sm_90")
    assert (t.kind, t.arch, t.compute_capability, t.is_gpu) == ("cuda", "sm_90", 90, True)
    assert t.gpu.warp_size == t.warp_size == 32
    assert t.gpu.max_threads_per_block == 1024
    assert t.gpu.max_shared_memory_per_block_optin == 227 * 1024
    assert t.gpu.sm_count == 132


@pytest.mark.parametrize("name", ["h100", "h200", "a100", "l4", "rtx4090"])
def test_presets(name):
    t = Target(name)
    assert t.is_gpu
    assert t.gpu == GPU_PRESETS[name]
    assert name in Target.presets()


def test_cpu_target_describes_the_host():
    t = Target("cpu")
    assert (t.kind, t.is_gpu, t.gpu) == ("cpu", False, None)
    assert t.num_cores >= 1
    assert t.simd_bits in (128, 256, 512)
    assert t.warp_size == 1


def test_with_target_sets_the_current_target():
    gpu = tc.Target("cuda -arch=sm_80")
    assert Target.current() is None
    with gpu:
        assert Target.current() is gpu
    assert Target.current() is None


def test_bad_arch_is_rejected():
    with pytest.raises(TargetError, match="sm_90"):
        Target("cuda -arch=volta")
