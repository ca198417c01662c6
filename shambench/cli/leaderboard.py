"""`shambench leaderboard build|submit|schema`."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import click

import shambench.fs as fs
from shambench.cli.options import F, OutputFolder, data_selection, scoring

if TYPE_CHECKING:
    from shambench.runs.spec import Scoring, Selection


@click.group("leaderboard")
def leaderboard_group() -> None:
    """Build the static leaderboard page, add submissions to it, export its JSON Schemas."""


def _reported_option(func: F) -> F:
    return click.option(
        "--reported",
        type=click.Path(dir_okay=False),
        default=None,
        help="The paper's reported scores (default: the SHAM-Bench paper's figures shipped with shambench).",
    )(click.option("--no-reported", is_flag=True, help="Leave out the rows reported in the paper.")(func))


def _reported_path(reported: str | None, no_reported: bool) -> Path | None:
    from shambench.leaderboard.build import DEFAULT_REPORTED

    if no_reported:
        if reported:
            raise click.UsageError("give --reported FILE or --no-reported, not both")
        return None
    return Path(reported) if reported else DEFAULT_REPORTED


@leaderboard_group.command("build")
@click.option(
    "--runs",
    "run_paths",
    multiple=True,
    required=True,
    metavar="DIR",
    type=click.Path(),
    help="A run directory, or a folder searched recursively for run directories (repeatable).",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=OutputFolder(),
    help="Site folder to write.",
)
@_reported_option
@click.option(
    "--example-pages",
    is_flag=True,
    help="Also write examples/<row>.html per run (every example with gold and predicted spans, 500 a page: "
    "<row>-2.html, ...; needs the data).",
)
def build(
    run_paths: tuple[str, ...], out_dir: str, reported: str | None, no_reported: bool, example_pages: bool
) -> None:
    """Write OUT/leaderboard.json and a self-contained OUT/index.html from scored runs.

    \b
    shambench leaderboard build --runs runs/leaderboard --out leaderboard/site
    shambench leaderboard build --runs runs/a --runs runs/b --out site --reported reported_f1.json

    Every results.json found is one row, scored again from its run's journal and examples: a results.json that
    says otherwise is flagged (a warning, and the row is shown unranked); a run that cannot be read or rescored
    (not a regular file, too large, data missing) is skipped with its reason. The runs of one detector configuration over disjoint data (a
    sweep's cells) are scored together as one row, named by the parameters that tell its rows apart
    (`random rate=0.3`). Only complete runs (test split, no --limit, every example predicted without failure)
    over all of the board's partitions are ranked, by overall span-level F1; reference baselines (none, all,
    random) are shown unranked, incomplete and partial-coverage runs in their own sections. The paper's
    reported scores are added as rows marked "reported in paper", in their own section. Runs of the 14-language
    Mu-SHROOM suite also get OUT/mushroom.html, one tab per language with the official IoU/Cor, beside the
    organisers' reported rows (never ranked with runs). Runs of the extended suite (`eval --suite extended`) are on
    the main board by the paper's partitions only, and also get OUT/extended.html and OUT/extended.json, ranked by
    the extended overall. The page needs no server or network: open index.html in a browser.
    """
    from shambench.leaderboard.build import DISAGREES, write_site
    from shambench.leaderboard.build import build as build_board
    from shambench.leaderboard.example_pages import with_example_pages

    board = build_board(run_paths, _reported_path(reported, no_reported))
    if example_pages:
        board = with_example_pages(board, out_dir)
    json_path, html_path = write_site(board, out_dir)
    standings = Counter(e.standing for e in board.entries)
    counts = ", ".join(f"{standings[s]} {s}" for s in ("ranked", "reference", "partial", "incomplete"))
    click.echo(f"{len(board.entries)} runs ({counts}), {len(board.reported)} reported rows -> {html_path}, {json_path}")
    for entry in board.entries:
        for reason in (r for r in entry.incomplete_because if r.startswith(DISAGREES)):
            click.echo(
                f"warning: {entry.name!r} ({entry.source}): {reason}; shown as its journal scores, not ranked", err=True
            )
    if board.skipped:
        click.echo(f"warning: {len(board.skipped)} run(s) skipped:", err=True)
        for source, reason in board.skipped.items():
            click.echo(f"  {source}: {reason}", err=True)
    from shambench.leaderboard.mushroom import mushroom_runs, write_page

    runs = mushroom_runs(run_paths)
    if runs:
        click.echo(f"Mu-SHROOM per language: {len(runs)} runs -> {write_page(runs, out_dir)}")
    from shambench.leaderboard.extended import extended_runs, write_view

    rows = extended_runs(run_paths)
    if rows:
        click.echo(f"extended suite: {len(rows)} runs -> {write_view(rows, out_dir)}")


@leaderboard_group.command("submit")
@click.argument("predictions", type=click.Path(dir_okay=False))
@click.option("--name", required=True, help="Name of the submitted system, as shown on the leaderboard.")
@click.option(
    "--meta",
    "meta_file",
    type=click.Path(dir_okay=False),
    help="JSON or YAML about the system: family, params, prompt_hash, authors, description, url.",
)
@data_selection
@click.option(
    "--runs-dir",
    default="runs/leaderboard",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where the submission's run directory is added (what `leaderboard build --runs` reads).",
)
@click.option(
    "--site",
    "site_dir",
    type=click.Path(file_okay=False),
    help="Also add the entry to this built site (its leaderboard.json and index.html are rewritten).",
)
@scoring
def submit(
    predictions: str,
    name: str,
    meta_file: str | None,
    runs_dir: str,
    site_dir: str | None,
    scoring: Scoring,
    selection: Selection,
) -> None:
    """Validate a predictions file, score it and add it to the leaderboard as a run.

    \b
    shambench leaderboard submit preds.jsonl --name my-detector --meta about.yaml --data-dir ../shared/data
    shambench leaderboard submit preds.jsonl --name my-detector --examples test.jsonl --site leaderboard/site

    PREDICTIONS is JSONL with one {"id", "spans": [[start, end], ...]} per test example (optional
    sentence_labels, scores). It is rejected, with the list of every problem and nothing written, when a line
    is not JSON or not a prediction, an id is unknown, missing or repeated, or a span runs past its response.
    """
    from shambench.leaderboard.submit import submit as submit_run

    run_dir = submit_run(
        predictions,
        name,
        meta_file=meta_file,
        selection=selection,
        runs_dir=runs_dir,
        site_dir=site_dir,
        n_resamples=scoring.n_resamples,
        seed=scoring.seed,
    )
    from shambench.runs.files import RESULTS
    from shambench.scoring.results import Results

    results = Results.model_validate_json(fs.read_input(run_dir / RESULTS))
    click.echo(f"accepted: {name} -> {run_dir}" + (f" (added to {site_dir})" if site_dir else ""))
    if results.overall:
        o = results.overall
        # A results file may carry no interval (the schema allows None): then none is shown.
        ci = f" (95% CI {o.token.ci[0]:.3f}-{o.token.ci[1]:.3f})" if o.token.ci else ""
        click.echo(
            f"overall span F1 {o.token.f1:.3f}{ci}, "
            f"sentence F1 {o.sentence.f1:.3f}, over {len(o.tasks)} tasks and {results.n_examples} examples"
        )
    for partition, g in results.partitions.items():
        click.echo(f"  {partition}: span F1 {g.token.f1:.3f}, sentence F1 {g.sentence.f1:.3f} (n={g.n})")


@leaderboard_group.command("schema")
@click.option(
    "--out",
    "out_dir",
    type=OutputFolder(),
    help="Folder for results.schema.json and leaderboard.schema.json (default: the leaderboard package).",
)
def schema(out_dir: str | None) -> None:
    """Export the JSON Schemas of results.json and leaderboard.json."""
    from shambench.leaderboard.schema import SCHEMA_DIR, export_schemas

    for path in export_schemas(out_dir or SCHEMA_DIR):
        click.echo(str(path))
