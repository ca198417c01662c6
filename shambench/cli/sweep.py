"""`shambench sweep`: a grid of detectors × datasets, each cell a run directory, on this machine or a Dask cluster."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import click

from shambench.cli.exits import allow_failures_option
from shambench.cli.options import spec_options

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from shambench.runs.spec import RunSpec
    from shambench.runs.sweep import SweepPlan, SweepReport


@click.command("sweep")
@click.argument("spec_file", metavar="SWEEP.yaml", type=click.Path(dir_okay=False, exists=True))
@click.option(
    "--backend",
    type=click.Choice(["local", "dask"]),
    default="local",
    show_default=True,
    help="local: worker processes on this machine; dask: a Dask distributed cluster.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=lambda: os.cpu_count() or 1,
    show_default="number of CPUs",
    help="Worker processes (local backend, or the local Dask cluster started when --scheduler is not given).",
)
@click.option("--scheduler", metavar="ADDRESS", help="Dask scheduler address, e.g. tcp://10.0.0.5:8786.")
@click.option("--runs", type=click.Path(file_okay=False), help="Folder of the run directories (overrides `runs:`).")
@click.option(
    "--data-dir", type=click.Path(file_okay=False), help="Folder holding the corpora (overrides `data_dir:`)."
)
@click.option("--retries", type=click.IntRange(min=0), help="Extra attempts for a failed task (overrides `retries:`).")
@spec_options(["base_url", "api_key_env"], into="endpoint")
@click.option("--plan", "plan_only", is_flag=True, help="Print the cells and their state; run nothing.")
@click.option("--no-leaderboard", is_flag=True, help="Do not build the leaderboard at the end.")
@click.option("--no-progress", is_flag=True, help="Do not show the progress bar.")
@allow_failures_option
def sweep(
    spec_file: str,
    backend: str,
    workers: int,
    scheduler: str | None,
    runs: str | None,
    data_dir: str | None,
    retries: int | None,
    endpoint: RunSpec,
    plan_only: bool,
    no_leaderboard: bool,
    no_progress: bool,
    allow_failures: bool,
) -> None:
    """Run every detector of SWEEP.yaml on every dataset, one run directory per cell, then build the leaderboard.

    \b
    A sweep file:
      datasets: [ragtruth, mushroom]     # left out: every available dataset (or use `examples: [E.jsonl]`)
      limit: 100                         # optional, as in `shambench eval`
      runs: runs/baselines               # default: runs/<file name> beside the sweep file
      detectors:
        - overlap
        - detector: random
          params: {seed: 0}
          grid: {rate: [0.1, 0.3]}       # one cell per value
        - detector: lettucedetect
          shard_size: 64                 # local models: split each cell over many workers

    \b
    shambench sweep sweep.yaml --workers 2
    shambench sweep sweep.yaml --backend dask --scheduler tcp://10.0.0.5:8786

    Each cell is an ordinary run directory (config.json, predictions.jsonl, results.json) under
    RUNS/<dataset>/<detector_params>. Cells already complete are skipped and interrupted ones resume, so a stopped
    sweep is continued by running the same command again. Only this process writes files: workers compute and
    send back. A task that fails (or whose worker dies) is sent again up to --retries times; cells that still
    fail are listed and recorded in RUNS/sweep.json.

    A sweep file never routes the API key: it may not set base_url or api_key_env. --base-url and --api-key-env
    (else the preset's, else $OPENAI_BASE_URL and OPENAI_API_KEY) go to every detector that takes them.
    A grid of more than 10,000 cells is refused.

    Exit status: 0 when every cell and every prediction succeeded; 3 when cells or predictions failed (a summary
    is printed; --allow-failures makes this 0); 2 for usage or input errors, including a parameter a detector
    refuses (its cell is not retried).
    """
    from shambench.cli import UserError
    from shambench.cli.exits import continued_by, finish, print_failures
    from shambench.cli.progress import SweepProgress
    from shambench.leaderboard.build import runs_site
    from shambench.reporting.console import make_console, styled
    from shambench.runs.sweep import make_backend, plan_sweep, run_sweep

    console = make_console()
    given = endpoint.model_dump(include=endpoint.model_fields_set)
    plan = plan_sweep(spec_file, runs=runs, data_dir=data_dir, retries=retries, endpoint=given)
    if plan_only:
        print_plan(plan, console)
        return
    plan.spec.leaderboard = plan.spec.leaderboard and not no_leaderboard
    resume = "each cell keeps its journal: run the same command again to skip complete cells and resume the rest"
    with (
        continued_by(resume),
        make_backend(backend, workers, scheduler) as engine,
        SweepProgress(plan, not no_progress) as bar,
    ):
        report = run_sweep(plan, engine, bar, bar.predictions, bar.cell, board=runs_site)
    console.print(report_table(report))
    console.print(f"sweep summary: {plan.runs / 'sweep.json'}")
    if report.leaderboard:
        console.print(f"leaderboard: {report.leaderboard}")
    if report.leaderboard_error:
        console.print(styled(("leaderboard not built", "yellow"), f": {report.leaderboard_error}"))
    failures = sweep_failures(report)
    refused = [c for c in report.failed if c.usage_error]
    if refused:
        print_failures(console, failures, what="cells")
        raise UserError(
            f"{len(refused)} cells cannot run as given (a parameter their detector refuses, examples that cannot be "
            "used, or a folder that cannot be written: see above): fix the sweep file, its examples or the folder"
        )
    print_failures(console, failures, what="cells", retry="retry them: run the same command again")
    finish(len(failures), allow_failures)


def sweep_failures(report: SweepReport) -> list[tuple[str, str]]:
    """`(cell, reason)` for each cell that failed or holds failed predictions."""
    out = [(c.cell, c.error or "failed") for c in report.failed]
    out += [
        (c.cell, f"failed predictions: {c.failed_predictions} (rescored as empty)")
        for c in report.cells
        if c.status != "failed" and c.failed_predictions
    ]
    return out


# Plans up to this many cells are printed as a table; longer ones as plain lines (a table of 10,000 rows takes
# rich longer to lay out than planning does).
PLAN_TABLE_ROWS = 500


def print_plan(plan: SweepPlan, console: Console) -> None:
    """The plan's cells and their state: a table, or one tab-separated line per cell for a long plan."""
    if len(plan.cells) <= PLAN_TABLE_ROWS:
        console.print(plan_table(plan))
        return
    console.print(f"{len(plan.cells)} cells in {plan.runs} (cell, detector, params, state)", soft_wrap=True)
    for cell in plan.cells:
        click.echo(f"{cell.name}\t{cell.detector}\t{_params(cell.params)}\t{plan.state_of(cell)}")


def plan_table(plan: SweepPlan) -> Table:
    """The cells of a plan and their state on disk."""
    from rich import box
    from rich.table import Table

    table = Table(title=f"{len(plan.cells)} cells in {plan.runs}", title_justify="left", box=box.SIMPLE_HEAD)
    for col in ("cell", "detector", "params", "state"):
        table.add_column(col, overflow="fold")
    for cell in plan.cells:
        table.add_row(cell.name, cell.detector, _params(cell.params), plan.state_of(cell))
    return table


def report_table(report: SweepReport) -> Table:
    """One row per cell: its status, predictions made now, overall token F1, and the error of a failed cell."""
    from rich import box
    from rich.table import Table

    table = Table(title="sweep", title_justify="left", box=box.SIMPLE_HEAD)
    for col in ("cell", "status", "predicted", "span F1", "error"):
        table.add_column(col, justify="right" if col in ("predicted", "span F1") else "left", overflow="fold")
    styles = {"done": "green", "skipped": "dim", "failed": "red"}
    for c in report.cells:
        f1 = f"{c.token_f1:.3f}" if c.token_f1 is not None else ""
        table.add_row(c.cell, c.status, str(c.predicted), f1, c.error or "", style=styles[c.status])
    return table


def _params(params: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(params.items()))
