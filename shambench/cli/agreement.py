"""`shambench agreement`: how well one annotator does against the others, the ceiling of each partition."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from shambench.cli.options import data_selection, emit_json, json_to_stdout, scoring

if TYPE_CHECKING:
    from shambench.runs.spec import Scoring, Selection


@click.command("agreement")
@data_selection
@click.option(
    "--out",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Write the JSON here (replaced atomically); `-` is stdout, the table going to stderr.",
)
@click.option(
    "--run",
    "run_dir",
    type=click.Path(file_okay=False, exists=True),
    help="A run directory: its detector against the annotators' leave-one-out golds, with the alternative annotator "
    "test per annotator (instead of the data selection options).",
)
@scoring
def agreement_command(selection: Selection, out: str | None, run_dir: str | None, scoring: Scoring) -> None:
    """Human agreement: each annotator scored against the gold the source builds from the other annotators.

    \b
    shambench agreement -d mushroom-multilingual --data-dir ../shared/data
    shambench agreement -d faithbench,favabench,zhou --out agreement.json
    shambench agreement -d mushroom --out - | jq '.partitions'
    shambench agreement --run runs/20261129T120000_overlap --alt-epsilon 0.15

    For every item with at least two annotators and every annotator, the annotator's spans are a prediction
    against the gold that the source's own rule builds from the others (Mu-SHROOM: characters marked by more
    than half of them; FaithBench: the union of their Unwanted/Questionable spans; Zhou: both other workers;
    FAVABench: the response's other fitting rows). An item's figure is the mean over its annotators, a
    partition's the mean over its items, with the scorer's tokenizer, sentence splitter and empty-example rule,
    and bootstrap intervals over items; Mu-SHROOM adds the official IoU and Cor.

    The JSON: {"partitions": {PARTITION: {"items", "annotators": {"min", "max"}, "token": {"p", "r", "f1",
    "ci"}, "sentence", "pooled_token", "iou", "cor", "items_by_annotators", "silent_readings",
    "identical_readings", "reproduces_gold", "unplaced", "rule"}}, "without_annotators": [...],
    "conventions": {...}}. Partitions whose source releases no individual annotators get no figure and are
    listed in `without_annotators`.

    With --run, the run's detector instead (its `groups.agreement`, scored again from its journal): per partition
    with annotators, its figures against each leave-one-out gold beside the annotators', and the alternative
    annotator test (Calderon, Reichart and Dror, ACL 2025): for every annotator j with at least 30 items that have
    two or more other annotators, W_f = [S(detector) >= S(j)] and W_h = [S(j) >= S(detector)] on each item (S:
    Mu-SHROOM IoU, else token F1, against the others' gold), a one-sided t-test of mean(W_f - W_h) > -epsilon,
    Benjamini-Yekutieli at q = 0.05 over the annotators; the detector passes when it beats at least half of them
    (omega >= 0.5). The JSON: {"convention", "partitions": {PARTITION: {"items", "detector", "human", "gap",
    "alternative": {"metric", "epsilon", "q", "annotators": [{"annotator", "n", "rho_f", "rho_h", "mean_d", "t",
    "p", "p_adjusted", "rejected"}], "untested", "omega", "passed", "advantage"}}}}.
    """
    from shambench.reporting.tables import agreement_table, make_console
    from shambench.runs.agreement import agreement, run_agreement

    console = make_console(stderr=json_to_stdout(out, False))
    if run_dir is not None:
        if selection.datasets or selection.examples_file or selection.limit is not None:
            from shambench.cli import UserError

            raise UserError("--run scores the run's own examples: leave out --datasets, --examples and --limit")
        from shambench.reporting.tables import alternative_table, like_for_like_table

        group = run_agreement(run_dir, scoring)
        console.print(like_for_like_table(group))
        console.print(alternative_table(group))
        emit_json(group, out, False, console)
        return
    report = agreement(selection, n_resamples=scoring.n_resamples, seed=scoring.seed)
    if not report.partitions:
        from shambench.cli import UserError

        raise UserError(
            f"no annotators released by the partitions selected ({', '.join(report.without_annotators)}): nothing "
            "to score (the sources that release theirs are named in `shambench agreement --help`)"
        )
    console.print(agreement_table(report))
    emit_json(report, out, False, console)
