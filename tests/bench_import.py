"""Import a benchmark script as a module for a test, with the process's environment restored
after: a benchmark sets its thread variables when it is imported."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@contextmanager
def benchmark_module(name: str) -> Iterator[ModuleType]:
    """``benchmarks/<name>.py`` imported; the environment and ``sys.path`` as they were
    after the block."""
    saved = dict(os.environ)
    sys.path.insert(0, str(BENCH))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))
        os.environ.clear()
        os.environ.update(saved)
