"""`shambench eval`: run a detector over examples, journal its predictions, score them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from shambench.cli.exits import allow_failures_option
from shambench.cli.options import (
    DURATION,
    api_key_env_option,
    base_url_option,
    data_selection,
    emit_json,
    given_options,
    json_outputs,
    json_to_stdout,
    parse_params,
    scoring,
    suite_option,
)

if TYPE_CHECKING:
    from rich.console import Console

    from shambench.runs.batch import Estimate
    from shambench.runs.evaluate import OpenRun

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
@base_url_option
@api_key_env_option
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
@suite_option(
    "Datasets by suite instead of --datasets: a step-level math suite (prints its per-subset table: ProcessBench "
    "F1, Hard2Verify balanced accuracy/F1, Math-Shepherd character F1), mushroom (the 14 Mu-SHROOM languages) or "
    "extended (every SHAM-Bench source present plus HaluQuestQA, XSumFaith's Gold summaries and the 14 languages; "
    "prints the extended view, whose overall never enters the paper's)."
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
@click.option(
    "--batch",
    is_flag=True,
    help="Send the requests through OpenAI's Batch API (half price, answers within 24 h); prompted detectors only.",
)
@click.option(
    "--no-wait",
    is_flag=True,
    help="With --batch: submit the batch and exit with status 4 (submitted, not finished); "
    "`shambench eval --resume RUN_DIR` finishes the run later.",
)
@click.option(
    "--poll",
    type=click.FloatRange(min=0, min_open=True),
    default=5.0,
    show_default=True,
    help="With --batch: seconds between the first two status checks (each further wait is 1.5 times longer, at most 5 min).",
)
@click.option(
    "--batch-timeout",
    type=DURATION,
    default="26h",
    show_default=True,
    metavar="DURATION",
    help="With --batch: stop waiting for a batch after this long (e.g. 90m, 26h, 3600s); the batch stays recorded, "
    "the run exits with status 4 and --resume waits again.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the requests the run would send (after the cache), their input tokens and estimated cost, "
    "with and without the batch discount; send and write nothing.",
)
@click.option(
    "--max-cost",
    type=click.FloatRange(min=0),
    metavar="USD",
    help="Stop sending requests once this invocation's accounted cost reaches USD (by batch: a batch holds only "
    "the requests its estimate fits); the rest are recorded as not run, exit status 3; --resume continues.",
)
@click.option("--no-progress", is_flag=True, help="Do not show the progress bar.")
@click.option(
    "--keep-going",
    is_flag=True,
    help="Do not stop when predictions fail systematically (by default a run stops when its first 8, or 20 in a "
    "row, fail for the same reason).",
)
@allow_failures_option
@json_outputs
@scoring
def eval_command(
    detector_spec: str | None,
    params: tuple[str, ...],
    resume_dir: str | None,
    run_dir: str | None,
    runs_root: str,
    no_progress: bool,
    keep_going: bool,
    allow_failures: bool,
    out: str | None,
    as_json: bool,
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
    shambench eval --suite extended --detector overlap --data-dir ../shared/data
    shambench eval --detector gpt5mini --dry-run                 what a full run would send and cost
    shambench eval --detector gpt5mini --batch --no-wait         submit by batch; --resume RUN_DIR finishes

    The run directory holds config.json, predictions.jsonl (appended as predictions arrive, so an interrupted
    run loses only what was in flight), results.json and per_example.jsonl (each example's own scores). An API
    detector's requests start while the datasets load; what is answered before they all are is journaled once
    config.json is written (the response cache keeps it meanwhile).
    `shambench score RUN_DIR` rescores it. With --json (or --out -) the results JSON goes to stdout and
    everything else to stderr.

    Exit status: 0 when every prediction succeeded; 3 when the run finished and wrote its results but some
    predictions failed (a summary and the --resume command are printed; --allow-failures makes this 0); 4 when a
    run by batch was submitted but not finished (--no-wait, or --batch-timeout passed: no results yet, --resume
    finishes it); 2 for
    usage or input errors (including a dataset that fails to load, a run directory in use, repeated
    authentication errors, and a run stopped because its predictions kept failing for one reason, see
    --keep-going); 130 when interrupted. On --resume the API key goes only to the --base-url given now
    (or the preset's): a run made against another server needs that --base-url again. Examples a --max-cost
    budget or an expired or cancelled batch left unanswered are failed predictions (exit status 3) that --resume
    runs. A run by batch also keeps batches.json.
    """
    from shambench.cli import UserError
    from shambench.cli.exits import INTERRUPTED, NOT_FINISHED, command_line, finish, print_failures, resume_args
    from shambench.cli.progress import ProgressMonitor
    from shambench.data.context import evidence_gaps
    from shambench.errors import EndpointStopped
    from shambench.reporting.console import make_console, warn
    from shambench.reporting.tables import print_results
    from shambench.runs.evaluate import run_evaluation
    from shambench.runs.failures import SystematicFailure, failures
    from shambench.runs.files import RESULTS

    console = make_console(stderr=json_to_stdout(out, as_json))
    detector_params = parse_params(params)
    detector_params.update({k: opts[k] for k in ENDPOINT_OPTIONS if opts.get(k) is not None})
    if opts["sopo_compat"] and opts["suite"] != "math-shepherd":
        raise click.UsageError("--sopo-compat needs --suite math-shepherd")
    if opts["suite"] and (opts["datasets"] or opts["examples_file"]):
        raise click.UsageError("give --suite or --datasets/--examples, not both")
    if opts["no_wait"] and not opts["batch"] and not resume_dir:
        raise click.UsageError("--no-wait goes with --batch (or --resume of a run by batch)")
    if resume_dir:
        fixed = given_options(click.get_current_context(), *FIXED_ON_RESUME)
        if fixed:
            raise click.UsageError(
                f"--resume takes the detector and the data from the run's config.json; drop {', '.join(fixed)}"
            )
    elif not detector_spec:
        raise click.UsageError("--detector is required (or --resume RUN_DIR)")
    opened: list[OpenRun] = []  # the run, once open: an interruption names the command that resumes it

    def progress(run: OpenRun) -> ProgressMonitor:
        opened.append(run)
        todo = run.todo()
        console.print(f"run directory: {run.run_dir}  ({len(todo)} of {len(run.examples)} examples to run)")
        _print_dropped(run.config.dropped_rows, console)
        return ProgressMonitor(len(todo), run.detector.name, console, enabled=not no_progress)

    def resume() -> str:
        return command_line(resume_args(opened[0].run_dir, opts["base_url"], opts["api_key_env"]))

    try:
        evaluation = run_evaluation(
            detector_spec,
            datasets=opts["datasets"],
            suite=opts["suite"],
            examples_file=opts["examples_file"],
            split=opts["split"],
            data_dir=opts["data_dir"],
            limit=opts["limit"],
            context=opts["context"],
            context_params=parse_params(opts["context_params"]),
            run_dir=resume_dir or run_dir,
            runs_root=runs_root,
            resume=bool(resume_dir),
            batch=opts["batch"],
            wait=not opts["no_wait"],
            poll=opts["poll"],
            batch_timeout=opts["batch_timeout"],
            max_cost=opts["max_cost"],
            sopo_compat=opts["sopo_compat"],
            dry_run=opts["dry_run"],
            fail_fast=not keep_going,
            progress=progress,
            on_message=console.print,
            n_resamples=n_resamples,
            seed=seed,
            detector_params=detector_params,
        )
    except KeyboardInterrupt:
        if not opened:
            console.print("interrupted before the run started: no example was run", soft_wrap=True)
            raise click.exceptions.Exit(INTERRUPTED) from None
        console.print(f"interrupted; finish the run with: {resume()}", markup=False, soft_wrap=True)
        raise click.exceptions.Exit(INTERRUPTED) from None
    except SystematicFailure as err:
        raise UserError(f"{err}\nafter the fix, continue with: {resume()}") from None
    except EndpointStopped as err:
        raise UserError(f"{err}; nothing more was sent. Once fixed, resume with: {resume()}") from None
    run = evaluation.run
    if evaluation.estimate is not None:
        _print_estimate(run.detector.name, evaluation.estimate, console)
        return
    outcome = evaluation.outcome
    assert outcome is not None  # only a dry run has no outcome
    for line in outcome.unused_batch_lines:
        warn(console, f"batch {line} (output lines applied to no request; a request named twice is failed)")
    if outcome.detached_batch:
        why = f"still running after --batch-timeout {opts['batch_timeout']:g}s" if outcome.timed_out else "running"
        console.print(
            f"submitted, not finished: batch {outcome.detached_batch} is {why}; no results yet. "
            f"Finish the run with: {resume()}",
            markup=False,
            soft_wrap=True,
        )
        raise click.exceptions.Exit(NOT_FINISHED)
    results = outcome.results
    assert results is not None  # a run not left to a batch is always scored
    print_results(results, console, title=f"{run.detector.name} on {len(run.examples)} examples")
    from shambench.sources import step_suites

    if opts["suite"] in step_suites():
        from shambench.reporting.steps import print_suite
        from shambench.scoring.steps import SOPO_WARNING

        if opts["sopo_compat"]:
            warn(console, SOPO_WARNING)
        print_suite(results, opts["suite"], console, opts["sopo_compat"])
    console.print(f"results: {run.run_dir / RESULTS}", soft_wrap=True)
    gaps = evidence_gaps(run.config.context_provenance)
    if gaps:
        warn(console, gaps)
    emit_json(results, out, as_json, console)
    for line in outcome.unfinished_batches:
        warn(console, f"batch {line}: its unanswered requests are failed predictions")
    failed = failures(run.examples, outcome.predictions)
    print_failures(console, failed, retry=f"retry them with: {resume()}")
    finish(len(failed), allow_failures)


def _print_dropped(dropped: dict[str, dict[str, int]], console: Console) -> None:
    """One line per dataset whose adapter dropped source rows (they are in no score)."""
    for name, reasons in sorted(dropped.items()):
        detail = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))
        console.print(f"{name}: {sum(reasons.values())} source rows dropped by the adapter ({detail})", soft_wrap=True)


def _print_estimate(name: str, est: Estimate, console: Console) -> None:
    """The `--dry-run` report: requests after the cache, input tokens, and cost with and without batching."""
    price = "" if est.priced else f" ({est.model} is not in the price table: costs show as 0)"
    lines = [
        f"dry run: {name} ({est.model}), nothing sent{price}",
        f"  examples to run       {est.examples}  ({est.cached} answered by the response cache)",
        f"  requests to send      {est.requests}"
        + (f"  ({est.in_batches} more already in a submitted batch)" if est.in_batches else ""),
        f"  input tokens          {est.input_tokens:,}  ({est.token_method})",
        f"  output tokens/reply   {est.output_tokens_per_request:g}  ({est.output_basis})",
        f"  expected cost         ${est.cost:.2f} direct, ${est.batch_cost:.2f} by --batch",
    ]
    if est.ceiling_cost is not None:
        lines.append(
            f"  ceiling               ${est.ceiling_cost:.2f} direct, ${est.ceiling_batch_cost:.2f} by --batch "
            f"(every reply at its {est.max_output_tokens}-token limit)"
        )
    if est.key_note:
        lines.append(f"  note: {est.key_note}")
    for line in lines:
        console.print(line, soft_wrap=True, highlight=False)
