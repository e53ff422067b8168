"""The ``tilecraft`` command (console script ``tilecraft`` and ``python -m tilecraft``).

Commands: ``compile``, ``explain`` and ``tune`` read a model file (:mod:`.models`); ``run``,
``bench`` and ``inspect`` an exported library; ``db`` works on tuning databases. Exit codes
are in :mod:`.app`. Built on ``click``; tables use ``rich`` when it is installed. The command
modules (and the compiler layers they use) load when a command runs, so ``tilecraft --help``
stays fast.
"""

import importlib as _importlib
from typing import TYPE_CHECKING
from typing import Any as _Any

from .app import EXIT_ERROR as EXIT_ERROR
from .app import EXIT_OK as EXIT_OK
from .app import EXIT_OTHER_MACHINE as EXIT_OTHER_MACHINE
from .app import EXIT_USAGE as EXIT_USAGE
from .app import cli as cli
from .app import main as main

if TYPE_CHECKING:
    from . import commands_db as commands_db
    from . import commands_lib as commands_lib
    from . import commands_model as commands_model

_COMMAND_MODULES = frozenset({"commands_db", "commands_lib", "commands_model"})


def __getattr__(name: str) -> _Any:
    if name in _COMMAND_MODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
