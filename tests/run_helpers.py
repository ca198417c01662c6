"""Helpers for tests that need real run directories: an examples file and `shambench eval` through click."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from shambench.cli import main


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    """Write rows as JSON lines; returns the path."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


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
