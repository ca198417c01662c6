"""`shambench batch status RUN_DIR`: the Batch API batches of a run, as the API reports them now."""

from __future__ import annotations

from pathlib import Path

import click


@click.group("batch")
def batch_group() -> None:
    """Batches of runs made with `shambench eval --batch`."""


@batch_group.command("status")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
def status(run_dir: str) -> None:
    """Show each batch of RUN_DIR: id, status, request counts, and whether its answers are in the journal.

    Batches not yet applied are checked with the API (same server and key variable as the run's detector).
    `shambench eval --resume RUN_DIR` waits for them and finishes the run.
    """
    from shambench.detection.detector import create_detector
    from shambench.reporting.console import make_console
    from shambench.runs.batch import load_state, status_lines
    from shambench.runs.runner import load_config

    path = Path(run_dir)
    config = load_config(path)
    console = make_console()
    if not load_state(path).batches:
        console.print(f"{path}: no batches recorded (the run was not made with --batch)", soft_wrap=True)
        return
    detector = create_detector(config.detector, **config.params)
    try:
        for line in status_lines(path, detector):
            console.print(line, soft_wrap=True, highlight=False)
    finally:
        detector.close()
    console.print(f"finish the run with: shambench eval --resume {path}", soft_wrap=True)
