"""MkDocs hook: the command-line reference shows click's unwrapped help paragraphs as blocks, as `--help` does.

A command's help marks a paragraph that must keep its lines (examples, a JSON shape) with a `\\b` line, which click
honours in the terminal. mkdocs-click 0.9 passes the help through as Markdown, so those lines ran together into
one paragraph on the page. This hook replaces its description maker with one that puts each marked paragraph in a
```text block and leaves the other paragraphs as Markdown.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from collections.abc import Iterator

import click
from mkdocs.config.defaults import MkDocsConfig
from mkdocs_click import _docs

# click's no-rewrap marker: a line holding only a backspace character (`\b` in a docstring).
NO_REWRAP = "\b"


def help_markdown(help_text: str) -> list[str]:
    """The Markdown lines of a click help text: each paragraph opened by a `\\b` line as a ```text block of its
    other lines (dedented), every other paragraph as it is."""
    lines: list[str] = []
    for paragraph in re.split(r"\n\s*\n", inspect.cleandoc(help_text)):
        first, _, rest = paragraph.partition("\n")
        if first.strip() == NO_REWRAP:
            lines += ["```text", *textwrap.dedent(rest).splitlines(), "```", ""]
        else:
            lines += [*paragraph.splitlines(), ""]
    return lines


def description(ctx: click.Context, remove_ascii_art: bool = False) -> Iterator[str]:
    """The description lines of a command's page section (mkdocs-click's `_make_description` signature)."""
    help_text = ctx.command.help or ctx.command.short_help
    if help_text:
        yield from help_markdown(help_text)


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Install the description maker before any page is rendered; fail the build if mkdocs-click lost the name."""
    if not hasattr(_docs, "_make_description"):
        raise RuntimeError("mkdocs-click no longer has _make_description: docs/hooks/click_help.py needs updating")
    _docs._make_description = description
    return config
