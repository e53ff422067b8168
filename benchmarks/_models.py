"""Make the shared model fixtures (``tests/models``) importable from a benchmark.

The benchmarks run as scripts (``python benchmarks/x.py``, so this folder is on
``sys.path``); ``import _models`` puts ``tests/`` on the path too and re-exports the package:
``from _models import models``. The fixtures live with the tests, not in the tilecraft
package: they are test and benchmark data, not API.
"""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[1] / "tests")
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

import models  # noqa: E402

__all__ = ["models"]
