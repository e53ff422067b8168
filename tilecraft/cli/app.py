"""The ``tilecraft`` command group, its exit codes and its error handling.

Exit codes (scripts may rely on them):

====  ===================================================================================
0     success
1     a tilecraft error: a refused input or model, a failed build, a tuning or database
      error (one line on stderr, ``error: ...``; no traceback unless ``--traceback``)
2     a usage error: unknown option, missing argument, malformed ``--input``
3     refused: the library was built for another machine (another CPU architecture, ISA
      features this machine lacks, a GPU arch this GPU cannot run)
====  ===================================================================================
"""

from __future__ import annotations

import importlib
import logging
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

import click

from .. import __version__
from ..errors import TilecraftError

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_OTHER_MACHINE = 3


class CommandError(click.ClickException):
    """A tilecraft error shown as one line on stderr, with its exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click declares it on the class

    def show(self, file: Any = None) -> None:
        """Print ``error: <message>`` on stderr."""
        click.echo(f"error: {self.format_message()}", err=True)


class OtherMachineError(TilecraftError):
    """A library refused because it was built for another machine (exit code 3)."""


def _one_line(text: str) -> str:
    """The first line of a message, with a hint that more follows when it does."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) <= 1:
        return text.strip()
    return f"{lines[0]} (rerun with --traceback for the full message)"


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    click.echo(f"warning: {message}", err=True)


@contextmanager
def _handled(traceback: bool) -> Iterator[None]:
    """Turn tilecraft errors into one-line :class:`CommandError` s; warnings into one line."""
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            yield
        except OtherMachineError as e:
            if traceback:
                raise
            raise CommandError(_one_line(str(e)), EXIT_OTHER_MACHINE) from None
        except TilecraftError as e:
            if traceback:
                raise
            raise CommandError(_one_line(str(e)), EXIT_ERROR) from None


COMMANDS = {
    "bench": (
        "commands_lib",
        "Time a graph function of the exported LIBRARY (inputs not given are random).",
    ),
    "compile": ("commands_model", "Compile MODEL (.py, .pt2 or .onnx) to one exported library."),
    "db": ("commands_db", "List, show, merge, prune and export tuning databases."),
    "explain": (
        "commands_model",
        "Per kernel of MODEL: the rule that takes it and why each earlier rule declined.",
    ),
    "inspect": (
        "commands_lib",
        "What the exported LIBRARY holds: manifest, target, functions, kernels and who "
        "scheduled each (no code is loaded).",
    ),
    "run": ("commands_lib", "Run a graph function of the exported LIBRARY on .npy inputs."),
    "tune": ("commands_model", "Tune the kernels of MODEL, recording into WORK_DIR's database."),
}
"""Command -> (module of :mod:`tilecraft.cli` defining it, its line in ``tilecraft --help``).

A command's module (and the compiler layers it uses) is imported only when the command runs
or shows its own help, so ``tilecraft --help`` imports none of them."""


class TilecraftGroup(click.Group):
    """A group whose commands report tilecraft errors as one line and an exit code, and whose
    commands are imported on first use (:data:`COMMANDS`)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command, loaded or not."""
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command ``cmd_name``, importing its module first when needed."""
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            importlib.import_module(f"{__package__}.{COMMANDS[cmd_name][0]}")
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help``, from :data:`COMMANDS` (nothing imported)."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for name in names:
            if name in COMMANDS:
                text = _short_help(COMMANDS[name][1], limit)
            else:
                cmd = self.commands[name]
                text = cmd.get_short_help_str(limit)
            rows.append((name, text))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the chosen command under the error handling of the command line."""
        traceback = bool(ctx.params.get("traceback"))
        with _handled(traceback):
            return super().invoke(ctx)


@click.group(cls=TilecraftGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, message="tilecraft %(version)s")
@click.option("--traceback", is_flag=True, help="Show the Python traceback of a tilecraft error.")
@click.option("-v", "--verbose", is_flag=True, help="Log tilecraft's INFO messages on stderr.")
def cli(traceback: bool, verbose: bool) -> None:
    """tilecraft: compile, tune, run and inspect tensor programs.

    \b
    Exit codes: 0 success; 1 a tilecraft error (refused input, failed build,
    tuning or database error); 2 usage error; 3 refused: the library was built
    for another machine.
    """
    if verbose:
        log = logging.getLogger("tilecraft")
        if not log.handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
            log.addHandler(handler)
        log.setLevel(logging.INFO)


def main() -> None:
    """The console script's entry point (``tilecraft`` and ``python -m tilecraft``)."""
    cli(prog_name="tilecraft")


def _short_help(doc: str, limit: int) -> str:
    """The first line of ``doc``, cut at a word to at most ``limit`` characters."""
    words = (doc.strip().splitlines() or [""])[0].split()
    text = ""
    for word in words:
        if len(text) + len(word) + 1 > max(limit, 10):
            return text + "..."
        text = f"{text} {word}" if text else word
    return text
