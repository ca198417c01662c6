"""`shambench analyze`: span recovery, boundary errors, false alarms and rate calibration of runs."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

import shambench.fs as fs
from shambench.cli.exits import allow_failures_option
from shambench.cli.options import OutputFolder, base_url_option, parse_params

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from shambench.reporting.analysis import RunAnalysis
    from shambench.reporting.judge import Judge
    from shambench.runs.rundir import RunConfig
    from shambench.schema import Example, Prediction
    from shambench.scoring.results import Results
    from shambench.scoring.typed import Recall, TypeScores


def _default_out() -> str:
    """--out's default: RUN_DIR/analysis for one run, ./analysis for several. A default of an `OutputFolder` option
    is converted as a folder given is: refused when it holds someone else's files, marked once written."""
    runs: tuple[str, ...] = click.get_current_context().params.get("run_dirs") or ()  # read first: it was given
    return os.path.join(runs[0], "analysis") if len(runs) == 1 else "analysis"


def _load_run(run_dir: Path) -> tuple[RunConfig, list[Example], dict[str, Any], Results]:
    """Examples, predictions and results of a run directory (scored now if it has no results yet)."""
    from shambench.errors import DataError
    from shambench.io import Journal
    from shambench.runs.files import JOURNAL, RESULTS
    from shambench.runs.rundir import load_config, run_examples
    from shambench.runs.scoring import run_results
    from shambench.scoring.results import Results

    config = load_config(run_dir)
    examples = run_examples(config)
    predictions = Journal(run_dir / JOURNAL).read()
    path = run_dir / RESULTS
    try:
        results = Results.model_validate_json(fs.read_input(path)) if path.exists() else None
    except ValueError as err:
        raise DataError(f"{path}: not a results file ({err})") from None
    return config, examples, predictions, results or run_results(run_dir, examples)


@click.command("analyze")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False, exists=True))
@click.option(
    "--out",
    type=OutputFolder(),
    default=_default_out,
    help="Output folder (default: RUN_DIR/analysis, or ./analysis for several runs).",
)
@click.option("--no-figures", is_flag=True, help="Write analysis.json only.")
@click.option(
    "--categorise", is_flag=True, help="Ask an LLM judge why each missed gold span was missed (five categories)."
)
@click.option("--judge", "judge_preset", default="gpt5mini", show_default=True, help="Prompted preset of the judge.")
@click.option("--model", help="Judge model (overrides the preset).")
@base_url_option
@click.option("--api-key-env", metavar="VAR", help="Environment variable holding the judge's API key.")
@click.option("--max-concurrency", type=click.IntRange(min=1), help="Judge requests in flight at once.")
@click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE", help="Judge parameter (repeatable).")
@allow_failures_option
def analyze(
    run_dirs: tuple[str, ...],
    out: str,
    no_figures: bool,
    categorise: bool,
    judge_preset: str,
    params: tuple[str, ...],
    allow_failures: bool,
    **endpoint: Any,
) -> None:
    """Explain a run's errors: which gold spans were found, how far boundaries are off, false alarms,
    and predicted against gold hallucination rates. Several RUN_DIRS are analysed side by side.

    With --categorise, every missed gold span goes to an LLM judge (a prompted preset, with its cache and
    retries) that names one of: labelling_error, overgeneralisation, unsupported_detail, misattribution,
    subjective_language. Verdicts are journaled in judgements.jsonl, so a re-run judges only what is missing.
    When some spans could not be judged, a summary is printed and the exit status is 3 (0 with --allow-failures).

    \b
    Writes analysis.json (definitions included) and PNG figures:
      rates_<run>.png    per-dataset histograms of per-example hallucinated-token rates, gold vs predicted
      f1_tasks.png       per-task span F1 with 95% bootstrap intervals, one bar per run
      pr_scatter.png     precision against recall per task and run
    """
    from shambench.cli.exits import finish, print_failures
    from shambench.extras import import_extra
    from shambench.io import write_json
    from shambench.reporting import figures
    from shambench.reporting.analysis import analyse
    from shambench.reporting.console import make_console
    from shambench.reporting.naming import run_name

    if not no_figures:  # before any run is read: the figures' library is an extra
        import_extra("matplotlib", "figures", "shambench analyze's figures (--no-figures writes analysis.json alone)")
    console = make_console()
    paths = [Path(d) for d in run_dirs]
    out_dir = Path(out)
    out_given = click.get_current_context().get_parameter_source("out") != click.core.ParameterSource.DEFAULT
    # Every write is confined to the output folder's parent, the default one in a run to the run's parent: the
    # run directory named is then reached by name, never followed (a link planted in a shared runs folder).
    root = fs.folder_root(out_dir if out_given or len(paths) > 1 else paths[0])
    judge = None
    if categorise:
        from shambench.reporting.judge import Judge

        given = {k: v for k, v in endpoint.items() if v is not None}
        judge = Judge(judge_preset, **given, **parse_params(params))
        judge.endpoint.api_key()  # no key for the judge: one line now, before any run is read or span shown
    analyses, scored, failed = [], [], []
    for run_dir in paths:
        config, examples, predictions, results = _load_run(run_dir)
        analysis = analyse(examples, predictions, str(run_dir), run_name(config) or "")
        analysis.types = results.groups.types
        if judge is not None:
            analysis.categories, unjudged = _categories(
                judge, examples, predictions, out_dir, run_dir, len(paths), console, root
            )
            failed += unjudged
        analyses.append(analysis)
        scored.append((run_name(config), results))
    scored = list(zip(figures.run_labels([d for d, _ in scored], paths), [r for _, r in scored]))
    write_json(out_dir / "analysis.json", {"runs": [a.model_dump(mode="json") for a in analyses]}, root)
    if not no_figures:
        for i, a in enumerate(analyses):
            figures.rate_histograms(a, out_dir / f"rates_{i}_{Path(a.run_dir).name}.png", root)
        figures.f1_bars(scored, out_dir / "f1_tasks.png", root=root)
        figures.pr_scatter(scored, out_dir / "pr_scatter.png", root)
    console.print(analysis_table(analyses, [label for label, _ in scored]))
    if any(a.types for a in analyses):
        console.print(types_table(analyses, [label for label, _ in scored]))
    written = "analysis.json (with the definitions)" + ("" if no_figures else " and the figures")
    # the absolute folder: the default for several runs is ./analysis, which a bare "analysis" does not place
    default = "" if out_given else " (the default folder; --out DIR writes elsewhere)"
    console.print(f"{written} written to {out_dir.resolve()}{default}", soft_wrap=True)
    print_failures(console, failed, what="judgements", retry="retry them: run the same command again")
    finish(len(failed), allow_failures)


def _categories(
    judge: Judge,
    examples: Sequence[Example],
    predictions: dict[str, Prediction],
    out_dir: Path,
    run_dir: Path,
    n_runs: int,
    console: Console,
    root: Path,
) -> tuple[dict[str, dict[str, int]], list[tuple[str, str]]]:
    """Judge a run's missed gold spans (journaled under the output folder, its writes confined to `root`) and
    print the tally; the tally and `(span key, reason)` of the spans that could not be judged."""
    from shambench.cli.exits import continued_by
    from shambench.cli.progress import ProgressMonitor
    from shambench.io import Journal
    from shambench.reporting.analysis import missed_spans
    from shambench.reporting.judge import JUDGEMENTS, Judgement, categorise, span_key

    missed = missed_spans(examples, predictions)
    folder = out_dir / run_dir.name if n_runs > 1 else out_dir
    kept = f"the judgements made are kept in {folder / JUDGEMENTS}: run the same command again to judge the rest"
    with continued_by(kept), ProgressMonitor(len(missed), f"judging {run_dir.name}") as monitor:
        tally = categorise(judge, missed, folder, monitor, root)
    for part, counts in tally.items():
        console.print(f"{run_dir.name} {part}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    judged = Journal(folder / JUDGEMENTS, Judgement).read()
    keys = [span_key(ex, span) for ex, span in missed]
    return tally, [(k, rec.error) for k in keys if (rec := judged.get(k)) is not None and rec.error]


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


# The columns in a few words; `definitions` in analysis.json has them in full.
ANALYSIS_CAPTION = (
    "gold: gold spans; recovered: share of them that a predicted span overlaps; over/under: share of the recovered "
    "ones where the prediction runs long / stops short, and the mean size in tokens where > 0; false alarms: share "
    "of predicted spans overlapping no gold span; F1 no-gold / all-hallu: mean span F1 over the examples with no "
    "gold span / with every token gold; rate: mean per-example hallucinated-token rate, gold / predicted"
)


def _recall(recall: Recall) -> str:
    ci = "" if recall.ci is None else f" [{recall.ci[0]:.3f}-{recall.ci[1]:.3f}]"
    return f"{recall.recall:.3f}{ci}"


def _type_rows(analyses: Sequence[RunAnalysis], labels: Sequence[str]) -> list[tuple[str, str, str, TypeScores]]:
    """(source, type, run label, figures) of every type of every typed source, the runs side by side."""
    found = {
        (source, t, k): scores
        for k, a in enumerate(analyses)
        for source, ds in (a.types.datasets.items() if a.types else ())
        for t, scores in ds.types.items()
    }
    return [(source, t, labels[k], found[source, t, k]) for source, t, k in sorted(found)]


def types_table(analyses: Sequence[RunAnalysis], labels: Sequence[str]) -> Table:
    """One row per source, gold error type and run: the type's gold, the share of it found (characters and
    tokens, with their intervals) and, for runs whose spans carry types, the type-aware F1s."""
    from rich import box
    from rich.table import Table

    table = Table(title="Recall per error type", title_justify="left", caption_justify="left", box=box.SIMPLE_HEAD)
    for col in ("source", "type", "run", "gold chars", "char recall [95% CI]", "gold tokens", "token recall [95% CI]",
                "typed F1 char / tok"):  # fmt: skip
        left = col in ("source", "type", "run")
        table.add_column(col, justify="left" if left else "right", no_wrap=not left)
    for source, t, label, s in _type_rows(analyses, labels):
        typed = (
            "-" if s.typed_char is None or s.typed_token is None else f"{s.typed_char.f1:.3f} / {s.typed_token.f1:.3f}"
        )
        table.add_row(source, t, label, str(s.gold_chars), _recall(s.char_recall), str(s.gold_tokens),
                      _recall(s.token_recall), typed)  # fmt: skip
    table.caption = TYPES_CAPTION
    return table


# The figures in a few words; `groups.types.convention` of results.json has them in full.
TYPES_CAPTION = (
    "gold: the type's gold characters (whitespace left out) and tokens; recall: the share of them the run's spans "
    "cover, pooled over the source's examples, with a 95% bootstrap interval over examples; typed F1: the run's "
    "spans labelled with the type against the type's gold (only when its spans carry types)"
)


def analysis_table(analyses: Sequence[RunAnalysis], labels: Sequence[str]) -> Table:
    """One row per partition and run (named by `labels`, which tell apart two runs of one detector): recovery,
    boundaries, false alarms, edge-case F1, rates."""
    from rich import box
    from rich.table import Table

    table = Table(title="Span analysis (tokens)", title_justify="left", caption_justify="left", box=box.SIMPLE_HEAD)
    for col in (
        "partition",
        "run",
        "gold",
        "recovered",
        "over (tok)",
        "under (tok)",
        "false alarms",
        "F1 no-gold",
        "F1 all-hallu",
        "rate gold/pred",
    ):
        left = col in ("partition", "run")
        table.add_column(
            col, justify="left" if left else "right", overflow="fold" if left else "ellipsis", no_wrap=not left
        )
    for name in sorted({k for a in analyses for k in a.datasets}):
        for a, label in zip(analyses, labels):
            g = a.datasets.get(name)
            if g is None:
                continue
            b = g.boundary
            table.add_row(
                name,
                label,
                str(g.n_gold_spans),
                _pct(g.recovered_share),
                "-" if b is None else f"{_pct(b.over_share)} / {_num(b.over_mean)}",
                "-" if b is None else f"{_pct(b.under_share)} / {_num(b.under_mean)}",
                _pct(g.false_alarm_share),
                "-" if g.f1_no_gold is None else f"{g.f1_no_gold:.3f} (n={g.n_no_gold})",
                "-" if g.f1_all_hallucinated is None else f"{g.f1_all_hallucinated:.3f} (n={g.n_all_hallucinated})",
                f"{g.gold_rate_mean:.2f} / {g.pred_rate_mean:.2f}",
            )
    table.caption = ANALYSIS_CAPTION
    return table
