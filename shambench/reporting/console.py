"""The terminal: a console that fits pipes and files, styled text, warnings."""

from __future__ import annotations

import os
import sys
from typing import Any

from rich.console import Console
from rich.text import Text

# Wide enough that no table cell (an id, a path) is cut with "…" when output goes to a file or a pipe.
PIPED_WIDTH = 10_000


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
        return Console(stderr=stderr, **literal)
    return Console(stderr=stderr, width=PIPED_WIDTH, **literal)


def styled(*parts: str | tuple[str, str]) -> Text:
    """A line from literal strings, some `(text, style)`: the only way styles enter a printed message."""
    return Text.assemble(*parts)


def warn(console: Console, message: str) -> None:
    """Print `warning: MESSAGE` (the message literally, on one line so that a path can be copied)."""
    console.print(styled(("warning:", "yellow"), " ", message), soft_wrap=True)
