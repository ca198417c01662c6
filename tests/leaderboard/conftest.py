"""Fixtures of the leaderboard tests: the invented examples and three hand-scored runs over them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.leaderboard.toy import RUNS, make_run, write_examples


@pytest.fixture(scope="module")
def toy_runs(tmp_path_factory) -> Path:
    """A folder holding the examples file and runs/{exact,none,all} (read-only: build them once per module)."""
    root = tmp_path_factory.mktemp("toy")
    examples = write_examples(root / "examples.jsonl")
    for name in RUNS:
        # Nested one level deeper for `all`, so that the recursive search is exercised.
        make_run(root / "runs" / ("nested/all" if name == "all" else name), examples, name)
    return root


@pytest.fixture
def reported_file(tmp_path) -> Path:
    """A reported-scores file in the published layout, with invented detectors and numbers."""
    data = {
        "source": "An invented paper, Table 9",
        "conventions": "per-example F1 averaged within dataset/task; overall = mean of task scores",
        "span_level": {
            "paper-small": {
                "tasks": {"context_qa": 0.4, "summ": 0.2},
                "overall": 0.3,
                "overall_std": 0.1,
                "datasets": {"context_qa/toyqa": 0.4, "summ/toysum": 0.2},
            },
            "paper-large": {"tasks": {"context_qa": 0.9, "summ": 0.5}, "overall": 0.7, "overall_std": 0.2},
        },
        "sentence_level": {
            "paper-large": {"tasks": {"context_qa": 0.8, "summ": 0.6}, "overall": 0.7, "overall_std": 0.1},
        },
    }
    path = tmp_path / "reported_f1.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path
