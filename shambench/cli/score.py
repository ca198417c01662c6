"""`shambench score`: score predictions against examples, or rescore a run directory."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from shambench.cli.options import (
    data_selection,
    emit_json,
    given_options,
    json_outputs,
    json_to_stdout,
    scoring,
)
from shambench.errors import ScoringError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from shambench.data.formats import PredictionsFormat
    from shambench.runs.spec import Scoring, Selection
    from shambench.scoring.results import ExampleScores, Results


@click.command("score")
@click.argument("run_dir", required=False, type=click.Path(file_okay=False, exists=True))
@data_selection
@click.option(
    "--predictions",
    type=click.Path(dir_okay=False),
    help='PRED JSONL: one {"id", "spans": [[start, end], ...]} per line (optional sentence_labels, scores).',
)
@click.option(
    "--predictions-format",
    metavar="NAME",
    help="Read PRED in a released format (see `shambench list formats`), e.g. `mushroom` for a Mu-SHROOM "
    "submission file as sent to the organisers; default: the format its first line's keys name, else `shambench`.",
)
@click.option(
    "--exact-floats",
    is_flag=True,
    help="Read a released format's numbers correctly rounded, not as its own scorer read them (a Mu-SHROOM "
    "submission's probabilities are otherwise read as pandas.read_json read them for the official leaderboard).",
)
@json_outputs
@click.option(
    "--per-example",
    "per_example_out",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Write each example's scores here as JSON lines (id, task, dataset, status, token/sentence P/R/F1, "
    "IoU/Cor); `-` is stdout (the table then goes to stderr).",
)
@click.option(
    "--accept-changed-data",
    is_flag=True,
    help="Rescore RUN_DIR even when its examples changed since the run was made (soft labels, annotators, "
    "labels, meta...): said loudly, recorded in results.json (run.data_changed), and never ranked on a board. "
    "Without it such a rescore stops with exit status 2 and names what changed.",
)
@scoring
def score(
    run_dir: str | None,
    selection: Selection,
    predictions: str | None,
    predictions_format: str | None,
    exact_floats: bool,
    out: str | None,
    as_json: bool,
    per_example_out: str | None,
    accept_changed_data: bool,
    scoring: Scoring,
) -> None:
    """Score predictions, or rescore RUN_DIR from its journal (never calls the detector).

    \b
    shambench score --examples EXAMPLES.jsonl --predictions PRED.jsonl --out results.json
    shambench score --datasets ragtruth,mushroom --predictions PRED.jsonl --per-example scores.jsonl
    shambench score runs/20261129T120000_overlap --json

    \b
    A PRED line is one JSON object with these keys (nothing else):
      id               the example id (required)
      spans            predicted ranges [[start, end], ...] (integer character offsets, end exclusive)
      scores           scored ranges [[start, end], ...] or [{"start", "end", "score"}] for AUPRC/AUROC
      sentence_labels  one 0/1 per sentence unit, instead of projecting spans
      soft_spans       [{"start", "end", "prob"}]: Mu-SHROOM soft labels, used by Cor in the order given
      error            why the detector gave no prediction (scored as empty, counted as failed)
      meta             anything else, kept and not scored
    (also step_scores, step_verdicts, first_error and raw for step-level detectors).

    \b
    A file in a released format is read as its authors' scorer read it, and only the datasets
    its ids name are scored (of its source, when no data is selected). A Mu-SHROOM submission
    file, unchanged (one per language):
      shambench score --predictions mushroom.en-tst.v1.jsonl --data-dir ../shared/data
    Its ids tst-<lang>-N (val-<lang>-N: --split validation) name the mushroom-<lang> examples;
    hard_labels are derived from soft_labels when absent; other keys are ignored; empty ranges
    ([-1, -1]) and soft ranges without prob are skipped and counted (run.skipped_ranges in the
    results); probabilities are read as pandas.read_json read them for the official leaderboard
    (conventions.mushroom_probabilities; --exact-floats reads them correctly rounded).

    Examples without a prediction are scored as predicting nothing and counted as missing. A malformed line, an
    unknown key, a non-integer offset, a NaN score, an unknown or repeated id or a span past the end of its
    response is one error naming the file and line (exit status 2; nothing is written).
    RUN_DIR rescoring also rewrites RUN_DIR/per_example.jsonl.
    """
    from shambench.data.benchmark import split_names
    from shambench.data.formats import format_of
    from shambench.io import model_line, write_jsonl
    from shambench.memory import collector_paused
    from shambench.reporting.console import make_console
    from shambench.reporting.tables import print_results
    from shambench.runs.files import PER_EXAMPLE
    from shambench.runs.scoring import run_results_and_scores, scorer_of

    if per_example_out == "-" and json_to_stdout(out, as_json):
        raise click.UsageError("--per-example - and the results JSON cannot both go to stdout")
    # The process reads one corpus, scores it, writes the results and exits, and nothing it makes forms a reference
    # cycle: the cyclic collector would only walk the corpus's many objects (the annotators' readings) again and
    # again, about 0.25 s of a cold 6k score, and once more when restarted at the end but for `aged`.
    with collector_paused(aged=True):
        console = make_console(stderr=json_to_stdout(out, as_json) or per_example_out == "-")
        if run_dir:
            if predictions:
                raise click.UsageError("give either RUN_DIR or --predictions, not both")
            given = given_options(click.get_current_context(), *selection.model_fields_set)
            if given:
                raise click.UsageError(
                    f"RUN_DIR is rescored on the examples of its config.json; drop {', '.join(given)}"
                )
            from shambench.runs.rundir import changed_data_message, changed_parts, load_config, run_examples

            config = load_config(Path(run_dir))
            examples = run_examples(config, accept_changed=accept_changed_data)
            changed = changed_parts(config, examples) if accept_changed_data else None
            if changed is not None:
                make_console(stderr=True).print(f"CHANGED DATA: {changed_data_message(changed)}", style="bold red")
            results, per_example = run_results_and_scores(
                Path(run_dir), examples, scoring, scorer=scorer_of(examples, scoring), data_changed=changed
            )
            where = f"{Path(run_dir) / 'results.json'}, {Path(run_dir) / PER_EXAMPLE}"
            console.print(f"rescored {run_dir} -> {where}", soft_wrap=True)
        else:
            if not predictions:
                raise click.UsageError("give RUN_DIR, or --predictions with --examples or --datasets")
            fmt = format_of(predictions, predictions_format)
            if fmt is None and exact_floats:
                raise click.UsageError("--exact-floats applies to a released format (shambench's own is read exactly)")
            if fmt is not None and not (selection.datasets or selection.examples_file):
                selection = selection.model_copy(update={"datasets": split_names(fmt.source)})
            if fmt is None:
                results, per_example = _score_pred_file(predictions, selection, scoring)
            else:
                results, per_example = _score_released(predictions, fmt, exact_floats, selection, scoring)
                for reason, count in results.run.skipped_ranges.items():
                    console.print(f"note: {count} ranges skipped: {reason}", soft_wrap=True)
        # Named for what was scored, as eval names its table: a run by its detector, a file by its name.
        if run_dir:
            # Imported only here: the model presets it reads (and their YAML) are a third of a predictions file's
            # imports beyond the scorer's.
            from shambench.reporting.naming import run_name

            scored = run_name(results.run) or Path(run_dir).name
        else:
            scored = Path(str(predictions)).name
        print_results(results, console, title=f"{scored} on {results.n_examples} examples")
        if per_example_out == "-":
            click.echo("".join(model_line(row) for row in per_example), nl=False)
        elif per_example_out:
            write_jsonl(per_example_out, per_example)
            console.print(f"per-example scores written to {per_example_out}", soft_wrap=True)
        emit_json(results, out, as_json, console)


def _score_pred_file(
    predictions: str, selection: Selection, scoring: Scoring
) -> tuple[Results, Sequence[ExampleScores]]:
    """Results of a file of shambench's own PRED lines. Both files are read as the scorer consumes them: neither is
    ever held whole."""
    from shambench.records import iter_records, line_of_id
    from shambench.runs.scoring import scorer_of
    from shambench.runs.selection import corpus_to_score
    from shambench.schema import Prediction
    from shambench.scoring.results import RunInfo
    from shambench.scoring.scorer import UNSCORED_PREDICTION_FIELDS

    scorer = scorer_of(corpus_to_score(selection), scoring)
    lines = iter_records(predictions, Prediction, UNSCORED_PREDICTION_FIELDS)
    try:
        results, per_example = scorer.score_with_examples(p for _, p in lines)
    except ScoringError as err:
        line = line_of_id(predictions, err.prediction_id)
        raise ScoringError(f"{predictions}{f':{line}' if line else ''}: {err}") from None
    results.run = RunInfo.model_validate(
        {"origin": "predictions", "predictions_file": str(Path(predictions).resolve())}
    )
    return results, per_example


def _score_released(
    predictions: str, fmt: PredictionsFormat, exact_floats: bool, selection: Selection, scoring: Scoring
) -> tuple[Results, Sequence[ExampleScores]]:
    """Results of a file in a released format, on the examples of the datasets its ids name; how it was read joins
    the results' conventions, and the ranges it skipped are counted in `run.skipped_ranges`."""
    from shambench.runs.scoring import scorer_of
    from shambench.runs.selection import corpus_to_score
    from shambench.scoring.results import RunInfo

    read = fmt.read(Path(predictions), exact_floats)
    scorer = scorer_of(corpus_to_score(selection, kept_datasets=read.datasets), scoring)
    line_of = {pred.id: lineno for lineno, pred in read.predictions}
    try:
        results, per_example = scorer.score_with_examples(pred for _, pred in read.predictions)
    except ScoringError as err:
        line = line_of.get(err.prediction_id or "")
        raise ScoringError(f"{predictions}{f':{line}' if line else ''}: {err}") from None
    results.conventions.update(read.conventions)
    results.run = RunInfo.model_validate(
        {
            "origin": "predictions",
            "predictions_file": str(Path(predictions).resolve()),
            "predictions_format": fmt.name,
            "skipped_ranges": read.skipped,
        }
    )
    return results, per_example
