"""`shambench score` / `eval` on good and bad input, `--help` everywhere, and `python -m shambench` = `shambench`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.io import write_jsonl
from shambench.schema import Example, Prediction
from tests.cli.commands import every_command

# Tokens of "Paris is in Italy.": Paris [0,5) is [6,8) in [9,11) Italy [12,17) . [17,18); gold "Italy".
EXAMPLES = [
    Example(id="a", dataset="toy", task="summ", response="Paris is in Italy.", hallu_spans=[[12, 17]]),
    Example(id="b", dataset="toy", task="summ", response="Rome is in Italy."),
    Example(id="c", dataset="wiki", task="qa", response="It has 3 moons.", hallu_spans=[[7, 8]]),
]
BEFORE = '{"kept": "a results file from an earlier run"}\n'


@pytest.fixture
def files(tmp_path):
    examples = tmp_path / "examples.jsonl"
    write_jsonl(examples, EXAMPLES)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "results.json"
    out.write_text(BEFORE)
    return examples, tmp_path / "pred.jsonl", out


def invoke(*args) -> click.testing.Result:
    return CliRunner().invoke(main, [str(a) for a in args], prog_name="shambench")


def test_score_writes_results_with_the_documented_keys(files):
    examples, predictions, out = files
    # a: "Italy" found exactly -> 1; b: nothing either side -> 1; c: no prediction -> gold missed -> 0.
    predictions.write_text('{"id": "a", "spans": [[12, 17]]}\n{"id": "b", "spans": []}\n')
    result = invoke("score", "--examples", examples, "--predictions", predictions, "--out", out, "--bootstrap", 20)
    assert result.exit_code == 0, result.output
    assert "summ/toy" in result.stdout and "qa/wiki" in result.stdout
    assert result.stdout.lstrip().startswith("pred.jsonl on 3 examples")  # named for what was scored
    assert "1 example(s) without a usable prediction were scored as empty" in result.stdout
    results = json.loads(out.read_text())
    assert results["partitions"]["summ/toy"]["token"]["f1"] == 1.0
    assert results["tasks"]["qa"]["token"]["f1"] == 0.0
    assert results["overall"]["token"]["f1"] == 0.5  # mean of summ 1.0 and qa 0.0
    assert results["overall"]["token"]["std"] == 0.5  # population std of {1, 0}
    assert set(results["overall"]["sentence"]) >= {"f1", "std"}
    assert set(results["tasks"]["summ"]["token"]) >= {"f1", "precision", "recall", "ci"}
    assert results["missing_predictions"] == 1
    assert results["tasks"]["summ"]["n"] == 2
    assert results["shambench_version"] and "git_commit" in results and results["conventions"]["tokenizer"]


def bad_inputs(examples: Path, predictions: Path) -> dict[str, tuple[str, list[str]]]:
    """name -> (PRED file content, the message the one error line must contain)."""
    return {
        "malformed line": (
            '{"id": "a", "spans": []}\n{"id": "b", "spans": [[0, 2]\n',
            [f"{predictions}:2: not valid JSON"],
        ),
        "span past the end": (
            '{"id": "a", "spans": [[12, 40]]}\n',
            [f"{predictions}:1:", "example 'a': predicted span [12, 40) ends past the response (length 18)"],
        ),
        "unknown id": (
            '{"id": "a"}\n{"id": "zzz", "spans": [[0, 1]]}\n',
            [f"{predictions}:2:", "unknown example id 'zzz'"],
        ),
        "duplicate id": (
            '{"id": "a"}\n{"id": "b"}\n\n{"id": "a", "spans": [[0, 1]]}\n',
            [f"{predictions}:4:", "id 'a' repeats line 1"],
        ),
        "sentence labels of the wrong length": (
            '{"id": "b"}\n{"id": "a", "sentence_labels": [0, 1]}\n',
            [f"{predictions}:2:", "prediction 'a': 2 sentence_labels for 1 sentence units"],
        ),
        "reversed span": (
            '{"id": "a", "spans": [[5, 2]]}\n',
            [f"{predictions}:1: spans: span [5, 2) is empty or reversed (start must be < end)"],
        ),
        "negative offset": (
            '{"id": "a", "spans": [[0, 2], [-1, 5]]}\n',
            [f"{predictions}:1: spans.1: start must be a character offset of at least 0, got -1"],
        ),
        "unterminated string": (
            '{"id": "a", "spans": [], "meta": {"note": "cut}}\n',
            [f"{predictions}:1: not valid JSON (Unterminated string starting at column 43)"],
        ),
        "misspelt key": (
            '{"id": "a", "span": [[12, 17]]}\n',
            [f"{predictions}:1:", "unknown key 'span' (allowed: id, spans,"],
        ),
        "string offset": (
            '{"id": "a", "spans": [["12", 17]]}\n',
            [f"{predictions}:1:", 'spans.0: start must be an integer character offset, got "12"'],
        ),
        "float offset": (
            '{"id": "a", "spans": [[12, 17.0]]}\n',
            [f"{predictions}:1:", "spans.0: end must be an integer character offset, got 17.0"],
        ),
        "boolean offset": (
            '{"id": "a", "spans": [{"start": true, "end": 5}]}\n',
            [f"{predictions}:1:", "spans.0: start must be an integer character offset, got true"],
        ),
        "NaN score": (
            '{"id": "a", "scores": [{"start": 0, "end": 5, "score": NaN}]}\n',
            [f"{predictions}:1:", "NaN is not a JSON number"],
        ),
        "infinite score": (
            '{"id": "a", "scores": [[0, 5]], "meta": {"x": 1e999}}\n',
            [f"{predictions}:1:", "meta.x: expected a finite number"],
        ),
        "not an object": (
            '{"id": "b"}\n[1, 2]\n',
            [f"{predictions}:2:", "expected a JSON object, got an array"],
        ),
        "deep nesting": (
            '{"id": "a", "meta": ' + "[" * 40 + "]" * 40 + "}\n",
            [f"{predictions}:1:", "nested deeper than 32 levels"],
        ),
        "very deep nesting": (
            '{"id": "a", "meta": ' + "[" * 100000 + "]" * 100000 + "}\n",
            [f"{predictions}:1:", "nested deeper than 32 levels"],
        ),
        "boolean sentence label": (
            '{"id": "a", "sentence_labels": [true]}\n',
            [f"{predictions}:1:", "sentence_labels: expected integers, got true"],
        ),
        "missing id": (
            '{"spans": []}\n',
            [f"{predictions}:1:", "missing key 'id'"],
        ),
        "unknown key in a range": (
            '{"id": "a", "spans": [{"start": 0, "end": 5, "txt": "x"}]}\n',
            [f"{predictions}:1:", "spans.0: unknown key 'txt'"],
        ),
    }


def assert_nothing_written(out: Path) -> None:
    assert out.read_text() == BEFORE
    assert sorted(p.name for p in out.parent.iterdir()) == ["results.json"]  # no temp files left


@pytest.mark.parametrize(
    "case",
    [
        "malformed line",
        "span past the end",
        "unknown id",
        "duplicate id",
        "sentence labels of the wrong length",
        "reversed span",
        "negative offset",
        "unterminated string",
        "misspelt key",
        "string offset",
        "float offset",
        "boolean offset",
        "NaN score",
        "infinite score",
        "not an object",
        "deep nesting",
        "very deep nesting",
        "boolean sentence label",
        "missing id",
        "unknown key in a range",
    ],
)
def test_bad_predictions_give_one_clear_line_and_write_nothing(files, case):
    examples, predictions, out = files
    content, messages = bad_inputs(examples, predictions)[case]
    predictions.write_text(content)
    result = invoke("score", "--examples", examples, "--predictions", predictions, "--out", out)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    for message in messages:
        assert message in lines[0]
    assert result.stdout == ""
    assert_nothing_written(out)


def test_non_utf8_predictions_name_the_line(files):
    examples, predictions, out = files
    predictions.write_bytes(b'{"id": "b"}\n{"id": "a", "meta": {"n": "caf\xe9"}}\n')
    result = invoke("score", "--examples", examples, "--predictions", predictions, "--out", out)
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {predictions}:2: not UTF-8 text (byte 0xe9 at column 31)"
    assert_nothing_written(out)


@pytest.mark.usefixtures("command_line_settings")  # installed by the command's entry, which CliRunner skips
def test_score_runs_with_the_collector_paused_and_leaves_it_as_it_was(files, monkeypatch):
    import gc

    from shambench.reporting import tables
    from shambench.scoring.scorer import Scorer

    examples, predictions, out = files
    predictions.write_text('{"id": "a", "spans": [[12, 17]]}\n{"id": "b", "spans": [[0, 4]]}\n')
    seen = []
    printing = tables.print_results

    def watched(*args, **kwargs):
        seen.append(gc.isenabled())
        return printing(*args, **kwargs)

    monkeypatch.setattr(tables, "print_results", watched)
    args = ("score", "--examples", examples, "--predictions", predictions, "--out", out, "--bootstrap", 20)
    assert gc.isenabled()
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert seen == [False] and gc.isenabled() and gc.get_count()[0] < 100  # what it made aged on restart
    # An error ends the command with the collector running again too (and writes nothing).
    predictions.write_text('{"id": "zzz"}\n')
    assert invoke(*args).exit_code == 2 and gc.isenabled()
    # Nothing a collection could change: the scores are the library's, collector running.
    given = [Prediction(id="a", spans=[[12, 17]]), Prediction(id="b", spans=[[0, 4]])]
    expected = json.loads(Scorer(EXAMPLES, n_resamples=20).score(given).model_dump_json())
    assert json.loads(out.read_text())["overall"] == expected["overall"]


def test_bad_examples_and_missing_files(files, tmp_path):
    examples, predictions, out = files
    predictions.write_text('{"id": "a"}\n')
    bad_examples = tmp_path / "bad_examples.jsonl"
    bad_examples.write_text(
        '{"id": "x", "dataset": "d", "task": "t", "response": "Short."}\n'
        '{"id": "y", "dataset": "d", "task": "t", "response": "Short.", "hallu_spans": [[0, 9]]}\n'
    )
    no_dataset = tmp_path / "no_dataset.jsonl"
    no_dataset.write_text('{"id": "x", "task": "t", "response": "Short."}\n')
    cases = [
        (["--examples", bad_examples, "--predictions", predictions], [f"{bad_examples}:2:", "example 'y'"]),
        (["--examples", no_dataset, "--predictions", predictions], [f"{no_dataset}:1: missing key 'dataset' (required: id, dataset, task, response)"]),
        (["--examples", tmp_path / "nope.jsonl", "--predictions", predictions], [f"{tmp_path / 'nope.jsonl'}: file not found"]),
        (["--examples", examples, "--predictions", tmp_path / "gone.jsonl"], [f"{tmp_path / 'gone.jsonl'}: file not found"]),
    ]  # fmt: skip
    for args, messages in cases:
        result = invoke("score", *args, "--out", out)
        assert result.exit_code == 2, result.output
        line = result.stderr.strip()
        assert "\n" not in line and line.startswith("error: ")
        for message in messages:
            assert message in line
        assert_nothing_written(out)


def test_eval_with_an_unknown_detector_suggests_a_name(files, tmp_path):
    examples, _, _ = files
    result = invoke("eval", "--detector", "overlapp", "--examples", examples, "--run-dir", tmp_path / "run")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: unknown detector 'overlapp'; did you mean 'overlap'? (see `shambench list detectors`)"
    )
    assert not (tmp_path / "run").exists()


def test_score_needs_predictions_or_a_run_dir():
    result = invoke("score")
    assert result.exit_code == 2
    assert "give RUN_DIR, or --predictions with --examples or --datasets" in result.stderr


def test_rescoring_a_run_dir_refuses_a_data_selection_it_would_ignore(files, tmp_path):
    examples, _, _ = files
    run = tmp_path / "run"
    assert invoke("eval", "--detector", "all", "--examples", examples, "--run-dir", run, "--no-progress",
                  "--bootstrap", "20").exit_code == 0  # fmt: skip
    before = (run / "results.json").read_text()
    result = invoke("score", run, "--limit", "1", "--examples", examples)
    assert result.exit_code == 2
    assert "RUN_DIR is rescored on the examples of its config.json; drop --examples, --limit" in result.stderr
    assert (run / "results.json").read_text() == before


def test_datasets_and_examples_together_are_refused(files, tmp_path):
    examples, predictions, out = files
    predictions.write_text('{"id": "a"}\n')
    for args in (
        ["score", "--examples", examples, "--datasets", "ragtruth", "--predictions", predictions, "--out", out],
        ["eval", "--detector", "all", "--examples", examples, "-d", "ragtruth", "--run-dir", tmp_path / "run"],
    ):
        result = invoke(*args)
        assert result.exit_code == 2, result.output
        assert result.stderr.strip() == (
            "error: give datasets or an examples file, not both (check --datasets, --examples and --data-dir, or --suite of eval)"
        )
    assert_nothing_written(out)
    assert not (tmp_path / "run").exists()


def test_sopo_compat_needs_the_math_shepherd_suite(files, tmp_path):
    examples, _, _ = files
    result = invoke("eval", "--detector", "all", "--examples", examples, "--run-dir", tmp_path / "run", "--sopo-compat")
    assert result.exit_code == 2
    assert "--sopo-compat needs --suite math-shepherd" in result.stderr
    assert not (tmp_path / "run").exists()


def shambench(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "shambench", *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_python_dash_m_reports_bad_input_the_same_way(files, tmp_path):
    examples, predictions, out = files
    predictions.write_text('{"id": "a"}\n{"id": "b", oops}\n')
    proc = shambench("score", "--examples", examples, "--predictions", predictions, "--out", out, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: {predictions}:2: not valid JSON")
    assert proc.stderr.count("\n") == 1
    assert_nothing_written(out)


def test_a_reader_that_leaves_early_loses_no_file(files, tmp_path):
    # `shambench score ... --out F | head -1`: the table's reader goes after one line; the JSON is still written
    examples, predictions, out = files
    predictions.write_text('{"id": "a", "spans": [[12, 17]]}\n')
    args = ["score", "--examples", examples, "--predictions", predictions, "--out", out, "--bootstrap", 20]
    proc = subprocess.Popen(
        [sys.executable, "-m", "shambench", *map(str, args)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # the reader is gone before the first line
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, stderr
    assert stderr == ""
    assert json.loads(out.read_text())["partitions"]["summ/toy"]["token"]["f1"] == 1.0


def test_python_dash_m_help_equals_the_console_script(tmp_path):
    script = Path(sys.executable).with_name("shambench")
    assert script.exists(), "the project is not installed in this environment"
    console = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    module = shambench("--help", cwd=tmp_path)
    assert console.returncode == module.returncode == 0
    assert module.stdout == console.stdout
    assert "Usage: shambench [OPTIONS] COMMAND [ARGS]..." in module.stdout
    for name in ("score", "eval", "list"):
        assert f"  {name} " in module.stdout


def test_every_subcommand_has_help():
    paths = [tuple(path.split()[1:]) for path, _ in every_command() if path != "shambench"]
    assert {("score",), ("eval",), ("list",), ("list", "detectors"), ("list", "datasets")} <= set(paths)
    for path in paths:
        result = invoke(*path, "--help")
        assert result.exit_code == 0, (path, result.output)
        assert result.stdout.startswith(f"Usage: shambench {' '.join(path)} "), (path, result.stdout[:80])
        # A description beyond the usage line and the options list.
        assert len(result.stdout.split("Options:")[0].strip().splitlines()) >= 3, path
