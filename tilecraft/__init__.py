"""tilecraft: a tensor-program compiler.

The loop/block IR (:mod:`tilecraft.ir`) with its script form (:mod:`tilecraft.script`),
arithmetic analysis (:mod:`tilecraft.arith`), computations (:mod:`tilecraft.te`,
:mod:`tilecraft.topi`), schedules (:mod:`tilecraft.schedule`), lowering, code generation and a
runtime. Subpackages are imported on first use, so ``import tilecraft`` stays cheap.

Diagnostics go through the standard :mod:`logging` module under the ``"tilecraft"`` logger
(``logging.getLogger("tilecraft")``); the library never prints. Without any logging
configuration Python shows its warnings on stderr; configure the logger to silence or keep
them.
"""

from __future__ import annotations

import importlib as _importlib
import pkgutil as _pkgutil
from typing import TYPE_CHECKING
from typing import Any as _Any

from . import errors as errors
from . import ir as ir
from .target import Target as Target

if TYPE_CHECKING:  # what the lazy attributes are, for type checkers and IDEs
    from . import arith as arith
    from . import cli as cli
    from . import codegen as codegen
    from . import config as config
    from . import dispatch as dispatch
    from . import driver as driver
    from . import frontend as frontend
    from . import graph as graph
    from . import lower as lower
    from . import rules as rules
    from . import runtime as runtime
    from . import schedule as schedule
    from . import script as script
    from . import target as target
    from . import te as te
    from . import testing as testing
    from . import topi as topi
    from . import tune as tune
    from .driver import build as build
    from .driver import compile as compile
    from .ir import IRModule as IRModule
    from .ir import PrimFunc as PrimFunc
    from .schedule import Schedule as Schedule

__version__ = "0.1.0"

_SUBMODULES = frozenset(
    info.name for info in _pkgutil.iter_modules(__path__) if not info.name.startswith("_")
)
"""The subpackages and modules that exist (``rules``, ``tune``... appear once they do)."""

# name -> (module, attribute) re-exported lazily at the top level
_LAZY_ATTRS = {
    "Schedule": ("tilecraft.schedule", "Schedule"),
    "build": ("tilecraft.driver", "build"),
    "compile": ("tilecraft.driver", "compile"),
    "IRModule": ("tilecraft.ir", "IRModule"),
    "PrimFunc": ("tilecraft.ir", "PrimFunc"),
}


def __getattr__(name: str) -> _Any:
    if name in _SUBMODULES:
        return _importlib.import_module(f"tilecraft.{name}")
    if name in _LAZY_ATTRS:
        module, attr = _LAZY_ATTRS[name]
        return getattr(_importlib.import_module(module), attr)
    raise AttributeError(f"module 'tilecraft' has no attribute {name!r}")


def __dir__() -> list[str]:
    public = {n for n in globals() if not n.startswith("_") and n not in _NOT_PUBLIC}
    return sorted({*public, "__version__", *_SUBMODULES, *_LAZY_ATTRS})


_NOT_PUBLIC = frozenset({"TYPE_CHECKING", "annotations"})
