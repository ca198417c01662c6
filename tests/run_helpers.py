"""Helpers for tests that need real run directories: an examples file, `shambench eval` through click, and waiting
for a run in another process to reach a point."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from shambench.cli import main


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    """Write rows as JSON lines; returns the path."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def wait_until(condition: Callable[[], bool], what: str, proc: subprocess.Popen | None = None) -> None:
    """Return once `condition()` holds; fail at once if `proc` ended (with the end of its stderr), or after three
    minutes: a bound on a hang, not a window (starting a Python process that imports the openai SDK is slow on a
    loaded machine)."""
    deadline = time.monotonic() + 180
    while not condition():
        if proc is not None and proc.poll() is not None:
            stderr = proc.stderr.read()[-2000:] if proc.stderr else ""
            raise AssertionError(f"{what}: the process ended first ({proc.returncode}) {stderr!r}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after three minutes")
        time.sleep(0.02)


def eval_run(examples: Path, detector: str, run_dir: Path, *extra: str) -> dict:
    """Run `shambench eval` on an examples file into `run_dir` (few bootstrap draws); its results.json."""
    args = ["eval", "--detector", detector, "--examples", str(examples), "--no-progress", "--bootstrap", "20"]
    res = CliRunner().invoke(main, [*args, "--run-dir", str(run_dir), *extra])
    assert res.exit_code == 0, res.output
    return json.loads((run_dir / "results.json").read_text())


# What differs between two runs of the same thing: when, and where. Everything else in results.json must match.
TIMES = ("created_at", "started_at", "finished_at", "run_dir")


def without_times(obj):
    """A JSON value without the keys in TIMES, at any depth."""
    if isinstance(obj, dict):
        return {k: without_times(v) for k, v in obj.items() if k not in TIMES}
    if isinstance(obj, list):
        return [without_times(v) for v in obj]
    return obj
