"""Tuning tests: helpers on the import path; ``gpu`` tests skipped without a GPU and ``nvcc``
tests without nvcc/ptxas."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests/tune has no __init__.py


def _gpu_available() -> bool:
    from tilecraft.runtime.cuda_driver import device_available

    return device_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    del config
    have_gpu: bool | None = None
    have_nvcc = shutil.which("nvcc") is not None and shutil.which("ptxas") is not None
    for item in items:
        if "tests/tune" not in str(item.path).replace("\\", "/"):
            continue
        if item.get_closest_marker("nvcc") and not have_nvcc:
            item.add_marker(pytest.mark.skip(reason="nvcc/ptxas not on PATH"))
        if item.get_closest_marker("gpu"):
            if have_gpu is None:
                have_gpu = _gpu_available()
            if not have_gpu:
                item.add_marker(pytest.mark.skip(reason="no CUDA GPU available"))
