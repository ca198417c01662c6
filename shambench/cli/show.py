"""`shambench show`: examples of a run with their gold and predicted spans highlighted."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from rich.text import Text

    from shambench.schema import Example, Prediction, Span

STYLES = {"both": "bold black on green", "gold": "bold white on red", "pred": "black on yellow"}


def highlighted(text: str, gold: Sequence[Span], pred: Sequence[Span]) -> Text:
    """A rich Text of the response: green where gold and prediction agree, red missed, yellow false alarm."""
    from rich.text import Text

    from shambench.highlight import segments

    out = Text()
    for part, kind in segments(text, gold, pred):
        out.append(part, style=STYLES[kind] if kind else "")
    return out


@click.command("show")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
@click.option("--id", "example_id", help="Example id (see predictions.jsonl); required unless --html is given.")
@click.option("--html", "html_out", type=click.Path(dir_okay=False), help="Write a page of the examples here instead.")
@click.option("--context-chars", default=1500, show_default=True, help="Show at most this much of the context.")
def show(run_dir: str, example_id: str | None, html_out: str | None, context_chars: int) -> None:
    """Print one example of RUN_DIR with gold and predicted spans highlighted, or write them all as a page.

    \b
    shambench show runs/RUN --id ragtruth/12345
    shambench show runs/RUN --html examples.html       every example, each at examples.html#<id>

    Green: gold and predicted agree. Red: gold span missed. Yellow: predicted but not gold.
    """
    from shambench.io import DataError
    from shambench.runner import JOURNAL, Journal, examples_of, load_config

    run = Path(run_dir)
    config = load_config(run)
    examples = {ex.id: ex for ex in examples_of(config)}
    predictions = Journal(run / JOURNAL).read()
    if example_id is not None and example_id not in examples:
        raise DataError(f"{run}: no example with id {example_id!r}")
    if html_out:
        from shambench.highlight import examples_page
        from shambench.io import write_atomic

        chosen = [examples[example_id]] if example_id else list(examples.values())
        write_atomic(html_out, examples_page(f"{config.detector}: {run.name}", chosen, predictions))
        click.echo(f"{len(chosen)} examples -> {html_out}")
        return
    if example_id is None:
        raise click.UsageError("give --id ID (or --html FILE for every example)")
    _print_example(examples[example_id], predictions.get(example_id), context_chars)


def _print_example(ex: Example, pred: Prediction | None, context_chars: int) -> None:
    from rich.panel import Panel

    from shambench.highlight import LEGEND, usable_spans
    from shambench.report import make_console

    console = make_console()
    console.print(f"[bold]{ex.id}[/]  {ex.partition}  split={ex.split}")
    if ex.question:
        console.print(Panel(ex.question, title="question", title_align="left"))
    if ex.context:
        ctx = ex.context if len(ex.context) <= context_chars else ex.context[:context_chars] + " [...]"
        console.print(Panel(ctx, title="context", title_align="left"))
    response = highlighted(ex.response, ex.hallu_spans, usable_spans(pred))
    console.print(Panel(response, title="response", title_align="left"))
    console.print("legend: " + " ".join(f"[{STYLES[k]}] {v} [/]" for k, v in LEGEND.items()))
    if pred is None:
        console.print("[yellow]no prediction recorded for this example[/]")
    elif pred.error:
        console.print(f"[red]prediction failed:[/] {pred.error}")
    for key in ("unplaced", "parsed"):
        if pred is not None and pred.meta.get(key):
            console.print(f"{key}: {pred.meta[key]}")
