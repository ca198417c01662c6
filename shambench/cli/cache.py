"""`shambench cache stats|clear`: inspect or empty the model-response cache."""

from __future__ import annotations

import click


@click.group("cache")
def cache_group() -> None:
    """Inspect or empty the response cache of API-backed detectors.

    Answers of prompted detectors are cached by model, generation parameters and prompt, so re-running an
    evaluation (or resuming one) asks the server only for what it has not answered yet. The cache is one
    SQLite file under $SHAMBENCH_CACHE_DIR (default: the user cache directory).
    """


@cache_group.command("stats")
def stats() -> None:
    """Where the cache is, how big, and how many answers it holds per model."""
    from rich.table import Table

    from shambench.cache import ResponseCache
    from shambench.report import make_console

    cache = ResponseCache()
    try:
        s = cache.stats()
    finally:
        cache.close()
    table = Table(title="response cache", title_justify="left")
    table.add_column("model", overflow="fold")
    table.add_column("answers", justify="right")
    for model, n in s.by_model.items():
        table.add_row(model, str(n))
    table.add_row("total", str(s.entries), style="bold")
    console = make_console()
    # The path on a line of its own, never wrapped (a table title would cut it mid-word), so it can be copied.
    console.print(f"cache: {s.path}", soft_wrap=True)
    console.print(table)
    console.print(f"size on disk: {s.size_bytes / 1e6:.2f} MB")


@cache_group.command("clear")
@click.option("--model", help="Delete only this model's answers.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def clear(model: str | None, yes: bool) -> None:
    """Delete the cached answers (all, or one model's); the next run asks the server again."""
    from shambench.cache import ResponseCache

    what = f"the cached answers of {model}" if model else "every cached answer"
    if not yes:
        click.confirm(f"Delete {what}?", abort=True)
    cache = ResponseCache()
    try:
        n = cache.clear(model)
    finally:
        cache.close()
    click.echo(f"deleted {n} cached answers from {cache.path}")
