"""`shambench.evaluate()`: the same run as `shambench eval`, resumable, with detectors by name or as objects."""

from __future__ import annotations

import json

import pytest

import shambench
from shambench import Detector, Example, Span
from shambench.errors import DataError
from shambench.runs.evaluate import run_differences
from shambench.runs.runner import load_config
from tests.runs import eval_run, write_jsonl

ROWS = [
    {"id": "a", "task": "summ", "dataset": "x", "response": "The cat sat.", "hallu_spans": [[4, 7]]},
    {"id": "b", "task": "qa", "dataset": "y", "response": "Paris is big.", "hallu_spans": []},
]


def scores(results: dict) -> dict:
    return {k: results[k] for k in ("n_examples", "missing_predictions", "datasets", "tasks", "overall")}


def test_evaluate_equals_the_cli_run_on_real_mushroom(shared_data, tmp_path):
    results = shambench.evaluate(
        "overlap", datasets="mushroom", data_dir=shared_data, run_dir=tmp_path / "api", n_resamples=20
    )
    assert results.n_examples == 154 and results.failed_predictions == 0
    from click.testing import CliRunner

    from shambench.cli import main

    args = ["eval", "--detector", "overlap", "--datasets", "mushroom", "--data-dir", str(shared_data)]
    res = CliRunner().invoke(main, [*args, "--run-dir", str(tmp_path / "cli"), "--no-progress", "--bootstrap", "20"])
    assert res.exit_code == 0, res.output
    cli = json.loads((tmp_path / "cli" / "results.json").read_text())
    assert scores(results.model_dump(mode="json")) == scores(cli)
    api_lines = (tmp_path / "api" / "predictions.jsonl").read_text().splitlines()
    assert sorted(api_lines) == sorted((tmp_path / "cli" / "predictions.jsonl").read_text().splitlines())


def test_a_detector_object_and_a_resume_with_nothing_left_to_do(tmp_path):
    examples = write_jsonl(tmp_path / "ex.jsonl", ROWS)

    class FirstWord(Detector):
        def detect(self, example: Example) -> list[Span]:
            return [Span(start=0, end=example.response.index(" "))]

    run = tmp_path / "run"
    first = shambench.evaluate(FirstWord(), examples_file=examples, run_dir=run, n_resamples=10)
    # a: "The" predicted, "cat" gold -> F1 0; b: "Paris" predicted, nothing gold -> F1 0.
    assert first.tasks["summ"].token.f1 == 0.0 and first.tasks["qa"].token.f1 == 0.0
    assert first.run.detector == "custom"
    run = tmp_path / "all"
    done = shambench.evaluate("all", examples_file=examples, run_dir=run, n_resamples=10)
    journal = (run / "predictions.jsonl").read_text()
    again = shambench.evaluate("ignored: the run's config decides", resume=True, run_dir=run, n_resamples=10)
    assert (run / "predictions.jsonl").read_text() == journal
    assert again.model_dump(include={"datasets", "tasks"}) == done.model_dump(include={"datasets", "tasks"})


def test_a_run_directory_is_never_adopted_twice(tmp_path):
    examples = write_jsonl(tmp_path / "ex.jsonl", ROWS)
    eval_run(examples, "all", tmp_path / "run")
    with pytest.raises(DataError, match="already holds a run"):
        shambench.evaluate("none", examples_file=examples, run_dir=tmp_path / "run")
    with pytest.raises(DataError, match="needs the run_dir"):
        shambench.evaluate("none", resume=True)


def test_run_differences_names_what_changed(tmp_path):
    examples = write_jsonl(tmp_path / "ex.jsonl", ROWS)
    eval_run(examples, "random", tmp_path / "run", "-p", "rate=0.2", "-p", "seed=1")
    config = load_config(tmp_path / "run")
    assert run_differences(config, "random", config.params, config.examples_hash) == []
    changed = {**config.params, "rate": 0.5}
    assert run_differences(config, "random", changed) == ["rate"]
    assert run_differences(config, "none", config.params, "other") == ["detector", "examples"]
    # A sweep file names only some parameters: the others are not compared.
    assert run_differences(config, "random", {"seed": 1}, all_params=False) == []
    assert run_differences(config, "random", {"seed": 2}, all_params=False) == ["seed"]
