"""`shambench score`: score predictions against examples, or rescore a run directory."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from shambench.cli.options import data_selection, given_options, scoring

if TYPE_CHECKING:
    from rich.console import Console


@click.command("score")
@click.argument("run_dir", required=False, type=click.Path(file_okay=False, exists=True))
@data_selection
@click.option(
    "--predictions",
    type=click.Path(dir_okay=False),
    help='PRED JSONL: one {"id", "spans": [[start, end], ...]} per line (optional sentence_labels, scores).',
)
@click.option("--out", type=click.Path(dir_okay=False), help="Write the results JSON here (atomically).")
@scoring
def score(
    run_dir: str | None,
    datasets: str | None,
    examples_file: str | None,
    split: str,
    data_dir: str | None,
    limit: int | None,
    predictions: str | None,
    out: str | None,
    n_resamples: int,
    seed: int,
) -> None:
    """Score predictions, or rescore RUN_DIR from its journal (never calls the detector).

    \b
    shambench score --examples EXAMPLES.jsonl --predictions PRED.jsonl --out results.json
    shambench score --datasets ragtruth,mushroom --predictions PRED.jsonl
    shambench score runs/20261129T120000_overlap

    Examples without a prediction are scored as predicting nothing and counted as missing; a prediction for an
    unknown id, a span past the end of its response or a malformed line is an error naming the file and line.
    """
    from shambench.io import read_models, write_json
    from shambench.report import make_console, print_results
    from shambench.results import RunInfo
    from shambench.runner import score_run, select_examples
    from shambench.schema import Prediction
    from shambench.scorer import Scorer, ScoringError

    console = make_console()
    if run_dir:
        if predictions:
            raise click.UsageError("give either RUN_DIR or --predictions, not both")
        selection = given_options(
            click.get_current_context(), "datasets", "examples_file", "split", "data_dir", "limit"
        )
        if selection:
            raise click.UsageError(
                f"RUN_DIR is rescored on the examples of its config.json; drop {', '.join(selection)}"
            )
        results = score_run(Path(run_dir), n_resamples=n_resamples, seed=seed)
        console.print(f"rescored {run_dir} -> {Path(run_dir) / 'results.json'}", soft_wrap=True)
    else:
        if not predictions:
            raise click.UsageError("give RUN_DIR, or --predictions with --examples or --datasets")
        examples, _ = select_examples(datasets, examples_file, split, data_dir, limit, _warn(console))
        preds = read_models(predictions, Prediction)
        try:
            results = Scorer(examples, n_resamples=n_resamples, seed=seed).score(preds)
        except ScoringError as err:
            raise ScoringError(f"{_where(predictions, err.prediction_id)}: {err}") from None
        results.run = RunInfo.model_validate(
            {"origin": "predictions", "predictions_file": str(Path(predictions).resolve())}
        )
    print_results(results, console)
    if out:
        write_json(out, results)
        console.print(f"results written to {out}", soft_wrap=True)


def _warn(console: Console) -> Callable[[str, str], None]:
    def warn(name: str, message: str) -> None:
        console.print(f"[yellow]warning:[/] dataset {name} not loaded: {message}")

    return warn


def _where(path: str, prediction_id: str | None) -> str:
    """`PATH:LINE` of the last line holding `prediction_id` (the second of two, when it is duplicated), else PATH."""
    from shambench.io import iter_jsonl

    lines = [lineno for lineno, obj in iter_jsonl(path) if prediction_id is not None and obj.get("id") == prediction_id]
    return f"{path}:{lines[-1]}" if lines else str(path)
