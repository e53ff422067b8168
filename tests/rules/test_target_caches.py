"""Target cache sizes (used by the CPU rules' Configs): read from sysfs, with fallbacks."""

from __future__ import annotations

from pathlib import Path

import tilecraft as tc
from tilecraft.target import CACHE_FALLBACK_BYTES, host_cache_sizes


def _cache(root: Path, index: int, level: str, kind: str, size: str) -> None:
    d = root / f"index{index}"
    d.mkdir(parents=True)
    (d / "level").write_text(level + "\n")
    (d / "type").write_text(kind + "\n")
    (d / "size").write_text(size + "\n")


def test_sizes_come_from_sysfs_data_and_unified_caches(tmp_path: Path) -> None:
    _cache(tmp_path, 0, "1", "Data", "48K")
    _cache(tmp_path, 1, "1", "Instruction", "32K")
    _cache(tmp_path, 2, "2", "Unified", "2048K")
    _cache(tmp_path, 3, "3", "Unified", "96M")
    assert host_cache_sizes(str(tmp_path)) == (48 << 10, 2 << 20, 96 << 20)


def test_missing_or_garbled_levels_fall_back(tmp_path: Path) -> None:
    _cache(tmp_path, 0, "1", "Data", "32K")
    _cache(tmp_path, 1, "2", "Unified", "lots")
    assert host_cache_sizes(str(tmp_path)) == (32 << 10, *CACHE_FALLBACK_BYTES[1:])
    assert host_cache_sizes(str(tmp_path / "absent")) == CACHE_FALLBACK_BYTES


def test_cpu_targets_carry_cache_sizes_and_gpu_targets_zero() -> None:
    cpu = tc.Target("cpu")
    assert 0 < cpu.l1d_bytes <= cpu.l2_bytes
    assert cpu.l2_bytes > 0
    assert cpu.l3_bytes > 0
    gpu = tc.Target("cuda -arch=sm_80")
    assert (gpu.l1d_bytes, gpu.l2_bytes, gpu.l3_bytes) == (0, 0, 0)
