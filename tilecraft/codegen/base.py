"""Shared pieces of the source emitters: unique C identifiers and an indenting line buffer."""

from __future__ import annotations

import re

C_KEYWORDS = frozenset(
    ("auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
     "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
     "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
     "union", "unsigned", "void", "volatile", "while", "bool", "true", "false", "main", "NULL",
     "INFINITY", "NAN", "_Bool", "_Complex", "_Imaginary")
)  # fmt: skip


class NameTable:
    """Give IR objects (vars, buffers) distinct, valid C identifiers derived from their names.

    Parameters
    ----------
    reserved
        Identifiers that must not be handed out (function names, helper prefixes are always
        avoided).
    """

    def __init__(self, reserved: tuple[str, ...] = ()) -> None:
        self._by_id: dict[int, str] = {}
        self._used: set[str] = set(reserved)
        self._keep: list[object] = []  # keep objects alive so their ids stay unique

    def get(self, obj: object, hint: str) -> str:
        """The identifier of ``obj``, creating it from ``hint`` on first use."""
        name = self._by_id.get(id(obj))
        if name is not None:
            return name
        base = re.sub(r"\W", "_", hint) or "v"
        if base[0].isdigit():
            base = "v_" + base
        if base in C_KEYWORDS or base.startswith("tc_") or base.startswith("__"):
            base = "v_" + base
        name, k = base, 1
        while name in self._used:
            name = f"{base}_{k}"
            k += 1
        self._used.add(name)
        self._by_id[id(obj)] = name
        self._keep.append(obj)
        return name

    def lookup(self, obj: object) -> str | None:
        """The identifier of ``obj`` if it has one."""
        return self._by_id.get(id(obj))


class LineBuffer:
    """Collect lines of source text with an indentation level."""

    def __init__(self, indent: str = "  ") -> None:
        self.lines: list[str] = []
        self.level = 0
        self.indent = indent

    def emit(self, text: str) -> None:
        """Add one line at the current indentation."""
        self.lines.append(self.indent * self.level + text if text else "")

    def text(self) -> str:
        """All lines joined, ending with a newline."""
        return "\n".join(self.lines) + "\n"
