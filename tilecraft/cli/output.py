"""How the command prints: JSON for scripts, tables for people, progress on stderr.

Data goes to stdout (a table, or one JSON document with ``--json``); progress and warnings
go to stderr, so ``tilecraft ... --json | jq`` always reads one document. Tables use ``rich``
when it is installed and plain aligned columns otherwise.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import click


def emit_json(data: object) -> None:
    """Print ``data`` as one JSON document on stdout."""
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def _rich_console() -> Any | None:
    """A rich console writing to stdout, or None when rich is not installed."""
    try:
        console = importlib.import_module("rich.console")
    except ImportError:
        return None
    return console.Console(file=sys.stdout, soft_wrap=True)  # the stream click is writing to


def plain_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """``rows`` under ``headers`` as aligned plain-text columns."""
    cells = [[str(h) for h in headers], *([str(c) for c in row] for row in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def print_table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], title: str | None = None
) -> None:
    """Print a table on stdout (with rich when installed, else plain columns)."""
    console = _rich_console()
    if console is None:
        if title:
            click.echo(title)
        click.echo(plain_table(headers, rows))
        return
    table_mod = importlib.import_module("rich.table")
    table = table_mod.Table(title=title, title_justify="left")
    for h in headers:
        table.add_column(str(h))
    for row in rows:
        table.add_row(*(str(c) for c in row))
    console.print(table)


class Progress:
    """Numbered steps on stderr (``[2/4] build ...  0.8 s``); silent with ``quiet``."""

    def __init__(self, total: int, quiet: bool = False) -> None:
        self.total = total
        self.quiet = quiet
        self.done = 0

    @contextmanager
    def step(self, what: str, live: bool = False) -> Iterator[None]:
        """Announce ``what``, run the block, then say how long it took. ``live``: the block
        prints lines of its own on stderr, so the announcement ends its line."""
        self.done += 1
        head = f"[{self.done}/{self.total}]"
        if not self.quiet:
            click.echo(f"{head} {what} ...", err=True, nl=live)
        start = time.perf_counter()
        try:
            yield
        except BaseException:
            if not self.quiet:
                click.echo(f"{head} failed" if live else " failed", err=True)
            raise
        if not self.quiet:
            secs = f"{time.perf_counter() - start:.1f} s"
            click.echo(f"{head} done in {secs}" if live else f" {secs}", err=True)


def seconds_text(secs: float | None) -> str:
    """Seconds as a short human text in ms or us (``-`` for None)."""
    if secs is None:
        return "-"
    if secs >= 1e-3:
        return f"{secs * 1e3:.3f} ms"
    return f"{secs * 1e6:.1f} us"
