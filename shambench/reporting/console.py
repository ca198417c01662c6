"""The terminal: a console that fits pipes and files, styled text, warnings."""

from __future__ import annotations

import copy
import os
import sys
from dataclasses import fields
from typing import Any

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

# Wide enough that no table cell (an id, a path) is cut with "…" when output goes to a file or a pipe.
PIPED_WIDTH = 10_000


class FittingConsole(Console):
    """A console that never cuts a table: one wider than the terminal is printed as several tables of fewer
    columns, each repeating the columns that name the row (the partition, the run), instead of rich squeezing it
    until names vanish and figures end in "…"."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        if not any(isinstance(o, Table) for o in objects):
            super().print(*objects, **kwargs)
            return
        for obj in objects:
            for part in fitted(obj, self) if isinstance(obj, Table) else [obj]:
                super().print(part, **kwargs)


# A column headed so qualifies the column before it (its figure's interval) and is never split from it.
QUALIFIERS = ("95% CI",)


def _natural_width(table: Table, console: Console) -> int:
    return Measurement.get(console, console.options.update_width(PIPED_WIDTH), table).maximum


def _with_columns(table: Table, indices: list[int], title: bool) -> Table:
    """`table` with only the columns at `indices`, rebuilt through rich's public API (`add_column`, `add_row`)."""
    part = copy.copy(table)
    part.columns, part.rows = [], []
    for i in indices:
        column = table.columns[i]
        part.add_column(**{f.name: getattr(column, f.name) for f in fields(column) if not f.name.startswith("_")})
    cells = [list(table.columns[i].cells) for i in indices]
    for r, row in enumerate(table.rows):
        part.add_row(*(column[r] for column in cells), style=row.style, end_section=row.end_section)
    part.title = table.title if title else None
    part.caption = None
    return part


def fitted(table: Table, console: Console) -> list[Any]:
    """`table` alone when it fits the console's width, else its columns split into tables that fit, each led by
    the columns that name the row, then the caption at the console's width (a table whose naming columns and one
    other group do not fit is left to rich)."""
    # The leading left-aligned columns name the row (partition, run): every part repeats them.
    key = next((i for i, c in enumerate(table.columns) if c.justify != "left"), len(table.columns)) or 1
    if len(table.columns) < key + 2 or _natural_width(table, console) <= console.width:
        return [table]
    groups: list[list[int]] = []
    for i in range(key, len(table.columns)):
        if groups and str(table.columns[i].header) in QUALIFIERS:
            groups[-1].append(i)
        else:
            groups.append([i])
    chunks: list[list[int]] = [groups[0]]
    for group in groups[1:]:
        if _natural_width(_with_columns(table, [*range(key), *chunks[-1], *group], False), console) > console.width:
            chunks.append(group)
        else:
            chunks[-1] += group
    if len(chunks) == 1:
        return [table]
    parts: list[Any] = [_with_columns(table, [*range(key), *chunk], n == 0) for n, chunk in enumerate(chunks)]
    return parts + ([table.caption] if table.caption else [])


def make_console(stderr: bool = False) -> Console:
    """The console every command prints with.

    Strings are printed literally: ids, tasks, questions and error messages come from data, servers and users,
    and `[/x]` or `:smile:` in them must not be read as rich markup or emoji (style goes through `style=` or
    `Text`, see `warn`). When output goes to a file, a pipe or a CI log, lines are as wide as their content
    (rich would assume 80 columns and cut table cells).
    """
    stream = sys.stderr if stderr else sys.stdout
    literal: dict[str, Any] = {"markup": False, "emoji": False}
    # Ask the stream itself: rich counts FORCE_COLOR (set by some libraries) as a terminal and then assumes 80.
    if "COLUMNS" in os.environ or stream.isatty():
        return FittingConsole(stderr=stderr, **literal)
    return FittingConsole(stderr=stderr, width=PIPED_WIDTH, **literal)


def styled(*parts: str | tuple[str, str]) -> Text:
    """A line from literal strings, some `(text, style)`: the only way styles enter a printed message."""
    return Text.assemble(*parts)


def warn(console: Console, message: str) -> None:
    """Print `warning: MESSAGE` (the message literally, on one line so that a path can be copied)."""
    console.print(styled(("warning:", "yellow"), " ", message), soft_wrap=True)
