"""Fixtures loading the example scripts of ``examples/`` (not a package) by file name."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(name: str) -> ModuleType:
    """The module ``examples/<name>.py`` (loaded once per session)."""
    key = f"tilecraft_example_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def cpu_matmul() -> ModuleType:
    return load_example("cpu_matmul")


@pytest.fixture(scope="session")
def cpu_norms() -> ModuleType:
    return load_example("cpu_softmax_layernorm")
