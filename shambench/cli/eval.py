"""`shambench eval`: run a detector over examples, journal its predictions, score them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from shambench.cli.exits import allow_failures_option
from shambench.cli.options import emit_json, flags_in, json_outputs, json_to_stdout, spec_options

if TYPE_CHECKING:
    from rich.console import Console

    from shambench.runs.batch import Estimate
    from shambench.runs.lifecycle import Run
    from shambench.runs.spec import RunSpec


@click.command("eval")
@spec_options()
@click.option(
    "--resume",
    "resume_dir",
    type=click.Path(file_okay=False, exists=True),
    help="Finish an interrupted run: only missing or failed examples are run.",
)
@click.option("--no-progress", is_flag=True, help="Do not show the progress bar.")
@allow_failures_option
@json_outputs
def eval_command(
    spec: RunSpec, resume_dir: str | None, no_progress: bool, allow_failures: bool, out: str | None, as_json: bool
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
    authentication errors, a run stopped because its predictions kept failing for one reason, see
    --keep-going, and a detector whose own code raised: the error names the exception and the line that raised
    it); 130 when interrupted. On --resume the API key goes only to the --base-url given now
    (or the preset's): a run made against another server needs that --base-url again. Examples a --max-cost
    budget or an expired or cancelled batch left unanswered are failed predictions (exit status 3) that --resume
    runs. A run by batch also keeps batches.json.
    """
    from shambench.cli import UserError
    from shambench.cli.exits import INTERRUPTED, NOT_FINISHED, command_line, finish, print_failures, resume_args
    from shambench.cli.progress import ProgressMonitor
    from shambench.data.context import evidence_gaps
    from shambench.errors import DetectorError, EndpointStopped
    from shambench.llm.api import APIDetector
    from shambench.reporting.console import make_console, warn
    from shambench.reporting.naming import run_name
    from shambench.reporting.tables import print_results
    from shambench.runs.evaluate import run_evaluation
    from shambench.runs.failures import SystematicFailure, failures
    from shambench.runs.files import RESULTS

    console = make_console(stderr=json_to_stdout(out, as_json))
    if resume_dir:
        if spec.execution.run_dir is not None:
            raise click.UsageError("--resume RUN_DIR names the run directory to finish; drop --run-dir")
        resumed = spec.execution.model_copy(update={"run_dir": resume_dir, "resume": True})
        spec = spec.model_copy(update={"execution": resumed})
    suite, sopo_compat = spec.selection.suite, spec.scoring.sopo_compat
    opened: list[Run] = []  # the run, once open: an interruption names the command that resumes it
    watching: list[ProgressMonitor] = []  # its monitor, whose counters say where the answers came from

    def progress(run: Run) -> ProgressMonitor:
        opened.append(run)
        todo = run.todo()
        console.print(f"run directory: {run.run_dir}  ({len(todo)} of {len(run.examples)} examples to run)")
        if run.config:
            _print_dropped(run.config.dropped_rows, console)
        watching.append(ProgressMonitor(len(todo), run.detector.name, enabled=not no_progress))
        return watching[0]

    def resume() -> str:
        return command_line(resume_args(opened[0].run_dir, spec.base_url, spec.api_key_env))

    try:
        evaluation = run_evaluation(spec, progress=progress, on_message=lambda line: console.print(flags_in(line)))
    except KeyboardInterrupt:
        if not opened:
            console.print("interrupted before the run started: no example was run", soft_wrap=True)
            raise click.exceptions.Exit(INTERRUPTED) from None
        console.print(f"interrupted; finish the run with: {resume()}", markup=False, soft_wrap=True)
        raise click.exceptions.Exit(INTERRUPTED) from None
    except SystematicFailure as err:
        raise UserError(f"{err}\nafter the fix, continue with: {resume()}") from None
    except DetectorError as err:
        if not opened:  # raised while the corpora loaded, before the run directory was written
            raise UserError(str(err)) from None
        raise UserError(
            f"{err}; its predictions before it are journaled\nafter the fix, continue with: {resume()}"
        ) from None
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
        timeout = spec.execution.batch_timeout
        why = f"still running after --batch-timeout {timeout:g}s" if outcome.timed_out else "running"
        console.print(
            f"submitted, not finished: batch {outcome.detached_batch} is {why}; no results yet. "
            f"Finish the run with: {resume()}",
            markup=False,
            soft_wrap=True,
        )
        raise click.exceptions.Exit(NOT_FINISHED)
    results = outcome.results
    assert results is not None  # a run not left to a batch is always scored
    name = run_name(results.run) or run.detector.name
    print_results(results, console, title=f"{name} on {len(run.examples)} examples")
    from shambench.sources import step_suites

    if suite in step_suites():
        from shambench.reporting.steps import print_suite
        from shambench.scoring.steps import SOPO_WARNING

        if sopo_compat:
            warn(console, SOPO_WARNING)
        print_suite(results, suite, console, sopo_compat)
    console.print(f"results: {run.run_dir / RESULTS}", soft_wrap=True)
    if watching and isinstance(run.detector, APIDetector):
        console.print(answers_line(outcome.predicted, watching[0].counters), soft_wrap=True)
    gaps = evidence_gaps(run.config.context_provenance) if run.config else None
    if gaps:
        warn(console, gaps)
    emit_json(results, out, as_json, console)
    for line in outcome.unfinished_batches:
        warn(console, f"batch {line}: its unanswered requests are failed predictions")
    failed = failures(run.examples, outcome.predictions)
    print_failures(console, failed, retry=f"retry them with: {resume()}")
    finish(len(failed), allow_failures)


def answers_line(predicted: int, counters: dict[str, float]) -> str:
    """Where an API run's answers came from in this invocation: how many predictions it made, how many of them the
    response cache answered, how many HTTP requests it sent (retries included) and how many went by batch."""
    cached, sent, batched = (int(counters.get(key, 0)) for key in ("cache_hits", "requests", "batched"))
    by_batch = f", {batched} by batch" if batched else ""
    return f"answers: {predicted} predictions, {cached} from the response cache, {sent} HTTP requests sent{by_batch}"


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
