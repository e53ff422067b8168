"""GPU test options: ``--update-golden`` (declared in tests/conftest.py) rewrites
tests/gpu/golden/*.cu; marker skips.

Tests marked ``nvcc`` are skipped when nvcc is not on PATH; tests marked ``gpu`` are skipped
when no CUDA device can be opened (no driver, no device, or no GPU at all).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests/gpu has no __init__.py: import kernels


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


def _gpu_available() -> bool:
    from tilecraft.runtime.cuda_driver import device_available

    return device_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    del config
    have_nvcc = shutil.which("nvcc") is not None and shutil.which("ptxas") is not None
    have_gpu: bool | None = None
    for item in items:
        if item.get_closest_marker("nvcc") and not have_nvcc:
            item.add_marker(pytest.mark.skip(reason="nvcc/ptxas not on PATH"))
        if item.get_closest_marker("gpu"):
            if have_gpu is None:
                have_gpu = _gpu_available()
            if not have_gpu:
                item.add_marker(pytest.mark.skip(reason="no CUDA GPU available"))
