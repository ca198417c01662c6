"""`shambench agreement`: how well one annotator does against the others, the ceiling of each partition."""

from __future__ import annotations

import click

from shambench.cli.options import data_selection, emit_json, json_to_stdout, scoring


@click.command("agreement")
@data_selection
@click.option(
    "--out",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Write the JSON here (replaced atomically); `-` is stdout, the table going to stderr.",
)
@scoring
def agreement_command(
    datasets: str | None,
    examples_file: str | None,
    split: str,
    data_dir: str | None,
    limit: int | None,
    out: str | None,
    n_resamples: int,
    seed: int,
) -> None:
    """Human agreement: each annotator scored against the gold the source builds from the other annotators.

    \b
    shambench agreement -d mushroom-multilingual --data-dir ../shared/data
    shambench agreement -d faithbench,favabench,zhou --out agreement.json
    shambench agreement -d mushroom --out - | jq '.partitions'

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
    """
    from shambench.reporting.tables import agreement_table, make_console
    from shambench.runs.agreement import agreement

    console = make_console(stderr=json_to_stdout(out, False))
    report = agreement(
        datasets,
        examples_file=examples_file,
        split=split,
        data_dir=data_dir,
        limit=limit,
        n_resamples=n_resamples,
        seed=seed,
    )
    if not report.partitions:
        from shambench.cli import UserError

        raise UserError(
            f"no annotators released by the partitions selected ({', '.join(report.without_annotators)}): nothing "
            "to score (the sources that release theirs are named in `shambench agreement --help`)"
        )
    console.print(agreement_table(report))
    emit_json(report, out, False, console)
