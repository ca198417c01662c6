"""`shambench show`: one example of a run with its gold and predicted spans highlighted."""

from __future__ import annotations

from pathlib import Path

import click

STYLES = {"both": "bold black on green", "gold": "bold white on red", "pred": "black on yellow"}


def highlighted(text: str, gold, pred):
    """A rich Text of the response: green where gold and prediction agree, red missed, yellow false alarm."""
    from rich.text import Text

    out = Text(text)
    marks = [0] * len(text)
    for bit, spans in ((1, gold), (2, pred)):
        for s in spans:
            for i in range(s.start, s.end):
                marks[i] |= bit
    start = 0
    for i in range(1, len(text) + 1):
        if i == len(text) or marks[i] != marks[start]:
            kind = {1: "gold", 2: "pred", 3: "both"}.get(marks[start])
            if kind:
                out.stylize(STYLES[kind], start, i)
            start = i
    return out


@click.command("show")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
@click.option("--id", "example_id", required=True, help="Example id (see predictions.jsonl).")
@click.option("--context-chars", default=1500, show_default=True, help="Show at most this much of the context.")
def show(run_dir, example_id, context_chars) -> None:
    """Print one example of RUN_DIR with gold and predicted spans highlighted.

    Green: gold and predicted agree. Red: gold span missed. Yellow: predicted but not gold.
    """
    from rich.panel import Panel

    from shambench.io import DataError
    from shambench.report import make_console
    from shambench.runner import JOURNAL, Journal, examples_of, load_config

    run = Path(run_dir)
    examples = {ex.id: ex for ex in examples_of(load_config(run))}
    if example_id not in examples:
        raise DataError(f"{run}: no example with id {example_id!r}")
    ex = examples[example_id]
    pred = Journal(run / JOURNAL).read().get(example_id)
    console = make_console()
    console.print(f"[bold]{ex.id}[/]  {ex.partition}  split={ex.split}")
    if ex.question:
        console.print(Panel(ex.question, title="question", title_align="left"))
    if ex.context:
        ctx = ex.context if len(ex.context) <= context_chars else ex.context[:context_chars] + " [...]"
        console.print(Panel(ctx, title="context", title_align="left"))
    spans = pred.spans if pred and pred.error is None else []
    console.print(Panel(highlighted(ex.response, ex.hallu_spans, spans), title="response", title_align="left"))
    legend = " ".join(f"[{style}] {name} [/]" for name, style in STYLES.items())
    console.print(f"legend: {legend}")
    if pred is None:
        console.print("[yellow]no prediction recorded for this example[/]")
    elif pred.error:
        console.print(f"[red]prediction failed:[/] {pred.error}")
    for key in ("unplaced", "parsed"):
        if pred is not None and pred.meta.get(key):
            console.print(f"{key}: {pred.meta[key]}")
