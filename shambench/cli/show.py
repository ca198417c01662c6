"""`shambench show`: examples of a run with their gold and predicted spans highlighted."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

import shambench.fs as fs
from shambench.reporting.highlight import PER_PAGE

if TYPE_CHECKING:
    from rich.text import Text

    from shambench.schema import Example, Prediction, Span

STYLES = {"both": "bold black on green", "gold": "bold white on red", "pred": "black on yellow"}


def highlighted(text: str, gold: Sequence[Span], pred: Sequence[Span]) -> Text:
    """A rich Text of the response: green where gold and prediction agree, red missed, yellow false alarm."""
    from rich.text import Text

    from shambench.reporting.highlight import segments

    out = Text()
    for part, kind in segments(text, gold, pred):
        out.append(part, style=STYLES[kind] if kind else "")
    return out


@click.command("show")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
@click.option("--id", "example_id", help="Example id (see predictions.jsonl); required unless --html is given.")
@click.option("--html", "html_out", type=click.Path(dir_okay=False), help="Write a page of the examples here instead.")
@click.option(
    "--partition",
    "partitions",
    multiple=True,
    metavar="TASK/DATASET",
    help="With --html: only the examples of this partition (repeatable), for a smaller page.",
)
@click.option("--context-chars", default=1500, show_default=True, help="Show at most this much of the context.")
@click.option(
    "--sort",
    type=click.Choice(["run", "f1", "-f1"]),
    default="run",
    show_default=True,
    help="With --html: the run's order, span F1 ascending (worst first) or descending.",
)
@click.option("--max-f1", type=float, help="With --html: only examples whose span F1 is at most this.")
@click.option(
    "--per-page",
    type=click.IntRange(min=1),
    default=PER_PAGE,
    show_default=True,
    help="With --html: examples per page; more go to FILE-2.html, FILE-3.html, ..., each page linking the others.",
)
def show(
    run_dir: str,
    example_id: str | None,
    html_out: str | None,
    partitions: tuple[str, ...],
    context_chars: int,
    sort: str,
    max_f1: float | None,
    per_page: int,
) -> None:
    """Print one example of RUN_DIR with gold and predicted spans highlighted, or write them all as a page.

    \b
    shambench show runs/RUN --id ragtruth/12345
    shambench show runs/RUN --html examples.html       every example, 500 a page, each at PAGE#<id>
    shambench show runs/RUN --html worst.html --sort f1 --max-f1 0.5 --partition summ/ragtruth

    Each page shows the run's overall score and what it holds, each example's scores, and filters its examples by
    id, partition and span F1 in the browser; a context is loaded when it is opened, and examples off screen are
    not laid out.

    The page gives each example's span and sentence scores (from the run's per_example.jsonl). In a terminal,
    green: gold and predicted agree, red: gold span missed, yellow: predicted but not gold. In a file or a pipe
    the spans are marked [[gold, missed]], {{predicted, not gold}} and [[{{both}}]].
    """
    from shambench.errors import DataError
    from shambench.io import Journal
    from shambench.reporting.naming import run_name
    from shambench.runs.files import JOURNAL
    from shambench.runs.rundir import load_config, run_examples
    from shambench.runs.scoring import example_scores

    run = Path(run_dir)
    config = load_config(run)
    examples = {ex.id: ex for ex in run_examples(config)}
    predictions = Journal(run / JOURNAL).read()
    if example_id is not None and example_id not in examples:
        raise DataError(f"{run}: no example with id {example_id!r}{id_suggestion(example_id, examples)}")
    if html_out:
        from shambench.io import write_atomic
        from shambench.reporting.highlight import paginated

        scores = example_scores(run)
        chosen = [examples[example_id]] if example_id else list(examples.values())
        if partitions:
            unknown = sorted(set(partitions) - {ex.partition for ex in chosen})
            if unknown:
                known = ", ".join(sorted({ex.partition for ex in examples.values()}))
                raise DataError(f"{run}: no partition {', '.join(unknown)} in this run (it has {known})")
            chosen = [ex for ex in chosen if ex.partition in partitions]
        chosen = _selected(chosen, scores, sort, max_f1)
        name = run_name(config) or run.name
        title = name if run.name == name else f"{name}: {run.name}"
        summary = page_summary(run, len(chosen), len(examples), partitions, max_f1, sort)
        out = Path(html_out)
        pages = paginated(title, chosen, predictions, scores, out.name, per_page, summary)
        for name, page in pages.items():
            write_atomic(out.with_name(name), page)
        more = f" ({len(pages)} pages: {', '.join(pages)})" if len(pages) > 1 else ""
        click.echo(f"{len(chosen)} examples -> {html_out}{more}")
        return
    if example_id is None:
        raise click.UsageError("give --id ID (or --html FILE for every example)")
    _print_example(examples[example_id], predictions.get(example_id), context_chars)


def page_summary(
    run: Path, shown: int, total: int, partitions: Sequence[str], max_f1: float | None, sort: str
) -> list[str]:
    """The lines above a page's examples: the run and its overall score, and what the page holds of it."""
    from shambench.runs.files import RESULTS
    from shambench.scoring.results import Results

    lines = [f"run {run}"]
    if (run / RESULTS).is_file():
        results = Results.model_validate_json(fs.read_input(run / RESULTS))
        if results.overall is not None:
            o = results.overall
            lines.append(
                f"overall span F1 {o.token.f1:.3f} over {len(o.tasks)} task(s), sentence F1 {o.sentence.f1:.3f}; "
                f"{results.n_examples} examples scored"
            )
    kept = [f"partition {', '.join(partitions)}"] if partitions else []
    kept += [f"span F1 at most {max_f1:g}"] if max_f1 is not None else []
    kept += [f"sorted by {'ascending' if sort == 'f1' else 'descending'} span F1"] if sort != "run" else []
    lines.append(f"{shown} of the run's {total} examples" + (f" ({'; '.join(kept)})" if kept else ""))
    return lines


def _selected(examples: list, scores: dict, sort: str, max_f1: float | None) -> list:
    """The examples of the page: filtered by span F1, sorted as asked (ties in the run's order)."""
    chosen = list(examples)
    if max_f1 is not None:
        chosen = [ex for ex in chosen if scores[ex.id].token.f1 <= max_f1]
    if sort != "run":
        chosen.sort(key=lambda ex: scores[ex.id].token.f1, reverse=sort == "-f1")
    return chosen


def _print_example(ex: Example, pred: Prediction | None, context_chars: int) -> None:
    from rich.panel import Panel

    from shambench.reporting.console import make_console, styled
    from shambench.reporting.highlight import LEGEND, PLAIN_MARKS, plain_marked, usable_spans

    console = make_console()
    ctx = ex.context if len(ex.context) <= context_chars else ex.context[:context_chars] + " [...]"
    spans = usable_spans(pred)
    console.print(styled((ex.id, "bold"), f"  {ex.partition}  split={ex.split}"), soft_wrap=True)
    if console.is_terminal:
        for title, text in (("question", ex.question), ("context", ctx)):
            if text:
                console.print(Panel(text, title=title, title_align="left"))
        console.print(Panel(highlighted(ex.response, ex.hallu_spans, spans), title="response", title_align="left"))
        legend = [part for k, v in LEGEND.items() for part in ((f" {v} ", STYLES[k]), " ")]
        console.print(styled("legend: ", *legend))
    else:
        # No colours in a file or a pipe: the spans are marked with brackets instead.
        for title, text in (("question", ex.question), ("context", ctx)):
            if text:
                console.print(f"{title}:\n{text}\n", soft_wrap=True)
        marks = "  ".join(f"{open_}{LEGEND[k]}{close}" for k, (open_, close) in PLAIN_MARKS.items())
        console.print(f"response ({marks}):\n{plain_marked(ex.response, ex.hallu_spans, spans)}\n", soft_wrap=True)
    if pred is None:
        console.print("no prediction recorded for this example", style="yellow")
    elif pred.error:
        console.print(styled(("prediction failed:", "red"), f" {pred.error}"), soft_wrap=True)
    for key in ("unplaced", "parsed"):
        if pred is not None and pred.meta.get(key):
            console.print(f"{key}: {pred.meta[key]}", soft_wrap=True)


def id_suggestion(wanted: str, ids: Iterable[str]) -> str:
    """`; did you mean ...?` naming the ids whose last part is `wanted` (ids carry their source: `ragtruth/24`,
    `mushroom/tst-en-24`), those that are only `wanted` after their source first, else the closest spellings;
    empty when nothing is close."""
    import re

    from shambench.registry import did_you_mean

    known = list(ids)
    whole = [i for i in known if i.split("/", 1)[-1] == wanted]
    tails = whole + [i for i in known if re.split(r"[/-]", i)[-1] == wanted and i not in whole]
    if tails:
        more = f" (or {len(tails) - 3} more ending in {wanted!r})" if len(tails) > 3 else ""
        return f"; did you mean {' or '.join(repr(i) for i in tails[:3])}?{more}"
    return did_you_mean(wanted, known, cutoff=0.6)
