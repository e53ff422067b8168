"""Tuning tests: helpers on the import path; ``gpu`` tests skipped without a GPU and ``nvcc``
tests without nvcc/ptxas."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests/tune has no __init__.py

from tilecraft import tune as ms


@pytest.fixture(scope="module")
def workers() -> Iterator[tuple[ms.LocalBuilder, ms.LocalRunner]]:
    """A local builder and a one-thread runner shared by a module's tuning runs."""
    builder = ms.LocalBuilder(max_workers=2, recycle_after=None)
    runner = ms.LocalRunner(timeout_s=20.0, num_threads=1, number=1, repeat=2)
    yield builder, runner
    builder.close()
    runner.close()


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
