"""GPU rule tests: ``workloads`` importable; tests marked ``nvcc`` skipped without nvcc/ptxas."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    del config
    have_nvcc = shutil.which("nvcc") is not None and shutil.which("ptxas") is not None
    for item in items:
        if item.get_closest_marker("nvcc") and not have_nvcc:
            item.add_marker(pytest.mark.skip(reason="nvcc/ptxas not on PATH"))
