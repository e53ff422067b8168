"""Options shared by the whole test suite (pytest reads options only from the root conftest)."""

from __future__ import annotations

import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist (``-n``), OpenMP workers sleep while they wait for work.

    Several test processes share the cores, so a parallel kernel's spinning workers would
    compete with the other processes and a kernel could wait at its end for a worker taken off
    its core (see the README's "Threads"). Set before any kernel library loads OpenMP; a
    value the user set is kept.
    """
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite the golden CUDA files in tests/gpu/golden instead of comparing",
    )
