"""`shambench eval`: run a detector over examples, journal its predictions, score them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from shambench.cli.options import data_selection, given_options, parse_params, scoring
from shambench.steps import SUITES

# Endpoint options of API-backed detectors; passed to the detector factory only when given.
ENDPOINT_OPTIONS = ("model", "base_url", "api_key_env", "max_concurrency", "timeout")
# What a resumed run takes from its config.json; giving any of these with --resume is an error, not ignored.
FIXED_ON_RESUME = (
    "detector_spec",
    "datasets",
    "examples_file",
    "split",
    "data_dir",
    "limit",
    "context",
    "context_params",
    "run_dir",
    "runs_root",
)


@click.command("eval")
@click.option(
    "--detector",
    "detector_spec",
    metavar="NAME",
    help="Detector name, or NAME:ARG (see `shambench list detectors`).",
)
@click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE", help="Detector parameter (repeatable).")
@click.option("--model", help="Model name, for API-backed detectors.")
@click.option("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1.")
@click.option("--api-key-env", metavar="VAR", help="Environment variable holding the API key (default OPENAI_API_KEY).")
@click.option("--max-concurrency", type=click.IntRange(min=1), help="Requests in flight at once.")
@click.option("--timeout", type=click.FloatRange(min=0.1), help="Per-request timeout in seconds.")
@data_selection
@click.option(
    "--context",
    metavar="PROVIDER",
    help="Evidence for open-domain examples from a context provider, e.g. file:EVIDENCE.jsonl or wikipedia "
    "(default: each source's own context, empty for open-domain sets).",
)
@click.option(
    "--context-param",
    "context_params",
    multiple=True,
    metavar="KEY=VALUE",
    help="Context provider parameter (repeatable), e.g. preset=qwen3-4b for --context llm.",
)
@click.option(
    "--suite",
    type=click.Choice(list(SUITES)),
    help="A step-level math suite instead of --datasets: selects its datasets and prints its per-subset table "
    "(ProcessBench F1, Hard2Verify balanced accuracy/F1, Math-Shepherd character F1).",
)
@click.option(
    "--sopo-compat",
    is_flag=True,
    help="With --suite math-shepherd: also report the SOPO kit's label-dependent span rule (compatibility only).",
)
@click.option(
    "--run-dir",
    type=click.Path(file_okay=False),
    help="Run directory to create (default: a new folder under --runs).",
)
@click.option(
    "--runs",
    "runs_root",
    default="runs",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where new run directories go.",
)
@click.option(
    "--resume",
    "resume_dir",
    type=click.Path(file_okay=False, exists=True),
    help="Finish an interrupted run: only missing or failed examples are run.",
)
@click.option("--no-progress", is_flag=True, help="Do not show the progress bar.")
@scoring
def eval_command(
    detector_spec: str,
    params: tuple[str, ...],
    resume_dir: str | None,
    run_dir: str | None,
    runs_root: str,
    no_progress: bool,
    n_resamples: int,
    seed: int,
    **opts: Any,
) -> None:
    """Run a detector over examples, write a run directory and print the scores.

    \b
    shambench eval --detector overlap --data-dir ../shared/data
    shambench eval --detector random -p rate=0.2 --datasets ragtruth --limit 50
    shambench eval --detector gpt5mini --datasets mushroom --base-url http://127.0.0.1:8000/v1
    shambench eval --resume runs/20261129T120000_gpt5mini
    shambench eval --suite processbench --detector first-step-wrong

    The run directory holds config.json, predictions.jsonl (appended as predictions arrive, so an interrupted
    run loses only what was in flight) and results.json. `shambench score RUN_DIR` rescores it.
    """
    from shambench.cli.progress import ProgressMonitor
    from shambench.cli.score import _warn
    from shambench.detector import create_detector
    from shambench.io import write_json
    from shambench.report import make_console, print_results
    from shambench.runner import (
        CONFIG,
        JOURNAL,
        RESULTS,
        Journal,
        examples_of,
        load_config,
        make_config,
        new_run_dir,
        pending,
        run_predictions,
        score_run,
        select_examples,
    )

    console = make_console()
    detector_params = parse_params(params)
    detector_params.update({k: opts[k] for k in ENDPOINT_OPTIONS if opts.get(k) is not None})
    selection_opts = {k: opts[k] for k in ("datasets", "examples_file", "split", "data_dir", "limit", "context")}
    selection_opts["context_params"] = parse_params(opts["context_params"])
    if opts["sopo_compat"] and opts["suite"] != "math-shepherd":
        raise click.UsageError("--sopo-compat needs --suite math-shepherd")
    if opts["suite"]:
        if opts["datasets"] or opts["examples_file"]:
            raise click.UsageError("give --suite or --datasets/--examples, not both")
        selection_opts["datasets"] = SUITES[opts["suite"]]
    if resume_dir:
        fixed = given_options(click.get_current_context(), *FIXED_ON_RESUME)
        if fixed:
            raise click.UsageError(
                f"--resume takes the detector and the data from the run's config.json; drop {', '.join(fixed)}"
            )
        run_path = Path(resume_dir)
        config = load_config(run_path)
        examples = examples_of(config, same_evidence=True)
        detector = create_detector(config.detector, **{**config.params, **detector_params})
        changed = _changed_params(config.params, detector.params())
        if changed:
            detector.close()
            raise click.UsageError(
                f"--resume would change {', '.join(changed)}, which define the detector's output "
                "(its predictions would no longer match config.json); start a new run instead"
            )
    else:
        if not detector_spec:
            raise click.UsageError("--detector is required (or --resume RUN_DIR)")
        detector = create_detector(detector_spec, **detector_params)
        examples, selection = select_examples(**selection_opts, on_source_error=_warn(console))
        run_path = Path(run_dir) if run_dir else new_run_dir(runs_root, detector_spec)
        if (run_path / CONFIG).exists():
            raise click.UsageError(f"{run_path} already holds a run; use --resume {run_path} or another --run-dir")
        config = make_config(detector, examples, selection)
        write_json(run_path / CONFIG, config)
    journal = Journal(run_path / JOURNAL)
    todo = pending(examples, journal)
    console.print(f"run directory: {run_path}  ({len(todo)} of {len(examples)} examples to run)", soft_wrap=True)
    try:
        with ProgressMonitor(len(todo), detector.name, console, enabled=not no_progress) as monitor:
            run_predictions(detector, todo, journal, monitor, monitor.done)
    finally:
        detector.close()
    results = score_run(run_path, examples, n_resamples=n_resamples, seed=seed)
    print_results(results, console, title=f"{detector.name} on {len(examples)} examples")
    if opts["suite"]:
        from shambench.steps import print_suite, with_sopo_compat

        if opts["sopo_compat"]:
            with_sopo_compat(results, examples, journal.read(), seed, console)
            write_json(run_path / RESULTS, results)
        print_suite(results, opts["suite"], console, opts["sopo_compat"])
    console.print(f"results: {run_path / RESULTS}", soft_wrap=True)


def _changed_params(recorded: dict, current: dict) -> list[str]:
    """The parameter names whose values differ between a run's config and the detector rebuilt to resume it."""
    from pydantic_core import to_jsonable_python

    current = to_jsonable_python(current)
    return sorted(k for k in recorded.keys() | current.keys() if recorded.get(k) != current.get(k))
