"""`shambench batch status RUN_DIR`: the Batch API batches of a run, as the API reports them now."""

from __future__ import annotations

from pathlib import Path

import click

from shambench.cli.options import api_key_env_option, base_url_option


@click.group("batch")
def batch_group() -> None:
    """Batches of runs made with `shambench eval --batch`."""


@batch_group.command("status")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
@base_url_option
@api_key_env_option
def status(run_dir: str, base_url: str | None, api_key_env: str | None) -> None:
    """Show each batch of RUN_DIR: id, status, request counts, and whether its answers are in the journal.

    Batches not yet applied are checked with the API: the server and key variable are the command line's
    (--base-url, --api-key-env) or the preset's, never config.json's; a run made against another server needs
    that --base-url again (as `eval --resume` does). The command that finishes the run is printed last.
    """
    from shambench.cli.exits import command_line, resume_args
    from shambench.llm.batch import require_routes
    from shambench.llm.endpoint import Endpoint
    from shambench.reporting.console import make_console
    from shambench.runs.batch import load_state, status_lines
    from shambench.runs.lifecycle import resumed_detector
    from shambench.runs.rundir import load_config

    path = Path(run_dir)
    console = make_console()
    if not load_state(path).batches:
        console.print(f"{path}: no batches recorded (the run was not made with --batch)", soft_wrap=True)
        return
    config = load_config(path)
    given = {k: v for k, v in (("base_url", base_url), ("api_key_env", api_key_env)) if v}

    def endpoint() -> Endpoint:  # built only when a batch must be checked with the API
        detector = resumed_detector(config, given)
        detector.close()
        require_routes(detector, "batch status")
        return detector.endpoint  # type: ignore[attr-defined]

    for line in status_lines(path, endpoint):
        console.print(line, soft_wrap=True, highlight=False)
    resume = command_line(resume_args(path, base_url, api_key_env))
    console.print(f"finish the run with: {resume}", soft_wrap=True, markup=False, highlight=False)
