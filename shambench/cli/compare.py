"""`shambench compare RUN_A RUN_B`: a paired bootstrap of two runs over their shared examples."""

from __future__ import annotations

import click

from shambench.cli.options import scoring


@click.command("compare")
@click.argument("run_a", type=click.Path(file_okay=False, exists=True))
@click.argument("run_b", type=click.Path(file_okay=False, exists=True))
@click.option("--out", type=click.Path(dir_okay=False), help="Also write the comparison as JSON here (atomically).")
@scoring
def compare(run_a: str, run_b: str, out: str | None, n_resamples: int, seed: int) -> None:
    """Compare two runs: F1 of A minus F1 of B, overall and per task, with a 95% interval and a p-value.

    \b
    shambench compare runs/20261129T120000_overlap runs/20261129T121500_random

    Only example ids both runs scored are compared (their examples must be identical). Each task's examples are
    resampled with replacement, with the same draws for both runs (a paired, stratified bootstrap); the overall
    difference is the mean over tasks, as in the results. The p-value is two-sided, from the bootstrap
    distribution shifted to no difference. Needs the runs' data (their configs say where it is).
    """
    from rich import box
    from rich.table import Table

    from shambench.compare import compare_runs
    from shambench.io import write_json
    from shambench.report import make_console

    result = compare_runs(run_a, run_b, n_resamples=n_resamples, seed=seed)
    table = Table(
        title=f"A = {result.run_a}   B = {result.run_b}",
        title_justify="left",
        caption=f"{result.n_shared} shared examples (left out: {result.only_a} only in A, {result.only_b} only in B)"
        f"\n{result.convention}; {result.n_resamples} resamples, seed {result.seed}",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
    )
    for col in ("level", "group", "n", "F1 A", "F1 B", "A - B", "95% CI", "p"):
        table.add_column(col, justify="left" if col in ("level", "group") else "right", no_wrap=True)
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
    console = make_console()
    console.print(table)
    if out:
        write_json(out, result)
        console.print(f"comparison written to {out}")
