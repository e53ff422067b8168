"""The ``tilecraft`` command (console script ``tilecraft`` and ``python -m tilecraft``).

Commands: ``compile``, ``explain`` and ``tune`` read a model file (:mod:`.models`); ``run``,
``bench`` and ``inspect`` an exported library; ``db`` works on tuning databases. Exit codes
are in :mod:`.app`. Built on ``click``; tables use ``rich`` when it is installed.
"""

from . import commands_db as commands_db
from . import commands_lib as commands_lib
from . import commands_model as commands_model
from .app import EXIT_ERROR as EXIT_ERROR
from .app import EXIT_OK as EXIT_OK
from .app import EXIT_OTHER_MACHINE as EXIT_OTHER_MACHINE
from .app import EXIT_USAGE as EXIT_USAGE
from .app import cli as cli
from .app import main as main
