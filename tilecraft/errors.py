"""The tilecraft error hierarchy.

Every error tilecraft raises on purpose derives from :class:`TilecraftError`, so callers can
catch the whole family with one clause and still tell the layers apart.
"""

from __future__ import annotations

from collections.abc import Sequence


class TilecraftError(Exception):
    """Base class of every error tilecraft raises deliberately."""


class IRError(TilecraftError):
    """Malformed IR: a node was built with inconsistent fields."""


class ScriptParseError(TilecraftError):
    """Script text could not be parsed into IR.

    Parameters
    ----------
    message
        What was wrong and what was expected.
    line, column
        1-based position of the offending construct (0 when unknown).
    source_line
        The text of the offending line, shown under the message.
    """

    def __init__(self, message: str, line: int = 0, column: int = 0, source_line: str = "") -> None:
        self.message = message
        self.line = line
        self.column = column
        self.source_line = source_line
        text = f"line {line}, column {column}: {message}" if line else message
        if source_line:
            caret = " " * max(column - 1, 0) + "^"
            text = f"{text}\n    {source_line}\n    {caret}"
        super().__init__(text)


class ScheduleError(TilecraftError):
    """A schedule primitive's requirement was broken; the schedule is unchanged.

    Parameters
    ----------
    primitive
        Name of the primitive that failed (``"split"``).
    short
        One-line summary.
    requires
        The broken requirement, in words.
    fragment
        The offending IR fragment (script text), possibly with markers.
    hint
        The next action a user may take.
    locations
        Names of the blocks/loops involved.
    """

    def __init__(
        self,
        primitive: str,
        short: str,
        *,
        requires: str = "",
        fragment: str = "",
        hint: str = "",
        locations: Sequence[str] = (),
    ) -> None:
        self.primitive = primitive
        self.short = short
        self.requires = requires
        self.fragment = fragment
        self.hint = hint
        self.locations = tuple(locations)
        lines = [f"{primitive}: {short}"]
        if requires:
            lines.append(f"  Requires: {requires}")
        if fragment:
            body = "\n".join("        " + ln for ln in fragment.splitlines())
            lines.append("  In:\n" + body)
        if hint:
            lines.append(f"  Hint: {hint}")
        super().__init__("\n".join(lines))


class LowerError(TilecraftError):
    """A lowering pass met IR it cannot lower."""


class CodegenError(TilecraftError):
    """Source generation met IR it cannot emit."""


class BuildError(TilecraftError):
    """Compiling generated source failed.

    Parameters
    ----------
    message
        What failed.
    command
        The compiler command line that was run.
    stderr
        The compiler's diagnostics.
    """

    def __init__(self, message: str, command: Sequence[str] = (), stderr: str = "") -> None:
        self.command = list(command)
        self.stderr = stderr
        text = message
        if command:
            text += "\n  command: " + " ".join(command)
        if stderr:
            text += "\n  stderr:\n" + stderr
        super().__init__(text)


class TuneError(TilecraftError):
    """Tuning could not proceed."""


class DatabaseError(TilecraftError):
    """A tuning database is malformed or could not be read or written."""


__all__ = [
    "BuildError",
    "CodegenError",
    "DatabaseError",
    "IRError",
    "LowerError",
    "ScheduleError",
    "ScriptParseError",
    "TilecraftError",
    "TuneError",
]
