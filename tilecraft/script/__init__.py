"""Script form of the IR: a printer and an ``ast``-based parser with an exact round trip.

``func.script()`` / ``mod.show()`` print; :func:`parse` reads the text back; ``T.prim_func``
and ``T.ir_module`` parse decorated Python source. See :mod:`tilecraft.script.printer` for the
conventions of the printed form.
"""

from . import namespace as T  # noqa: N812  (the script namespace is spelled T)
from .parser import parse as parse
from .parser import parse_object as parse_object
from .parser import register_text_parser as register_text_parser
from .printer import register_function_printer as register_function_printer
from .printer import to_script as to_script

__all__ = [
    "T",
    "parse",
    "parse_object",
    "register_function_printer",
    "register_text_parser",
    "to_script",
]
