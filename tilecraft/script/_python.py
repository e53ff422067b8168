"""Python's own parser, made safe to call from several threads at once.

CPython 3.11 keeps the recursion counter of its AST constructor in interpreter-wide state.
When two threads build ASTs at once and the interpreter switches between them (a garbage
collection running a finalizer is enough), the counter of one is overwritten by the other and
``ast.parse`` raises ``SystemError("AST constructor recursion depth mismatch")``. Every
tilecraft caller of the parser goes through :func:`parse_python` (or :func:`source_lines`, since
``inspect`` parses a class's whole file to find it), which hold one lock for the duration of the
parse; the ``warnings`` filter it sets (also process-wide state) is inside the same lock.
"""

from __future__ import annotations

import ast
import inspect
import threading
import warnings
from typing import Any, Literal, overload

_parse_lock = threading.Lock()


@overload
def parse_python(text: str, mode: Literal["exec"] = "exec") -> ast.Module: ...


@overload
def parse_python(text: str, mode: Literal["eval"]) -> ast.Expression: ...


def parse_python(text: str, mode: Literal["exec", "eval"] = "exec") -> ast.Module | ast.Expression:
    """``ast.parse(text, mode=mode)``, serialized across threads, compiler warnings muted.

    The compiler's warnings (an invalid escape sequence in a string, say: a DeprecationWarning
    in Python 3.11, a SyntaxWarning since 3.12) are not errors of the script, so they are not
    shown; ``SyntaxError``, ``ValueError``, ``RecursionError`` and
    ``MemoryError`` propagate as ``ast.parse`` raises them.
    """
    with _parse_lock, warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.11's escape warning
        if mode == "eval":
            return ast.parse(text, mode="eval")
        return ast.parse(text, mode="exec")


def source_lines(obj: Any) -> tuple[list[str], int]:
    """``inspect.getsourcelines(obj)`` under the parser's lock (for a class it parses a file)."""
    with _parse_lock:
        return inspect.getsourcelines(obj)
