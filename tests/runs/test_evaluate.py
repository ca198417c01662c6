"""`shambench.evaluate()`: the same run as `shambench eval`, resumable, with detectors by name or as objects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import shambench
from shambench import Detector, Example, Span
from shambench.errors import DataError
from shambench.runs.rundir import load_config, recorded_spec
from shambench.runs.spec import RunSpec, spec_differences
from tests.run_helpers import eval_run, without_times, write_jsonl

ROWS = [
    {"id": "a", "task": "summ", "dataset": "x", "response": "The cat sat.", "hallu_spans": [[4, 7]]},
    {"id": "b", "task": "qa", "dataset": "y", "response": "Paris is big.", "hallu_spans": []},
]


def scores(results: dict) -> dict:
    return {k: results[k] for k in ("n_examples", "missing_predictions", "partitions", "tasks", "overall")}


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
    again = shambench.evaluate(resume=True, run_dir=run, n_resamples=10)
    assert (run / "predictions.jsonl").read_text() == journal
    assert again.model_dump(include={"partitions", "tasks"}) == done.model_dump(include={"partitions", "tasks"})
    # A detector given with a resume is the run's, or refused: the run's config decides.
    same = shambench.evaluate("all", resume=True, run_dir=run, n_resamples=10)
    assert same.model_dump(include={"partitions", "tasks"}) == done.model_dump(include={"partitions", "tasks"})
    with pytest.raises(DataError, match="resuming would change `detector`, `limit`"):
        shambench.evaluate("none", resume=True, run_dir=run, limit=1)
    assert (run / "predictions.jsonl").read_text() == journal


def test_a_run_directory_is_never_adopted_twice(tmp_path):
    examples = write_jsonl(tmp_path / "ex.jsonl", ROWS)
    eval_run(examples, "all", tmp_path / "run")
    with pytest.raises(DataError, match="already holds a run"):
        shambench.evaluate("none", examples_file=examples, run_dir=tmp_path / "run")
    with pytest.raises(DataError, match="needs the `run_dir`"):
        shambench.evaluate("none", resume=True)


def test_a_new_run_goes_only_into_a_new_or_empty_folder(tmp_path):
    examples = write_jsonl(tmp_path / "ex.jsonl", ROWS)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "results.json").write_text("my own results\n")
    with pytest.raises(DataError, match=r"mine is not a run directory and not empty \(it holds results.json\)"):
        shambench.evaluate("none", examples_file=examples, run_dir=mine)
    assert [p.name for p in mine.iterdir()] == ["results.json"] and (
        mine / "results.json"
    ).read_text() == "my own results\n"
    for name in ("a.md", "b.md", "c.md"):
        (mine / name).write_text("")
    with pytest.raises(DataError, match=r"it holds a.md, b.md, c.md and 1 more\)"):
        shambench.evaluate("none", examples_file=examples, run_dir=mine)
    # an empty folder, or one with only the lock of a run that failed to start, is a new run's
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / ".lock").write_text("")
    results = shambench.evaluate("none", examples_file=examples, run_dir=empty, n_resamples=10)
    assert sorted(results.tasks) == ["qa", "summ"] and (empty / "config.json").is_file()


def test_a_folder_of_runs_given_as_a_run_names_its_runs(tmp_path):
    from shambench.runs.rundir import load_config

    examples = write_jsonl(tmp_path / "ex.jsonl", ROWS)
    for name in ("b", "a", "c", "d"):
        eval_run(examples, "none", tmp_path / "runs" / name)
    runs = tmp_path / "runs"
    with pytest.raises(DataError) as caught:
        load_config(runs)
    assert str(caught.value) == f"{runs} is a folder of 4 runs, not a run directory: name one ({runs / 'a'}, " + (
        f"{runs / 'b'}, {runs / 'c'}, ...)"
    )
    with pytest.raises(DataError, match=r"config.json: not found \(is .* a run directory\?\)"):
        load_config(tmp_path)


def test_spec_differences_names_what_changed(tmp_path, monkeypatch):
    examples = write_jsonl(tmp_path / "ex.jsonl", ROWS)
    eval_run(examples, "random", tmp_path / "run", "-p", "rate=0.2", "-p", "seed=1")
    recorded = recorded_spec(load_config(tmp_path / "run"))
    assert recorded.params == {"rate": 0.2, "seed": 1} and recorded.selection.examples_file == examples.resolve()
    # Only what the asked spec sets is compared: an empty spec is the recorded run (a resume with no option).
    assert spec_differences(recorded, RunSpec()) == []
    assert spec_differences(recorded, RunSpec(detector="random", params={"rate": 0.2})) == []
    assert spec_differences(recorded, RunSpec(detector="random", params={"seed": 2})) == ["seed"]
    assert spec_differences(recorded, RunSpec(detector="none", params={"rate": 0.5})) == ["detector", "rate"]
    # Paths are compared resolved; a selection field set to another value is named.
    monkeypatch.chdir(tmp_path)
    assert spec_differences(recorded, RunSpec.of(examples_file=examples.name, split="test")) == []
    assert spec_differences(recorded, RunSpec.of(limit=1, split="dev")) == ["limit", "split"]
    # Only the parameters the run's detector reported as defining its output are compared: the others (how it
    # retries, where a detector without one would send requests) change no prediction.
    assert spec_differences(recorded, RunSpec(params={"backoff_base": 0.1}, base_url="http://127.0.0.1:1/v1")) == []


def cli_and_api_results(tmp_path, cli_args: list[str], **api) -> tuple[dict, dict]:
    """results.json of `shambench eval ARGS` and of `shambench.evaluate(**api)`, each in its own run directory."""
    from click.testing import CliRunner

    from shambench.cli import main

    cli_run, api_run = tmp_path / "cli", tmp_path / "api"
    res = CliRunner().invoke(main, ["eval", *cli_args, "--run-dir", str(cli_run), "--no-progress", "--bootstrap", "20"])
    assert res.exit_code == 0, res.output
    shambench.evaluate(run_dir=api_run, n_resamples=20, **api)
    cli, python = (json.loads((run / "results.json").read_text()) for run in (cli_run, api_run))
    assert (cli_run / "per_example.jsonl").read_text() == (api_run / "per_example.jsonl").read_text()
    return without_times(cli), without_times(python)


def test_the_cli_and_evaluate_write_the_same_results_with_a_limit_and_a_detector_seed(tmp_path):
    examples = write_jsonl(tmp_path / "ex.jsonl", ROWS + [{**ROWS[0], "id": "c"}])
    cli, api = cli_and_api_results(
        tmp_path,
        ["--detector", "random", "-p", "rate=0.5", "-p", "seed=3", "--examples", str(examples), "--limit", "1"],
        detector="random",
        examples_file=examples,
        limit=1,
        params={"rate": 0.5, "seed": 3},
    )
    assert cli == api
    assert api["n_examples"] == 2 and api["run"]["params"] == {"rate": 0.5, "seed": 3}


def test_the_cli_and_evaluate_write_the_same_suite_results_with_sopo_compat(tmp_path):
    fixtures = Path(__file__).parents[1] / "adapters" / "fixtures"
    cli, api = cli_and_api_results(
        tmp_path,
        ["--suite", "math-shepherd", "--detector", "first-step-wrong", "--data-dir", str(fixtures), "--sopo-compat"],
        detector="first-step-wrong",
        suite="math-shepherd",
        data_dir=fixtures,
        sopo_compat=True,
    )
    assert cli == api
    # the SOPO figures are in the file both wrote (see tests/detectors/test_math.py for their hand computation)
    got = api["groups"]["math"]["datasets"]["math-shepherd"]
    assert (got["char_sopo_compat"]["precision"], got["char_sopo_compat"]["recall"]) == (50, 100)


def test_evaluate_refuses_what_eval_refuses(tmp_path):
    examples = write_jsonl(tmp_path / "ex.jsonl", ROWS)
    with pytest.raises(DataError, match="`sopo_compat` needs `suite` math-shepherd"):
        shambench.evaluate("all", examples_file=examples, run_dir=tmp_path / "a", sopo_compat=True)
    with pytest.raises(DataError, match="a suite selects its own datasets"):
        shambench.evaluate("all", suite="processbench", datasets="ragtruth", run_dir=tmp_path / "b")
    with pytest.raises(DataError, match="unknown suite 'nope'"):
        shambench.evaluate("all", suite="nope", run_dir=tmp_path / "c")
    with pytest.raises(DataError, match="`wait` off goes with `batch`"):
        shambench.evaluate("all", examples_file=examples, run_dir=tmp_path / "d", wait=False)
    with pytest.raises(DataError, match="a dry run needs a detector that sends chat completions"):
        shambench.evaluate("all", examples_file=examples, run_dir=tmp_path / "e", dry_run=True)
    assert not any((tmp_path / name).exists() for name in "abcde")


def test_eval_reads_the_journal_once_after_predicting(tmp_path, monkeypatch):
    from shambench.io import Journal

    examples = write_jsonl(tmp_path / "ex.jsonl", ROWS)
    sizes: list[int] = []
    read = Journal.read

    def counted(journal: Journal) -> dict:
        sizes.append(journal.path.stat().st_size if journal.path.exists() else 0)
        return read(journal)

    monkeypatch.setattr(Journal, "read", counted)
    results = eval_run(examples, "all", tmp_path / "run")
    assert results["n_examples"] == 2
    # The served model, the scores and the failure summary share one reading of the two predictions.
    assert len([size for size in sizes if size > 0]) == 1


def test_failures_are_the_failed_predictions_in_the_examples_order():
    from shambench.runs.failures import failures
    from shambench.schema import Prediction

    rows = [Example.model_validate(r) for r in ROWS]
    predictions = {"b": Prediction(id="b", error="HTTP 500: down"), "a": Prediction(id="a", spans=[])}
    assert failures(rows, predictions) == [("b", "HTTP 500: down")]
    assert failures(rows, {}) == []
