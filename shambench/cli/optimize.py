"""`shambench optimize`: optimise a prompted detector's prompt with DSPy's MIPROv2."""

from __future__ import annotations

import sys
from typing import Any

import click

from shambench.cli.exits import allow_failures_option
from shambench.cli.options import api_key_env_option, base_url_option, data_dir_option, parse_params

# Endpoint options of `shambench eval`, applied to the base preset when given.
ENDPOINT_OPTIONS = ("model", "base_url", "api_key_env", "max_concurrency", "timeout")


@click.command("optimize")
@click.option(
    "--base",
    default="gpt5mini-reasoning",
    show_default=True,
    metavar="PRESET",
    help="Prompted preset to start from: endpoint, model and generation parameters (see `shambench list detectors`).",
)
@click.option(
    "--trainset",
    default="dev",
    show_default=True,
    metavar="dev|SPLIT|FILE.jsonl",
    help="Examples to optimise on: `dev` (the 45-example validation set, 5 per task/dataset), another split of "
    "the adapters, or an EXAMPLES JSONL file.",
)
@click.option(
    "--heldout",
    metavar="SPLIT|FILE.jsonl|SHARE",
    help="Examples never shown to MIPROv2, scored before and after to expose over-adaptation: a split (first "
    "--heldout-limit per partition, trainset ids left out), a JSONL file, or a share of the trainset such as 0.2. "
    "Default: `test` for an adapter trainset, 0.2 for a file.",
)
@click.option(
    "--heldout-limit",
    default=5,
    show_default=True,
    type=click.IntRange(min=1),
    help="Held-out examples per task/dataset partition when --heldout is a split.",
)
@click.option(
    "--datasets", "-d", metavar="NAMES", help="Adapters for split trainsets and held-out sets (default: all)."
)
@data_dir_option
@click.option(
    "--auto",
    default="light",
    show_default=True,
    type=click.Choice(["light", "medium", "heavy"]),
    help="MIPROv2 budget (light: 6 candidates; medium: 12; heavy: 18).",
)
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of MIPROv2 and of the held-out draw.")
@click.option(
    "--max-demos",
    default=4,
    show_default=True,
    type=click.IntRange(min=0),
    help="Most bootstrapped and most labelled demos per candidate (0: optimise the instructions only and keep "
    "the base program's worked examples).",
)
@click.option("--threads", type=click.IntRange(min=1), help="Examples evaluated at once (default: the concurrency).")
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    help="Program file to write (default: the file the BASE-miprov2 detector reads, in the user data folder).",
)
@click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE", help="Generation parameter (repeatable).")
@click.option("--model", help="Model name, overriding the preset's.")
@base_url_option
@api_key_env_option
@click.option("--max-concurrency", type=click.IntRange(min=1), help="Requests in flight at once.")
@click.option("--timeout", type=click.FloatRange(min=0.1), help="Per-request timeout in seconds.")
@click.option("--no-progress", is_flag=True, help="Do not show the progress display.")
@click.option("--verbose", is_flag=True, help="Also show DSPy's own per-trial log and progress bars.")
@allow_failures_option
def optimize(
    out: str | None,
    params: tuple[str, ...],
    datasets: str | None,
    no_progress: bool,
    allow_failures: bool,
    **opts: Any,
) -> None:
    """Optimise the prompt of a prompted detector with DSPy's MIPROv2 and save the program.

    \b
    shambench optimize --base gpt5mini-reasoning --trainset dev --auto light --out program.json
    shambench optimize --base openai --model my-model --base-url http://127.0.0.1:8000/v1 \\
        --trainset mine.jsonl --heldout 0.25
    shambench eval --detector miprov2:program.json --datasets ragtruth

    The metric is the SHAM-Bench per-example token F1. Every model call goes through shambench's client and
    response cache, so the LM calls, tokens and cost are reported, and a re-run with the same seed is replayed
    from the cache. The program file records the instructions, demos, base preset, endpoint, trainset and
    held-out ids, scores before and after optimisation, and the DSPy version (evaluation needs the same one).

    Needs the optimize extra (MIPROv2 searches with optuna): pip install 'shambench[optimize]'.

    Exit status: 3 when some LM calls failed for good (the program is still saved, its scores count those
    examples as wrong; --allow-failures makes this 0), 2 for usage or input errors, else 0.
    """
    from shambench.cli.exits import finish
    from shambench.cli.progress import ProgressMonitor
    from shambench.data.benchmark import split_names
    from shambench.detection.detector import optimizers
    from shambench.reporting.console import make_console

    # The optimiser belongs to the miprov2 detector family; the registry imports it only now.
    miprov2 = optimizers.get("miprov2").factory()
    given = {k: opts.pop(k) for k in ENDPOINT_OPTIONS}
    endpoint = {k: v for k, v in given.items() if v is not None}
    out = out or str(miprov2.default_out(opts["base"]))
    config = miprov2.OptimizeConfig(
        out=out, datasets=split_names(datasets), endpoint=endpoint, params=parse_params(params), **opts
    )
    console = make_console()
    console.file = sys.stdout  # its lines stay on the stdout of the start while DSPy silences its own bars
    with ProgressMonitor(None, f"MIPROv2 {config.auto}", enabled=not no_progress) as monitor:
        program = miprov2.optimize(config, monitor)
    miprov2.print_summary(program, out, console)
    failed = program.usage.failed_calls
    if failed:
        console.print(f"{failed} LM calls failed; first reasons:", style="yellow", markup=False)
        for reason in program.usage.failures:
            console.print(f"  {reason}", markup=False, soft_wrap=True)
    finish(failed, allow_failures)
