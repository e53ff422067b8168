"""Options shared by the whole test suite (pytest reads options only from the root conftest)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite the golden CUDA files in tests/gpu/golden instead of comparing",
    )
