"""`shambench compare RUN_A RUN_B`: a paired bootstrap of two runs over their shared examples."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from shambench.cli.options import emit_json, json_outputs, json_to_stdout, scoring

if TYPE_CHECKING:
    from shambench.runs.spec import Scoring


@click.command("compare")
@click.argument("run_a", type=click.Path(file_okay=False, exists=True))
@click.argument("run_b", type=click.Path(file_okay=False, exists=True))
@click.option(
    "--missing-as-empty",
    is_flag=True,
    help="Also compare shared ids a run has no successful prediction for, scored as predicting nothing.",
)
@json_outputs
@scoring
def compare(
    run_a: str,
    run_b: str,
    missing_as_empty: bool,
    out: str | None,
    as_json: bool,
    scoring: Scoring,
) -> None:
    """Compare two runs: F1 of A minus F1 of B, overall and per task, with a 95% interval and a p-value.

    \b
    shambench compare runs/20261129T120000_overlap runs/20261129T121500_random
    shambench compare RUN_A RUN_B --json > comparison.json

    Only example ids both runs have are compared (their examples must be identical), and of those only the ones
    both runs predicted successfully: a missing or failed prediction is left out, with a warning saying how many
    (--missing-as-empty scores them as predicting nothing instead, as results.json does). How many ids each run
    predicted, failed and missed is printed. Each task's examples are resampled with replacement, with the same
    draws for both runs (a paired, stratified bootstrap); the overall difference is the mean over tasks, as in
    the results. The p-value is two-sided, from the bootstrap distribution shifted to no difference. Needs the
    runs' data (their configs say where it is).

    Then the two runs' ranks under every convention a board reports (span F1 per example as the paper, over the
    hallucinated examples only, pooled token and character F1, sentence F1, and Mu-SHROOM IoU and Cor where
    there are soft labels), each run's 95% rank interval over the same paired resamples, and whether their order
    holds (every convention and at least 95% of the resamples keep it), is convention-dependent (a convention
    reverses or ties it) or is not resolved; in the JSON under `ranks`.
    """
    from rich import box
    from rich.table import Table

    from shambench.reporting.compare import compare_runs
    from shambench.reporting.console import make_console, warn
    from shambench.reporting.tables import ranks_table

    console = make_console(stderr=json_to_stdout(out, as_json))
    result = compare_runs(
        run_a, run_b, n_resamples=scoring.n_resamples, seed=scoring.seed, missing_as_empty=missing_as_empty
    )
    compared = "every shared id (missing/failed scored as empty)" if missing_as_empty else "ids both predicted"
    table = Table(
        title=f"A = {result.run_a}   B = {result.run_b}",
        title_justify="left",
        caption=f"{result.n_shared} examples compared: {compared} (left out: {result.only_a} only in A, "
        f"{result.only_b} only in B, {result.unpredicted} without a successful prediction in A or B)"
        f"\n{result.convention}; {result.n_resamples} resamples, seed {result.seed}",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
    )
    for col in ("level", "group", "n", "F1 A", "F1 B", "A - B", "95% CI", "p"):
        left = col in ("level", "group")
        table.add_column(col, justify="left" if left else "right", overflow="fold" if left else "ellipsis")
    for d in result.differences:
        table.add_row(
            d.level,
            d.group,
            str(d.n),
            f"{d.f1_a:.3f}",
            f"{d.f1_b:.3f}",
            f"{d.diff:+.3f}",
            f"{d.ci[0]:+.3f} to {d.ci[1]:+.3f}",
            f"{d.p_value:.4f}",
            style="bold" if d.group == "overall" else None,
        )
    for label, name, c in (("A", result.run_a, result.counts_a), ("B", result.run_b, result.counts_b)):
        if c is None:  # compare_runs always counts; only a comparison of bare predictions has no counts
            continue
        console.print(
            f"run {label} ({name}): {c.predicted} predicted, {c.failed} failed, {c.missing} missing", soft_wrap=True
        )
    if result.unpredicted:
        warn(
            console,
            f"{result.unpredicted} shared example(s) left out: a run has no successful prediction for them "
            "(--missing-as-empty compares them, scored as empty)",
        )
    console.print(table)
    if result.ranks is not None:
        console.print(ranks_table(result.ranks))
    emit_json(result, out, as_json, console)
