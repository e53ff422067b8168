"""tilecraft: a tensor-program compiler.

The loop/block IR (:mod:`tilecraft.ir`) with its script form (:mod:`tilecraft.script`),
arithmetic analysis (:mod:`tilecraft.arith`), computations (:mod:`tilecraft.te`,
:mod:`tilecraft.topi`), schedules (:mod:`tilecraft.schedule`), lowering, code generation and a
runtime. Subpackages are imported on first use, so ``import tilecraft`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

from . import errors as errors
from . import ir as ir
from .target import Target as Target

__version__ = "0.1.0"

_SUBMODULES = {
    "arith", "script", "te", "topi", "schedule", "lower", "codegen", "runtime", "graph",
    "frontend", "rules", "tune", "dispatch", "testing", "config", "target",
}  # fmt: skip

# name -> (module, attribute) re-exported lazily at the top level
_LAZY_ATTRS = {
    "Schedule": ("tilecraft.schedule", "Schedule"),
    "build": ("tilecraft.runtime", "build"),
    "IRModule": ("tilecraft.ir", "IRModule"),
    "PrimFunc": ("tilecraft.ir", "PrimFunc"),
}


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"tilecraft.{name}")
    if name in _LAZY_ATTRS:
        module, attr = _LAZY_ATTRS[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'tilecraft' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_SUBMODULES, *_LAZY_ATTRS])
