"""The tilecraft error hierarchy.

Every error tilecraft raises on purpose derives from :class:`TilecraftError`, so callers can
catch the whole family with one clause and still tell the layers apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum


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


class GraphError(TilecraftError):
    """An ill-typed graph: a call whose arguments do not fit its operator, or a bad input.

    Raised by the graph layer (:mod:`tilecraft.graph`) and by the runtime's graph executor
    for arguments that do not fit a graph function, so it lives below both.
    """


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


class EmulationError(TilecraftError):
    """An emulated GPU program did what no GPU can run (``tc.build(..., emulate=True)``).

    Threads of a block that do not all reach the same barrier, a warp shuffle reading a lane
    that did not execute it, a collective whose mask excludes a lane that executes it. The
    emulator stops the launch; the process and the library stay usable.

    Parameters
    ----------
    message
        What happened, naming the function, kernel, block and threads.
    kernel
        The kernel symbol (``main_kernel0``).
    block
        ``blockIdx`` (x, y, z) of the block where it happened.
    threads
        ``threadIdx`` (x, y, z) of the threads involved (one or two).
    """

    def __init__(
        self,
        message: str,
        *,
        kernel: str = "",
        block: tuple[int, int, int] = (0, 0, 0),
        threads: Sequence[tuple[int, int, int]] = (),
    ) -> None:
        self.kernel = kernel
        self.block = block
        self.threads = tuple(threads)
        super().__init__(message)


class RaceKind(Enum):
    """What ``tc.build(..., emulate="racecheck")`` found."""

    CONFLICT = "conflict"
    """Two threads of a block touched one shared address in one barrier interval, one wrote."""
    UNINITIALIZED = "uninitialized read"
    """A thread read shared or local memory nothing had written."""
    OUT_OF_BOUNDS = "out of bounds"
    """An access outside its buffer (it was skipped)."""


class RaceCheckError(EmulationError):
    """The race checker of the GPU emulator found a :class:`RaceKind` violation.

    Parameters
    ----------
    message
        The report: function, kernel, buffer, index, threads, block and barrier phase.
    kind
        What was found.
    buffer
        The buffer accessed.
    index
        The flat element index of the access.
    phase
        The barrier interval of the block (0 before its first barrier, 1 after it, ...).
    kernel, block, threads
        As for :class:`EmulationError`; a conflict names the two threads.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: RaceKind,
        buffer: str,
        index: int,
        phase: int,
        kernel: str = "",
        block: tuple[int, int, int] = (0, 0, 0),
        threads: Sequence[tuple[int, int, int]] = (),
    ) -> None:
        self.kind = kind
        self.buffer = buffer
        self.index = index
        self.phase = phase
        super().__init__(message, kernel=kernel, block=block, threads=threads)


class TuneError(TilecraftError):
    """Tuning could not proceed."""


class DatabaseError(TilecraftError):
    """A tuning database is malformed or could not be read or written."""


__all__ = [
    "BuildError",
    "CodegenError",
    "DatabaseError",
    "EmulationError",
    "IRError",
    "LowerError",
    "RaceCheckError",
    "RaceKind",
    "ScheduleError",
    "ScriptParseError",
    "TilecraftError",
    "TuneError",
]
