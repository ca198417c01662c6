"""Results and run folders as pandas DataFrames, the analysis surface for notebooks.

`runs_df(RUNS)` has one row per run directory below a folder; `samples_df(RUNS)` one row per scored example of those runs (from each run's
`per_example.jsonl`); one run's own frame is `Results.to_pandas()`. Column names are flat (`token_f1`, `sentence_f1`, `f1/summ`, ...) so they sort and filter
without unpacking nested records.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import shambench.fs as fs
from shambench.io import iter_lines, parse_json_line
from shambench.reporting.naming import run_name
from shambench.reporting.runfolders import walk_runs
from shambench.runs.files import PER_EXAMPLE, RESULTS
from shambench.scoring.results import Results

if TYPE_CHECKING:
    import pandas as pd


def run_dirs(root: str | Path) -> Iterator[Path]:
    """Every folder at or below `root` holding a `results.json` (no link below it followed), in sorted order."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such folder of runs")
    yield from (p.parent for p in walk_runs(root).results)


def run_row(run_dir: Path, results: Results) -> dict[str, Any]:
    """The flat record of one run: what was run, its coverage and its headline scores."""
    info = results.run
    row: dict[str, Any] = {
        "run_dir": str(run_dir),
        "detector": info.detector,
        "name": run_name(info),
        "family": info.family,
        "params": json.dumps(info.params, sort_keys=True),
        "split": info.split,
        "limit": info.limit,
        "datasets": ",".join(info.datasets or []),
        "n_examples": results.n_examples,
        "missing_predictions": results.missing_predictions,
        "failed_predictions": results.failed_predictions,
        "cost_usd": info.cost_usd,
        "overall_f1": results.overall.token.f1 if results.overall else None,
        "overall_std": results.overall.token.std if results.overall else None,
        "overall_sentence_f1": results.overall.sentence.f1 if results.overall else None,
    }
    row |= {f"f1/{task}": g.token.f1 for task, g in sorted(results.tasks.items())}
    return row


def read_results(run_dir: Path) -> Results:
    """The `results.json` of a run directory."""
    return Results.model_validate_json(fs.read_input(run_dir / RESULTS))


def runs_df(root: str | Path) -> pd.DataFrame:
    """One row per run directory below `root` (detector, the run's name as the board gives it, parameters,
    coverage, overall and per-task span F1)."""
    import pandas as pd

    return pd.DataFrame([run_row(d, read_results(d)) for d in run_dirs(root)])


def samples_df(root: str | Path) -> pd.DataFrame:
    """One row per scored example of every run below `root`, with the run's directory, detector and name.

    Rows come from each run's `per_example.jsonl`; a run without one (scored by an older shambench) raises
    FileNotFoundError naming the command that writes it, rather than being silently left out.
    """
    import pandas as pd

    frames = []
    for run_dir in run_dirs(root):
        path = run_dir / PER_EXAMPLE
        if not path.is_file():
            raise FileNotFoundError(f"{path}: missing; run `shambench score {run_dir}` to write it")
        rows = [parse_json_line(line) for _, line in iter_lines(path)]
        frame = pd.json_normalize(rows, sep="_")
        frame.insert(0, "run_dir", str(run_dir))
        info = read_results(run_dir).run
        frame.insert(1, "detector", info.detector)
        frame.insert(2, "name", run_name(info))
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
